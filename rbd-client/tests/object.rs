//! RADOS objects for shared state, against a real cluster (`scripts/ceph-cluster.sh`,
//! cephx, `client.srp`; 127.0.175.1), with two clients as two appliances would be: an
//! object created only if absent, replaced only if its attribute still holds the value
//! the writer saw (the loser of a race told so, nothing written); a notification delivered
//! to the other client's watch with its payload and acknowledged from another thread, the
//! notifier told who answered; a watcher that does not answer named as timed out; and that
//! client fenced by the blocklist: its reads fail, the other's go on.

use rbd_client::{Cluster, Notification, RbdError};
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};
use testkit::ceph::CephCluster;

fn client(c: &CephCluster) -> Cluster {
    Cluster::connect(
        &c.conf(),
        Some("srp"),
        Some(&c.client_keyring()),
        &[("rados_osd_op_timeout", "10")],
    )
    .expect("connect as client.srp")
}

#[test]
fn shared_state_in_a_rados_object() {
    let c = CephCluster::start("127.0.175.1", "rbd-object");
    let (a, b) = (client(&c), client(&c));
    let (ida, idb) = (
        a.instance_id().expect("id a"),
        b.instance_id().expect("id b"),
    );
    assert_ne!(ida, idb, "two clients, two instance ids");
    let addr_b = b.address().expect("address b");
    assert!(addr_b.contains(':') && addr_b.contains('/'), "{addr_b}");
    let oa = a
        .pool("rbd")
        .and_then(|p| p.object("srp.test"))
        .expect("object a");
    let ob = b
        .pool("rbd")
        .and_then(|p| p.object("srp.test"))
        .expect("object b");

    // Compare-and-set.
    assert_eq!(oa.read(4096).expect("read"), None, "absent at first");
    assert!(oa.replace_if("v", None, b"1", b"one").expect("create"));
    assert!(
        !ob.replace_if("v", None, b"1", b"uno")
            .expect("create again"),
        "exists"
    );
    assert!(
        ob.replace_if("v", Some(b"1"), b"2", b"two")
            .expect("replace")
    );
    assert!(
        !oa.replace_if("v", Some(b"1"), b"2", b"deux")
            .expect("stale"),
        "a writer that saw version 1 loses to the one that moved it on"
    );
    assert_eq!(oa.read(4096).expect("read").as_deref(), Some(&b"two"[..]));
    assert_eq!(oa.attr("v", 64).expect("attr").as_deref(), Some(&b"2"[..]));
    assert_eq!(oa.attr("none", 64).expect("attr"), None);
    ob.set_attr("member.b", addr_b.as_bytes())
        .expect("set an attribute");
    assert_eq!(
        oa.attr("member.b", 256).expect("attr").as_deref(),
        Some(addr_b.as_bytes())
    );

    // Notify B; B acknowledges from another thread; A learns B answered.
    let (tx, rx) = channel::<Notification>();
    let watch = ob
        .watch(
            move |n| {
                let _ = tx.send(n);
            },
            |e| eprintln!("watch error: {e}"),
        )
        .expect("watch");
    let acker = std::thread::spawn(move || {
        let n = rx.recv_timeout(Duration::from_secs(30)).expect("notified");
        let got = (n.notifier, n.payload.clone());
        n.ack().expect("ack");
        // The second notification is left unanswered.
        let silent = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("notified again");
        (got, silent)
    });
    let r = oa
        .notify(b"gen 2", Duration::from_secs(10))
        .expect("notify");
    assert_eq!((r.acked, r.timed_out), (vec![idb], vec![]), "B answered");
    let r = oa.notify(b"gen 3", Duration::from_secs(1)).expect("notify");
    assert_eq!(
        (r.acked, r.timed_out),
        (vec![], vec![idb]),
        "B is named as silent"
    );
    let ((notifier, payload), silent) = acker.join().expect("acker");
    assert_eq!((notifier, payload), (ida, b"gen 2".to_vec()));
    drop(silent);
    drop(watch);

    // B fenced: its reads fail; A's go on.
    a.blocklist(&addr_b, Duration::from_secs(600))
        .expect("blocklist b");
    let end = Instant::now() + Duration::from_secs(30);
    let fenced: RbdError = loop {
        match ob.read(4096) {
            Err(e) => break e,
            Ok(_) => {
                assert!(
                    Instant::now() < end,
                    "B still reads 30 s after being blocklisted"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    };
    eprintln!("fenced: {fenced}");
    assert_eq!(
        oa.read(4096).expect("A still reads").as_deref(),
        Some(&b"two"[..])
    );
}
