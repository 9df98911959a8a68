//! Each command's rule (`exec/rules.rs`) against what the command is seen to do (issue
//! #29, Deliver 1): every command of the supported table that writes — the list comes
//! from the table, the commands are built by hand (`common/writers.rs`) — is checked on a
//! file LU whose every write, discard and flush is recorded (`writelog`):
//!
//! - the rules call writing exactly the commands seen to write;
//! - a Write Exclusive reservation of another I_T nexus stops each of them before it
//!   touches the medium, and lets the holder's through;
//! - with the write cache off each is flushed after its last write and before its status;
//!   with it on, FUA does the same for those that have it, WRITE AND VERIFY is always
//!   flushed, and the rest are left to the cache.

mod common;

use common::writers::{self, DurableWhen, Place, WRITERS, WriteOp};
use common::*;
use scsi::Status;
use srp_target::writelog::WriteLog;
use srp_target::writelog::log::EntryKind;
use srp_target::{BlockSize, FileBackend, LogicalUnit, LuConfig};
use std::collections::BTreeSet;
use std::path::PathBuf;

const BLOCKS: u64 = 256;
const BS: usize = 512;
/// Where each command writes, and where a copy reads from.
const AT: u64 = 8;
const SRC: u64 = 64;

/// A file LU recording to `name.wlog`.
struct Recorded {
    lu: LogicalUnit,
    log: PathBuf,
}

impl Recorded {
    fn new(dir: &TempDir, name: &str, write_cache: bool) -> Recorded {
        let file = dir.path().join(name);
        let log = dir.path().join(format!("{name}.wlog"));
        let backend = FileBackend::create(&file, BLOCKS * BS as u64, BlockSize::B512)
            .expect("create")
            .record_writes(&log)
            .expect("record");
        let lu = LogicalUnit::new(
            Box::new(backend),
            LuConfig {
                write_cache,
                ..LuConfig::new(identity(name))
            },
        );
        Recorded { lu, log }
    }

    fn entries(&self) -> Vec<EntryKind> {
        WriteLog::read(&self.log)
            .expect("read log")
            .entries()
            .iter()
            .map(|e| e.kind.clone())
            .collect()
    }
}

/// `key` at [`AT`] on a LU of zeros: `n` blocks (one for WRITE ATOMIC), FUA `fua`.
fn op(key: writers::Key, lu: &LogicalUnit, fua: bool) -> WriteOp {
    let w = writers::writer(key).unwrap_or_else(|| panic!("no builder for {key:02x?}"));
    let n = 2.min(w.max_blocks);
    let zeros = vec![0u8; n as usize * BS];
    let data = pattern(n as usize * BS, key.0);
    writers::build(
        key,
        &Place {
            at: AT,
            n,
            old: &zeros,
            data: &data,
            src_lba: SRC,
            src: &zeros,
            naa: lu.identity().naa(),
            fua,
            list_id: 1,
        },
    )
    .unwrap_or_else(|| panic!("no builder for {key:02x?}"))
}

fn is_write(e: &EntryKind) -> bool {
    matches!(e, EntryKind::Write { .. } | EntryKind::Discard { .. })
}

fn is_sync(e: &EntryKind) -> bool {
    matches!(e, EntryKind::Sync { .. })
}

/// Runs `op` as nexus `nd`, GOOD expected; the log entries it made.
fn run_recorded(r: &Recorded, nd: &NexusData, op: &WriteOp, what: &str) -> Vec<EntryKind> {
    let before = r.entries().len();
    let mut din = Vec::new();
    let out =
        r.lu.execute(&nd.nexus(), &op.cdb, &op.dout, &mut din)
            .expect("no transport error");
    assert_eq!(out.status, Status::Good, "{what}: {:?}", out.sense);
    let entries = r.entries().split_off(before);
    assert!(
        entries.iter().any(is_write),
        "{what}: GOOD but nothing reached the medium: {entries:?}"
    );
    entries
}

/// Whether a flush came after the last write or discard of `entries`.
fn flushed_after_last_write(entries: &[EntryKind]) -> bool {
    let last = entries.iter().rposition(is_write).expect("a write");
    entries[last..].iter().any(is_sync)
}

#[test]
fn the_rules_call_writing_exactly_the_commands_built_by_hand() {
    let from_rules: BTreeSet<_> = writers::writing_commands().into_iter().collect();
    let by_hand: BTreeSet<_> = WRITERS.iter().map(|w| w.key).collect();
    assert_eq!(
        from_rules, by_hand,
        "the rules' writing commands (left) and those built by hand (right) differ"
    );
    // Every one of them is seen to write (and no other command of the table is).
    let dir = TempDir::new("rules-seen");
    for info in srp_target::exec::supported_opcodes() {
        let key = (info.opcode, info.service_action);
        if let Some(w) = writers::writer(key) {
            let r = Recorded::new(&dir, &format!("seen-{:02x}-{:?}", key.0, key.1), false);
            run_recorded(&r, &nexus_data(0), &op(key, &r.lu, false), w.name);
        }
    }
}

#[test]
fn a_write_exclusive_reservation_stops_every_writing_command_of_another_nexus() {
    const KEY: u64 = 0xabc;
    let dir = TempDir::new("rules-pr");
    let holder = nexus_data_of(INITIATOR_A, 0);
    let other = nexus_data_of(srp::wire::PortId([0xb0; 16]), 0);
    let run = |r: &Recorded, nd: &NexusData, cdb: &[u8], dout: &[u8]| {
        let mut din = Vec::new();
        r.lu.execute(&nd.nexus(), cdb, dout, &mut din)
            .expect("no transport error")
    };
    for key in writers::writing_commands() {
        let name = writers::writer(key).map_or("?", |w| w.name);
        let r = Recorded::new(&dir, &format!("pr-{:02x}-{:?}", key.0, key.1), true);
        // REGISTER, then RESERVE type 1 (Write Exclusive), by the holder.
        let (cdb, list) = pr_out(0x00, 0, 0, KEY, 0);
        assert_eq!(run(&r, &holder, &cdb, &list).status, Status::Good);
        let (cdb, list) = pr_out(0x01, 0x01, KEY, 0, 0);
        assert_eq!(run(&r, &holder, &cdb, &list).status, Status::Good);
        let o = op(key, &r.lu, false);
        let before = r.entries().len();
        let out = run(&r, &other, &o.cdb, &o.dout);
        assert_eq!(
            out.status,
            Status::ReservationConflict,
            "{name} from another nexus under Write Exclusive: {:?}",
            out.sense
        );
        assert!(
            !r.entries()[before..].iter().any(is_write),
            "{name}: refused, but the medium was written"
        );
        run_recorded(&r, &holder, &o, name);
    }
}

#[test]
fn with_the_write_cache_off_every_writing_command_is_flushed_before_its_status() {
    let dir = TempDir::new("rules-wce0");
    for key in writers::writing_commands() {
        let name = writers::writer(key).map_or("?", |w| w.name);
        let r = Recorded::new(&dir, &format!("wce0-{:02x}-{:?}", key.0, key.1), false);
        let entries = run_recorded(&r, &nexus_data(0), &op(key, &r.lu, false), name);
        assert!(
            flushed_after_last_write(&entries),
            "{name} with the write cache off: GOOD before a flush: {entries:?}"
        );
    }
}

#[test]
fn with_the_write_cache_on_fua_and_write_and_verify_are_flushed_and_the_rest_cached() {
    let dir = TempDir::new("rules-wce1");
    for key in writers::writing_commands() {
        let w = writers::writer(key).expect("a builder");
        let fuas: &[bool] = if w.durable == DurableWhen::Fua {
            &[false, true]
        } else {
            &[false]
        };
        for &fua in fuas {
            let r = Recorded::new(&dir, &format!("wce1-{:02x}-{:?}-{fua}", key.0, key.1), true);
            let entries = run_recorded(&r, &nexus_data(0), &op(key, &r.lu, fua), w.name);
            let want = w.durable.durable(fua, true);
            assert_eq!(
                flushed_after_last_write(&entries),
                want,
                "{} (FUA {fua}) with the write cache on: flushed before GOOD should be {want}: {entries:?}",
                w.name
            );
        }
    }
}
