//! The binding against a real cluster (`scripts/ceph-cluster.sh`, with cephx, on a loopback
//! address of its own): connect as `client.srp` with its keyring, open an image, write and
//! read across an object boundary from owned and registered memory, the allocated extents,
//! discard, compare-and-write (match and mismatch), flush; every refusal a clear error
//! (unknown image and pool, a wrong key); an image dropped with operations in flight runs
//! every completion routine first; one whose last owner is a completion routine is closed
//! without deadlocking librbd's thread.

use ib_verbs::mem::MemBlock;
use rbd_client::{Cluster, IoBuf, RbdError};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;
use testkit::ceph::CephCluster;

const MIB: u64 = 1 << 20;

type Got = (Result<usize, RbdError>, Option<IoBuf>);

/// A completion routine and where its result arrives.
fn done() -> (rbd_client::Completion, Receiver<Got>) {
    let (tx, rx) = channel();
    (
        Box::new(move |r, b| {
            let _ = tx.send((r, b));
        }),
        rx,
    )
}

fn wait(rx: &Receiver<Got>) -> Got {
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the completion routine ran")
}

#[test]
fn an_image_through_librbd_against_a_real_cluster() {
    if let Err(e) = Cluster::available() {
        panic!("librbd is not loadable here: {e}");
    }
    let c = CephCluster::start("127.0.170.1", "rbd-client");
    c.rbd(&["create", "--size", "64M", "rbd/t1"]);
    let keyring = c.client_keyring();
    let cluster = Cluster::connect(
        &c.conf(),
        Some("srp"),
        Some(&keyring),
        &[("rbd_cache", "false")],
    )
    .expect("connect as client.srp");
    let pool = cluster.pool("rbd").expect("pool rbd");
    let img = pool.open("t1").expect("open t1");
    assert_eq!(img.size().expect("size"), 64 * MIB);
    // Debian's default features include exclusive-lock; layering alone does not.
    assert!(img.has_exclusive_lock().expect("features"));
    c.rbd(&[
        "create",
        "--size",
        "4M",
        "--image-feature",
        "layering",
        "rbd/plain",
    ]);
    let plain = pool.open("plain").expect("open plain");
    assert!(!plain.has_exclusive_lock().expect("features"));
    drop(plain);

    // 8 KiB across the boundary of the first two 4 MiB objects.
    let at = 4 * MIB - 4096;
    let pattern: Vec<u8> = (0..8192u32).map(|i| (i * 7 + 3) as u8).collect();
    let (d, rx) = done();
    img.write(at, IoBuf::vec(pattern.clone()), d);
    let (r, back) = wait(&rx);
    assert_eq!(r.expect("write"), 8192);
    assert_eq!(
        back.and_then(IoBuf::into_vec).as_deref(),
        Some(&pattern[..])
    );
    // Read into registered memory.
    let block = MemBlock::new(64 << 10);
    let (d, rx) = done();
    img.read(at, IoBuf::span(&block, 4096, 8192).expect("span"), d);
    assert_eq!(wait(&rx).0.expect("read"), 8192);
    let mut got = vec![0u8; 8192];
    block.read(4096, &mut got).expect("block read");
    assert_eq!(got, pattern, "the bytes read into the block");

    let ext = img.allocated(0, 64 * MIB).expect("allocated");
    let covered = |a: u64, b: u64| ext.iter().any(|e| e.offset <= a && b <= e.offset + e.len);
    assert!(
        covered(at, at + 4096) && covered(4 * MIB, 4 * MIB + 4096),
        "the written range is allocated: {ext:?}"
    );
    let total: u64 = ext.iter().map(|e| e.len).sum();
    assert!(total <= 8 * MIB, "only the two objects written: {ext:?}");

    // Compare and write: librbd takes one 512-byte sector at most, within one sector and
    // one stripe unit (`ImageCompareAndWriteRequest::prune_object_extents`,
    // src/librbd/io/ImageRequest.cc: EINVAL otherwise) — what a LUN on RBD can advertise.
    let new: Vec<u8> = vec![0x5a; 512];
    let (d, rx) = done();
    img.compare_and_write(
        at,
        IoBuf::vec(pattern[..512].to_vec()),
        IoBuf::vec(new.clone()),
        d,
    );
    assert_eq!(wait(&rx).0.expect("compare and write (match)"), 512);
    let (d, rx) = done();
    img.compare_and_write(at, IoBuf::vec(vec![0; 1024]), IoBuf::vec(vec![0; 1024]), d);
    assert_eq!(
        wait(&rx).0.expect_err("two sectors").errno(),
        Some(22),
        "librbd refuses a compare and write of more than one sector"
    );
    let mut stale = pattern[..512].to_vec();
    stale[..100].copy_from_slice(&new[..100]);
    let (d, rx) = done();
    img.compare_and_write(at, IoBuf::vec(stale), IoBuf::vec(vec![0x11; 512]), d);
    match wait(&rx).0 {
        Err(RbdError::Mismatch { offset }) => {
            assert_eq!(offset, 100, "the offset within the compared range");
        }
        other => panic!("a stale comparison must not write: {other:?}"),
    }
    let (d, rx) = done();
    img.read(at, IoBuf::vec(vec![0; 512]), d);
    let (r, back) = wait(&rx);
    r.expect("read");
    assert_eq!(
        back.and_then(IoBuf::into_vec),
        Some(new),
        "nothing written on a mismatch"
    );

    // WRITE SAME with UNMAP's guarantee: zeros read back.
    let (d, rx) = done();
    img.write_zeroes(at, 8192, d);
    wait(&rx).0.expect("write zeroes");
    let (d, rx) = done();
    img.read(at, IoBuf::vec(vec![0xff; 8192]), d);
    let (r, back) = wait(&rx);
    r.expect("read");
    assert!(
        back.and_then(IoBuf::into_vec)
            .expect("vec")
            .iter()
            .all(|&b| b == 0)
    );
    // A discard of a whole object deallocates it (a partial one may be skipped:
    // rbd_skip_partial_discard, so UNMAP promises no zeros).
    let (d, rx) = done();
    img.write(4 * MIB, IoBuf::vec(vec![0x77; 4096]), d);
    wait(&rx).0.expect("write");
    let (d, rx) = done();
    img.discard(4 * MIB, 4 * MIB, d);
    wait(&rx).0.expect("discard");
    let ext = img.allocated(0, 64 * MIB).expect("allocated");
    assert!(
        !ext.iter()
            .any(|e| e.offset < 8 * MIB && 4 * MIB < e.offset + e.len),
        "the discarded object holds nothing: {ext:?}"
    );
    let (d, rx) = done();
    img.flush(d);
    wait(&rx).0.expect("flush");

    // Refusals, each a clear error.
    let e = pool.open("nope").expect_err("no such image");
    assert_eq!(e.errno(), Some(libc_enoent()), "{e}");
    assert!(e.to_string().contains("rbd_open"), "{e}");
    let e = cluster.pool("nope").expect_err("no such pool");
    assert_eq!(e.errno(), Some(libc_enoent()), "{e}");
    let bad = c.dir().join("bad.keyring");
    std::fs::write(
        &bad,
        "[client.srp]\n\tkey = AQBzTnJhAAAAABAAqRzq7+ty5P5HVKmG0ZrFbg==\n",
    )
    .expect("write a wrong keyring");
    let e = Cluster::connect(
        &c.conf(),
        Some("srp"),
        Some(&bad),
        &[("client_mount_timeout", "10")],
    )
    .expect_err("a wrong key is refused");
    eprintln!("wrong key: {e}");
    assert!(e.errno().is_some(), "{e}");

    // Dropped with writes in flight: every routine has run when the drop returns.
    let ran = Arc::new(AtomicUsize::new(0));
    for i in 0..16u64 {
        let ran = ran.clone();
        img.write(
            i * 65536,
            IoBuf::vec(vec![i as u8; 65536]),
            Box::new(move |r, _| {
                r.expect("write in flight");
                ran.fetch_add(1, Ordering::SeqCst);
            }),
        );
    }
    drop(img);
    assert_eq!(
        ran.load(Ordering::SeqCst),
        16,
        "every routine ran before the close"
    );

    // The image's last owner is a completion routine (a LUN removed while its last write
    // was in flight): the routine returns, and the image is closed on a thread of its own
    // (closing it on librbd's completion thread, which waits for that very routine,
    // deadlocks: without the hand-off this test times out).
    let img = Arc::new(pool.open("t1").expect("open again"));
    let (tx, rx) = channel();
    let (dropped_tx, dropped) = channel::<()>();
    let owner = img.clone();
    img.write(
        0,
        IoBuf::vec(vec![7u8; 4096]),
        Box::new(move |r, _| {
            r.expect("the last write");
            // The test's own reference is gone first: this one is the last.
            let _ = dropped.recv_timeout(Duration::from_secs(30));
            assert_eq!(
                Arc::strong_count(&owner),
                1,
                "the routine holds the last owner"
            );
            drop(owner);
            let _ = tx.send(());
        }),
    );
    drop(img);
    let _ = dropped_tx.send(());
    rx.recv_timeout(Duration::from_secs(60))
        .expect("a routine that dropped the image's last owner returned");
    let again = pool.open("t1").expect("open after the hand-off close");
    let mut back = vec![0u8; 4096];
    again.read_blocking(0, &mut back).expect("read back");
    assert_eq!(back, vec![7u8; 4096], "the last write landed");
}

fn libc_enoent() -> i32 {
    2
}
