//! VERIFY reads the medium as READ does: BYTCHK=0 reads the whole range (in bounded pieces)
//! so that a block the backend cannot read answers MEDIUM ERROR, UNRECOVERED READ ERROR;
//! and the compare of BYTCHK=1 takes the LU's read order, so it never sees an atomic write
//! in progress.

mod common;

use common::*;
use scsi::{SenseCode, Status};
use srp_target::backend::Op;
use srp_target::{Backend, BackendError, BlockSize, LogicalUnit, LuConfig};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// A RAM disk whose reads of any range holding block `bad` fail (EIO); it records the
/// number of reads and the largest.
#[derive(Debug)]
struct BadBlock {
    ram: ByteRam,
    bad: u64,
    reads: Arc<AtomicUsize>,
    largest_read_bytes: Arc<AtomicUsize>,
}

impl Backend for BadBlock {
    fn block_size(&self) -> BlockSize {
        self.ram.block_size()
    }
    fn blocks(&self) -> u64 {
        self.ram.blocks()
    }
    fn read_at(&self, lba: scsi::Lba, buf: &mut [u8]) -> Result<(), BackendError> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.largest_read_bytes
            .fetch_max(buf.len(), Ordering::Relaxed);
        let blocks = (buf.len() / 512) as u64;
        if (lba.0..lba.0 + blocks).contains(&self.bad) {
            return Err(BackendError::Io {
                op: Op::Read,
                path: "bad-block".into(),
                source: std::io::Error::from_raw_os_error(5), // EIO
            });
        }
        self.ram.read_at(lba, buf)
    }
    fn write_at(&self, lba: scsi::Lba, buf: &[u8]) -> Result<(), BackendError> {
        self.ram.write_at(lba, buf)
    }
    fn flush(&self) -> Result<(), BackendError> {
        self.ram.flush()
    }
    fn unmap(&self, lba: scsi::Lba, n: scsi::BlockCount) -> Result<(), BackendError> {
        self.ram.unmap(lba, n)
    }
}

fn verify10(flags: u8, lba: u32, blocks: u16) -> [u8; 10] {
    let mut c = read10(lba, blocks);
    c[0] = 0x2f;
    c[1] = flags;
    c
}

#[test]
fn verify_bytchk_0_reads_the_medium() {
    let reads = Arc::new(AtomicUsize::new(0));
    let largest = Arc::new(AtomicUsize::new(0));
    let lu = LogicalUnit::new(
        Box::new(BadBlock {
            ram: ByteRam::new(8192, BlockSize::B512),
            bad: 5000,
            reads: reads.clone(),
            largest_read_bytes: largest.clone(),
        }),
        LuConfig::new(identity("bad-block")),
    );
    // A range without the bad block: GOOD, read whole in bounded pieces (4 MiB here).
    good(&lu, &cdb16(0x8f, 0, 0, 4096), &[]);
    assert!(reads.load(Ordering::Relaxed) >= 2, "read in pieces");
    assert!(largest.load(Ordering::Relaxed) <= 1 << 20, "bounded pieces");
    good(&lu, &verify10(0, 4990, 10), &[]);
    // Ranges holding it: MEDIUM ERROR, UNRECOVERED READ ERROR (03h/11h/00h) with the first
    // LBA of the piece read as INFORMATION, as READ answers.
    let s = check(
        &lu,
        &verify10(0, 4990, 11),
        &[],
        SenseCode::UNRECOVERED_READ_ERROR,
    );
    assert_eq!(
        (u8::from(s.code().key), s.code().asc, s.code().ascq),
        (0x03, 0x11, 0x00)
    );
    assert_eq!(s.information(), Some(4990));
    let r = check(
        &lu,
        &read10(4990, 11),
        &[],
        SenseCode::UNRECOVERED_READ_ERROR,
    );
    assert_eq!(r.information(), s.information(), "as READ");
    // VERIFY(12), and a long VERIFY(16) whose error lies in a later piece: that piece's LBA,
    // at or before the bad block and past the start.
    let mut v12 = [0u8; 12];
    v12[0] = 0xaf;
    v12[2..6].copy_from_slice(&5000u32.to_be_bytes());
    v12[9] = 1;
    let s = check(&lu, &v12, &[], SenseCode::UNRECOVERED_READ_ERROR);
    assert_eq!(s.information(), Some(5000));
    let s = check(
        &lu,
        &cdb16(0x8f, 0, 0, 8192),
        &[],
        SenseCode::UNRECOVERED_READ_ERROR,
    );
    let at = s.information().expect("INFORMATION");
    assert!((1..=5000).contains(&at), "{at}");
    // BYTCHK=1 reads too: the same answer.
    let s = check(
        &lu,
        &verify10(0x02, 5000, 1),
        &[0; 512],
        SenseCode::UNRECOVERED_READ_ERROR,
    );
    assert_eq!(s.information(), Some(5000));
}

/// The parties of a write held in the backend: it says it arrived, then waits to go.
type Gate = Arc<Mutex<Option<(mpsc::Sender<()>, mpsc::Receiver<()>)>>>;

/// A RAM disk whose next write, once armed, stops in the backend until let go.
#[derive(Debug)]
struct GatedWrites {
    ram: ByteRam,
    gate: Gate,
}

impl Backend for GatedWrites {
    fn block_size(&self) -> BlockSize {
        self.ram.block_size()
    }
    fn blocks(&self) -> u64 {
        self.ram.blocks()
    }
    fn read_at(&self, lba: scsi::Lba, buf: &mut [u8]) -> Result<(), BackendError> {
        self.ram.read_at(lba, buf)
    }
    fn write_at(&self, lba: scsi::Lba, buf: &[u8]) -> Result<(), BackendError> {
        let armed = self.gate.lock().expect("gate").take();
        if let Some((arrived, go)) = armed {
            arrived.send(()).expect("test waits");
            go.recv().expect("test lets go");
        }
        self.ram.write_at(lba, buf)
    }
    fn flush(&self) -> Result<(), BackendError> {
        self.ram.flush()
    }
    fn unmap(&self, lba: scsi::Lba, n: scsi::BlockCount) -> Result<(), BackendError> {
        self.ram.unmap(lba, n)
    }
}

#[test]
fn verify_compare_waits_for_an_atomic_write() {
    let gate: Gate = Arc::default();
    let lu = LogicalUnit::new(
        Box::new(GatedWrites {
            ram: ByteRam::new(16, BlockSize::B512),
            gate: gate.clone(),
        }),
        LuConfig::new(identity("gated")),
    );
    good(&lu, &write10(0, 1, false), &[1; 512]);
    let (arrived_tx, arrived) = mpsc::channel();
    let (go, go_rx) = mpsc::channel();
    *gate.lock().expect("gate") = Some((arrived_tx, go_rx));
    let mut atomic = cdb16(0x9c, 0, 0, 0);
    atomic[13] = 1; // WRITE ATOMIC(16), TRANSFER LENGTH 1
    let lu = &lu;
    std::thread::scope(|s| {
        // Owned here, so that a failing assertion drops it and the writer ends too.
        let go = go;
        let writer = s.spawn(move || run(lu, &atomic, &[2; 512]).0);
        arrived
            .recv_timeout(Duration::from_secs(10))
            .expect("the atomic write reached the backend");
        // The write holds the LU's exclusive order, its block not yet written. A VERIFY
        // comparing with the new data must wait for it (without the read order it would
        // read the old block and answer MISCOMPARE at once).
        let (done_tx, done) = mpsc::channel();
        let verifier = s.spawn(move || {
            let out = run(lu, &verify10(0x02, 0, 1), &[2; 512]).0;
            done_tx.send(()).expect("test waits");
            out
        });
        assert!(
            done.recv_timeout(Duration::from_millis(300)).is_err(),
            "VERIFY answered during the atomic write"
        );
        go.send(()).expect("writer waits");
        let w = writer.join().expect("writer");
        assert_eq!(w.status, Status::Good, "{:?}", w.sense);
        let v = verifier.join().expect("verifier");
        assert_eq!(v.status, Status::Good, "{:?}", v.sense);
    });
}
