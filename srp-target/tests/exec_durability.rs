//! A failed flush is latched (issue #14, Deliver 2): once the backend's flush has failed,
//! every later SYNCHRONIZE CACHE and every write that must be durable (FUA, or any write
//! with the write cache off) is answered MEDIUM ERROR, WRITE ERROR — even when the backend
//! would now report success, as Linux does after dropping the pages it could not write —
//! until the operator clears it. Writes not asked to be durable still complete. UNMAP and
//! WRITE SAME flush when the write cache is off; a START STOP UNIT stop flushes and leaves
//! the unit ready. Flushes are counted by a backend that can be told to fail them.

mod common;

use common::*;
use scsi::{BlockCount, Lba, SenseCode};
use srp_target::backend::Op;
use srp_target::{Backend, BackendError, BlockSize, LogicalUnit, LuConfig, RamBackend};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// What the test controls and sees of the backend.
#[derive(Debug, Default)]
struct Knobs {
    fail_flush: AtomicBool,
    flushes: AtomicU64,
    unmaps: AtomicU64,
}

/// A RAM disk whose flush fails while told to, counting flushes.
#[derive(Debug)]
struct FlakyFlush {
    ram: RamBackend,
    knobs: Arc<Knobs>,
}

impl Backend for FlakyFlush {
    fn block_size(&self) -> BlockSize {
        self.ram.block_size()
    }
    fn blocks(&self) -> u64 {
        self.ram.blocks()
    }
    fn read_at(&self, lba: Lba, buf: &mut [u8]) -> Result<(), BackendError> {
        self.ram.read_at(lba, buf)
    }
    fn write_at(&self, lba: Lba, buf: &[u8]) -> Result<(), BackendError> {
        self.ram.write_at(lba, buf)
    }
    fn flush(&self) -> Result<(), BackendError> {
        self.knobs.flushes.fetch_add(1, Ordering::SeqCst);
        if self.knobs.fail_flush.load(Ordering::SeqCst) {
            return Err(BackendError::Io {
                op: Op::Flush,
                path: "flaky".into(),
                source: std::io::Error::from_raw_os_error(5), // EIO
            });
        }
        Ok(())
    }
    fn unmap(&self, lba: Lba, blocks: BlockCount) -> Result<(), BackendError> {
        self.knobs.unmaps.fetch_add(1, Ordering::SeqCst);
        self.ram.unmap(lba, blocks)
    }
}

fn flaky_lu(write_cache: bool) -> (LogicalUnit, Arc<Knobs>) {
    let knobs = Arc::new(Knobs::default());
    let b = FlakyFlush {
        ram: RamBackend::new(64, BlockSize::B512).expect("ram"),
        knobs: knobs.clone(),
    };
    let cfg = LuConfig {
        write_cache,
        ..LuConfig::new(identity("flaky"))
    };
    (LogicalUnit::new(Box::new(b), cfg), knobs)
}

const SYNC10: [u8; 10] = [0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0];

#[test]
fn a_failed_flush_is_latched_until_cleared() {
    let (lu, knobs) = flaky_lu(true);
    let data = pattern(512, 1);
    good(&lu, &write10(1, 1, true), &data);
    good(&lu, &SYNC10, &[]);
    assert_eq!(lu.flush_errors(), 0);
    // The flush fails once...
    knobs.fail_flush.store(true, Ordering::SeqCst);
    check(&lu, &SYNC10, &[], SenseCode::WRITE_ERROR);
    assert_eq!(lu.flush_errors(), 1);
    assert!(lu.flush_error().expect("latched").contains("flush"));
    // ...and although the backend would succeed now, nothing durable is acknowledged.
    knobs.fail_flush.store(false, Ordering::SeqCst);
    let before = knobs.flushes.load(Ordering::SeqCst);
    check(&lu, &SYNC10, &[], SenseCode::WRITE_ERROR);
    check(&lu, &write10(2, 1, true), &data, SenseCode::WRITE_ERROR);
    check(&lu, &cdb16(0x91, 0, 0, 0), &[], SenseCode::WRITE_ERROR);
    assert_eq!(
        knobs.flushes.load(Ordering::SeqCst),
        before,
        "a latched LU does not ask the backend"
    );
    // The FUA write was refused before it touched the medium.
    assert_eq!(good(&lu, &read10(2, 1), &[]), vec![0; 512]);
    // A write nothing was promised about still completes.
    good(&lu, &write10(3, 1, false), &data);
    assert_eq!(lu.counters().flush_errors, 1);
    // The operator clears it: served again.
    assert!(lu.clear_flush_error().is_some());
    assert!(lu.clear_flush_error().is_none(), "cleared once");
    good(&lu, &SYNC10, &[]);
    good(&lu, &write10(2, 1, true), &data);
    assert_eq!(lu.flush_errors(), 1, "the count stays");
}

#[test]
fn with_the_write_cache_off_every_write_is_refused_while_latched() {
    let (lu, knobs) = flaky_lu(false);
    let data = pattern(512, 2);
    good(&lu, &write10(1, 1, false), &data);
    knobs.fail_flush.store(true, Ordering::SeqCst);
    // The write reached the medium, its flush failed: WRITE ERROR, and latched.
    check(&lu, &write10(2, 1, false), &data, SenseCode::WRITE_ERROR);
    knobs.fail_flush.store(false, Ordering::SeqCst);
    check(&lu, &write10(4, 1, false), &data, SenseCode::WRITE_ERROR);
    assert_eq!(
        good(&lu, &read10(4, 1), &[]),
        vec![0; 512],
        "refused before writing"
    );
    // WRITE SAME and UNMAP too.
    check(&lu, &cdb16(0x93, 0, 8, 4), &data, SenseCode::WRITE_ERROR);
    let unmap_list = [
        vec![0, 22, 0, 16, 0, 0, 0, 0],
        8u64.to_be_bytes().to_vec(),
        vec![0, 0, 0, 2, 0, 0, 0, 0],
    ]
    .concat();
    let unmap_cdb = [0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0];
    check(&lu, &unmap_cdb, &unmap_list, SenseCode::WRITE_ERROR);
    assert_eq!(
        knobs.unmaps.load(Ordering::SeqCst),
        0,
        "refused before unmapping"
    );
}

#[test]
fn unmap_and_write_same_are_durable_when_the_write_cache_is_off() {
    let (lu, knobs) = flaky_lu(false);
    let flushes = || knobs.flushes.load(Ordering::SeqCst);
    let n = flushes();
    // WRITE SAME(16), 4 blocks: one flush after the range.
    good(&lu, &cdb16(0x93, 0, 8, 4), &pattern(512, 3));
    assert_eq!(flushes(), n + 1);
    // WRITE SAME(16) with UNMAP of zeros: deallocated, then flushed.
    good(&lu, &cdb16(0x93, 0x08, 8, 4), &[0; 512]);
    assert_eq!(flushes(), n + 2);
    // UNMAP of two extents: one flush.
    let list = [
        vec![0, 38, 0, 32, 0, 0, 0, 0],
        8u64.to_be_bytes().to_vec(),
        vec![0, 0, 0, 2, 0, 0, 0, 0],
        20u64.to_be_bytes().to_vec(),
        vec![0, 0, 0, 2, 0, 0, 0, 0],
    ]
    .concat();
    good(&lu, &[0x42, 0, 0, 0, 0, 0, 0, 0, 40, 0], &list);
    assert_eq!(knobs.unmaps.load(Ordering::SeqCst), 3);
    assert_eq!(flushes(), n + 3);
    // With the write cache on, none of them flushes.
    let (lu, knobs) = flaky_lu(true);
    good(&lu, &cdb16(0x93, 0, 8, 4), &pattern(512, 3));
    good(&lu, &[0x42, 0, 0, 0, 0, 0, 0, 0, 40, 0], &list);
    assert_eq!(knobs.flushes.load(Ordering::SeqCst), 0);
}

#[test]
fn a_stop_flushes_and_leaves_the_unit_ready() {
    // START STOP UNIT with START=0: the write cache is flushed (SBC-4 5.25), unless
    // NO_FLUSH; the unit stays ready (a shared LU: other initiators must not see NOT READY).
    let (lu, knobs) = flaky_lu(true);
    let flushes = || knobs.flushes.load(Ordering::SeqCst);
    let data = pattern(512, 4);
    good(&lu, &write10(1, 1, false), &data);
    let n = flushes();
    good(&lu, &[0x1b, 0, 0, 0, 0x00, 0], &[]);
    assert_eq!(flushes(), n + 1, "STOP flushed");
    good(&lu, &[0; 6], &[]);
    assert_eq!(good(&lu, &read10(1, 1), &[]), data);
    let other = nexus_data_of(srp::wire::PortId([0xb0; 16]), 1);
    let mut din = Vec::new();
    let out = lu
        .execute(&other.nexus(), &[0; 6], &[], &mut din)
        .expect("no transport error");
    assert_eq!(
        out.status,
        scsi::Status::Good,
        "another initiator: {:?}",
        out.sense
    );
    // NO_FLUSH (byte 4 bit 2): no flush. IMMED: the same.
    good(&lu, &[0x1b, 0, 0, 0, 0x04, 0], &[]);
    assert_eq!(flushes(), n + 1);
    good(&lu, &[0x1b, 0x01, 0, 0, 0x00, 0], &[]);
    assert_eq!(flushes(), n + 2);
    // A stop whose flush fails says so.
    knobs.fail_flush.store(true, Ordering::SeqCst);
    check(&lu, &[0x1b, 0, 0, 0, 0x00, 0], &[], SenseCode::WRITE_ERROR);
    // START=1: nothing to do, no flush.
    knobs.fail_flush.store(false, Ordering::SeqCst);
    let m = flushes();
    good(&lu, &[0x1b, 0, 0, 0, 0x01, 0], &[]);
    assert_eq!(flushes(), m);
}
