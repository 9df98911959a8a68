//! Block commands through `LogicalUnit::execute`: data and the exact sense of each error.

mod common;

use common::*;
use scsi::{SenseCode, Status};
use srp_target::{BlockSize, TransportError};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

#[test]
fn write_then_read_every_cdb_size() {
    let lu = ram_lu(64, BlockSize::B512);
    let data = pattern(1024, 1);
    // WRITE(6) LBA 2, 2 blocks; READ(6) back.
    good(&lu, &[0x0a, 0, 0, 2, 2, 0], &data);
    assert_eq!(good(&lu, &[0x08, 0, 0, 2, 2, 0], &[]), data);
    // WRITE(10)/READ(10), WRITE(12)/READ(12), WRITE(16)/READ(16).
    let d10 = pattern(512, 2);
    good(&lu, &write10(10, 1, false), &d10);
    assert_eq!(good(&lu, &read10(10, 1), &[]), d10);
    let d12 = pattern(1536, 3);
    good(&lu, &[0xaa, 0, 0, 0, 0, 20, 0, 0, 0, 3, 0, 0], &d12);
    assert_eq!(
        good(&lu, &[0xa8, 0, 0, 0, 0, 20, 0, 0, 0, 3, 0, 0], &[]),
        d12
    );
    let d16 = pattern(512, 4);
    good(&lu, &cdb16(0x8a, 0x08, 63, 1), &d16);
    assert_eq!(good(&lu, &cdb16(0x88, 0, 63, 1), &[]), d16);
    // Zero transfer length (not READ(6)): GOOD, no data.
    assert!(good(&lu, &read10(5, 0), &[]).is_empty());
}

#[test]
fn lba_out_of_range_exact_sense() {
    let lu = ram_lu(64, BlockSize::B512);
    let s = check(&lu, &read10(63, 2), &[], SenseCode::LBA_OUT_OF_RANGE);
    assert_eq!(
        (s.code().key.into(), s.code().asc, s.code().ascq),
        (5u8, 0x21, 0x00)
    );
    check(
        &lu,
        &write10(64, 1, false),
        &[0; 512],
        SenseCode::LBA_OUT_OF_RANGE,
    );
    check(
        &lu,
        &cdb16(0x88, 0, u64::MAX, 1),
        &[],
        SenseCode::LBA_OUT_OF_RANGE,
    );
    // Zero length one past the end is within; two past is not.
    good(&lu, &read10(64, 0), &[]);
    check(&lu, &read10(65, 0), &[], SenseCode::LBA_OUT_OF_RANGE);
}

#[test]
fn transfer_over_block_limits_is_invalid_field() {
    let lu = ram_lu(1 << 16, BlockSize::B512);
    // 8 MiB / 512 = 16384 blocks is the limit.
    let s = check(
        &lu,
        &cdb16(0x88, 0, 0, 16385),
        &[],
        SenseCode::INVALID_FIELD_IN_CDB,
    );
    assert_eq!(field_pointer(&s), Some((10, Some(7), true)));
    good(&lu, &cdb16(0x88, 0, 0, 16384), &[]);
}

#[test]
fn read_only_lun_is_write_protected() {
    let lu = read_only_lu(16);
    let s = check(
        &lu,
        &write10(0, 1, false),
        &[0; 512],
        SenseCode::WRITE_PROTECTED,
    );
    assert_eq!(
        (s.code().key.into(), s.code().asc, s.code().ascq),
        (7u8, 0x27, 0x00)
    );
    check(
        &lu,
        &cdb16(0x93, 0, 0, 1),
        &[0; 512],
        SenseCode::WRITE_PROTECTED,
    );
    check(
        &lu,
        &[0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0],
        &[0; 24],
        SenseCode::WRITE_PROTECTED,
    );
    check(
        &lu,
        &compare_and_write(0, 1),
        &[0; 1024],
        SenseCode::WRITE_PROTECTED,
    );
    good(&lu, &read10(0, 1), &[]);
}

#[test]
fn data_out_underrun_is_a_transport_error_and_overrun_uses_the_prefix() {
    let lu = ram_lu(16, BlockSize::B512);
    let nd = common::nexus_data(0);
    let mut din = Vec::new();
    let r = lu.execute(&nd.nexus(), &write10(0, 2, false), &[0; 600], &mut din);
    assert_eq!(
        r,
        Err(TransportError::DataOutUnderrun {
            need_bytes: 1024,
            have_bytes: 600
        })
    );
    let (out, _) = run(&lu, &write10(0, 1, false), &[7; 700]);
    assert_eq!((out.status, out.data_out_len), (Status::Good, 512));
    assert_eq!(good(&lu, &read10(0, 1), &[]), vec![7; 512]);
}

#[test]
fn fua_write_is_durable_in_the_file() {
    let dir = TempDir::new("exec-fua");
    let lu = file_lu(&dir, "lun", 32, BlockSize::B4096);
    let data = pattern(4096, 9);
    good(&lu, &write10(5, 1, true), &data);
    let f = std::fs::File::open(dir.path().join("lun")).expect("open");
    let mut got = vec![0u8; 4096];
    f.read_exact_at(&mut got, 5 * 4096).expect("read");
    assert_eq!(got, data);
}

#[test]
fn synchronize_cache_checks_range() {
    let dir = TempDir::new("sync");
    let lu = file_lu(&dir, "lun", 32, BlockSize::B512);
    good(&lu, &[0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0], &[]);
    good(&lu, &cdb16(0x91, 0, 0, 32), &[]);
    check(
        &lu,
        &cdb16(0x91, 0, 32, 0),
        &[],
        SenseCode::LBA_OUT_OF_RANGE,
    );
    check(
        &lu,
        &cdb16(0x91, 0, 30, 3),
        &[],
        SenseCode::LBA_OUT_OF_RANGE,
    );
}

#[test]
fn verify_bytchk_paths() {
    let lu = ram_lu(16, BlockSize::B512);
    let data = pattern(1024, 5);
    good(&lu, &write10(4, 2, false), &data);
    // BYTCHK=0: reads the range (exec_verify.rs: a read error is a MEDIUM ERROR).
    good(&lu, &[0x2f, 0, 0, 0, 0, 4, 0, 0, 2, 0], &[]);
    check(
        &lu,
        &[0x2f, 0, 0, 0, 0, 15, 0, 0, 2, 0],
        &[],
        SenseCode::LBA_OUT_OF_RANGE,
    );
    // BYTCHK=1: equal, then one byte off at offset 700.
    good(&lu, &[0x2f, 0x02, 0, 0, 0, 4, 0, 0, 2, 0], &data);
    let mut bad = data.clone();
    bad[700] ^= 1;
    let s = check(
        &lu,
        &[0x2f, 0x02, 0, 0, 0, 4, 0, 0, 2, 0],
        &bad,
        SenseCode::MISCOMPARE_DURING_VERIFY,
    );
    assert_eq!(
        (s.code().key.into(), s.code().asc, s.code().ascq),
        (0xeu8, 0x1d, 0x00)
    );
    assert_eq!(s.information(), Some(700));
    // BYTCHK=11b: one block against each; block 4 of zeros vs block 0..1 of pattern fails.
    good(&lu, &cdb16(0x8f, 0x06, 8, 3), &[0; 512]);
    let s = check(
        &lu,
        &cdb16(0x8f, 0x06, 3, 2),
        &[0; 512],
        SenseCode::MISCOMPARE_DURING_VERIFY,
    );
    assert_eq!(
        s.information(),
        Some(512 + data.iter().position(|&b| b != 0).expect("nonzero") as u64)
    );
    // BYTCHK=10b is reserved.
    let s = check(
        &lu,
        &[0x2f, 0x04, 0, 0, 0, 4, 0, 0, 1, 0],
        &[],
        SenseCode::INVALID_FIELD_IN_CDB,
    );
    assert_eq!(field_pointer(&s), Some((1, Some(2), true)));
}

#[test]
fn compare_and_write_writes_on_match_and_reports_miscompare_offset() {
    let lu = ram_lu(16, BlockSize::B512);
    let old = pattern(512, 1);
    let new = pattern(512, 2);
    good(&lu, &write10(3, 1, false), &old);
    let mut dout = old.clone();
    dout.extend(&new);
    let (out, _) = run(&lu, &compare_and_write(3, 1), &dout);
    assert_eq!((out.status, out.data_out_len), (Status::Good, 1024));
    assert_eq!(good(&lu, &read10(3, 1), &[]), new);
    // Now the medium holds `new`; comparing against `old` fails at the first difference.
    let off = old
        .iter()
        .zip(&new)
        .position(|(a, b)| a != b)
        .expect("differ");
    let s = check(
        &lu,
        &compare_and_write(3, 1),
        &dout,
        SenseCode::MISCOMPARE_DURING_VERIFY,
    );
    assert_eq!(s.information(), Some(off as u64));
    assert_eq!(
        good(&lu, &read10(3, 1), &[]),
        new,
        "nothing written on miscompare"
    );
    check(
        &lu,
        &compare_and_write(16, 1),
        &dout,
        SenseCode::LBA_OUT_OF_RANGE,
    );
    good(&lu, &compare_and_write(3, 0), &[]);
}

/// Two threads each run COMPARE AND WRITE loops incrementing a counter in block 0, mixed
/// with plain writes to block 1: with atomic compare-and-write, no increment is lost.
#[test]
fn compare_and_write_is_atomic_across_threads() {
    let lu = Arc::new(ram_lu(4, BlockSize::B512));
    let block = |v: u64| {
        let mut b = vec![0u8; 512];
        b[..8].copy_from_slice(&v.to_be_bytes());
        b
    };
    good(&lu, &write10(0, 1, false), &block(0));
    const PER_THREAD: u64 = 300;
    let threads: Vec<_> = (0..2)
        .map(|t| {
            let lu = Arc::clone(&lu);
            std::thread::spawn(move || {
                let mut done = 0;
                while done < PER_THREAD {
                    let cur = good(&lu, &read10(0, 1), &[]);
                    let v = u64::from_be_bytes(cur[..8].try_into().expect("8"));
                    let mut dout = cur.clone();
                    dout.extend(block(v + 1));
                    let (out, _) = run(&lu, &compare_and_write(0, 1), &dout);
                    if out.status == Status::Good {
                        done += 1;
                    } else {
                        let code = out.sense.map(|s| s.code());
                        assert_eq!(code, Some(SenseCode::MISCOMPARE_DURING_VERIFY));
                    }
                    good(&lu, &write10(1, 1, false), &block(t));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread");
    }
    let end = good(&lu, &read10(0, 1), &[]);
    assert_eq!(
        u64::from_be_bytes(end[..8].try_into().expect("8")),
        2 * PER_THREAD
    );
}

#[test]
fn write_same_writes_or_unmaps() {
    let lu = ram_lu(64, BlockSize::B512);
    let blk = pattern(512, 3);
    good(&lu, &[0x41, 0, 0, 0, 0, 8, 0, 0, 4, 0], &blk);
    assert_eq!(good(&lu, &read10(8, 4), &[]), blk.repeat(4));
    // UNMAP=1 with a zero block: unmapped, reads zeros.
    good(&lu, &cdb16(0x93, 0x08, 9, 2), &[0; 512]);
    assert_eq!(good(&lu, &read10(9, 2), &[]), vec![0; 1024]);
    // UNMAP=1 with a nonzero block: written.
    good(&lu, &cdb16(0x93, 0x08, 9, 1), &blk);
    assert_eq!(good(&lu, &read10(9, 1), &[]), blk);
    // WSNZ: zero blocks is INVALID FIELD IN CDB at NUMBER OF LOGICAL BLOCKS.
    let s = check(
        &lu,
        &cdb16(0x93, 0, 0, 0),
        &blk,
        SenseCode::INVALID_FIELD_IN_CDB,
    );
    assert_eq!(field_pointer(&s), Some((10, Some(7), true)));
    check(
        &lu,
        &cdb16(0x93, 0, 63, 2),
        &blk,
        SenseCode::LBA_OUT_OF_RANGE,
    );
    // ANCHOR without UNMAP: the parser's INVALID FIELD IN CDB, byte 1 bit 4.
    let s = check(
        &lu,
        &cdb16(0x93, 0x10, 0, 1),
        &blk,
        SenseCode::INVALID_FIELD_IN_CDB,
    );
    assert_eq!(field_pointer(&s), Some((1, Some(4), true)));
}

fn unmap_cdb(len: u16) -> [u8; 10] {
    let n = len.to_be_bytes();
    [0x42, 0, 0, 0, 0, 0, 0, n[0], n[1], 0]
}

#[test]
fn unmap_parameter_list_paths() {
    let lu = ram_lu(64, BlockSize::B512);
    good(&lu, &write10(0, 8, false), &[0xaa; 4096]);
    let list = unmap_list(&[(1, 2), (5, 1)]);
    good(&lu, &unmap_cdb(list.len() as u16), &list);
    let got = good(&lu, &read10(0, 8), &[]);
    for (i, blk) in got.chunks(512).enumerate() {
        let zero = matches!(i, 1 | 2 | 5);
        assert!(
            blk.iter().all(|&b| b == if zero { 0 } else { 0xaa }),
            "block {i}"
        );
    }
    // Zero PARAMETER LIST LENGTH: nothing to do.
    good(&lu, &unmap_cdb(0), &[]);
    // 1..7 bytes: PARAMETER LIST LENGTH ERROR.
    check(
        &lu,
        &unmap_cdb(4),
        &[0; 4],
        SenseCode::PARAMETER_LIST_LENGTH_ERROR,
    );
    // BLOCK DESCRIPTOR DATA LENGTH past the list.
    let mut bad = unmap_list(&[(1, 1)]);
    bad[2..4].copy_from_slice(&32u16.to_be_bytes());
    check(
        &lu,
        &unmap_cdb(bad.len() as u16),
        &bad,
        SenseCode::PARAMETER_LIST_LENGTH_ERROR,
    );
    // A descriptor past the end: LBA OUT OF RANGE, and nothing of the list is unmapped.
    good(&lu, &write10(1, 1, false), &[0xbb; 512]);
    let l = unmap_list(&[(1, 1), (63, 2)]);
    check(
        &lu,
        &unmap_cdb(l.len() as u16),
        &l,
        SenseCode::LBA_OUT_OF_RANGE,
    );
    assert_eq!(good(&lu, &read10(1, 1), &[]), vec![0xbb; 512]);
    // Too many blocks in one descriptor: INVALID FIELD IN PARAMETER LIST at its count.
    let l = unmap_list(&[(0, 1), (0, (1 << 22) + 1)]);
    let s = check(
        &lu,
        &unmap_cdb(l.len() as u16),
        &l,
        SenseCode::INVALID_FIELD_IN_PARAMETER_LIST,
    );
    assert_eq!(field_pointer(&s), Some((8 + 16 + 8, Some(7), false)));
}

#[test]
fn unmap_lba_count_limit_is_per_command() {
    // MAXIMUM UNMAP LBA COUNT (VPD B0h) bounds the blocks of the whole command (SBC-4):
    // descriptors each within it but summing past it are refused at the descriptor that
    // crosses it, and nothing is unmapped. Descriptors may overlap, so 16 of the whole
    // 2^16-block LU make the 2^20 limit.
    let max = srp_target::exec::provisioning::MAX_UNMAP_BLOCKS;
    let blocks: u32 = 1 << 16;
    assert_eq!(max % blocks, 0);
    let lu = ram_lu(blocks.into(), BlockSize::B512);
    let bl = good(&lu, &[0x12, 1, 0xb0, 0, 64, 0], &[]);
    assert_eq!(be32(&bl[20..]), max, "MAXIMUM UNMAP LBA COUNT");
    let whole = vec![(0u64, blocks); (max / blocks) as usize];
    // Exactly the limit: GOOD.
    good(&lu, &write10(0, 1, false), &[0xcc; 512]);
    let l = unmap_list(&whole);
    good(&lu, &unmap_cdb(l.len() as u16), &l);
    assert_eq!(good(&lu, &read10(0, 1), &[]), vec![0; 512]);
    // One block more, in a descriptor after them: its NUMBER OF LOGICAL BLOCKS is pointed
    // at (list byte 8 + 16 * index + 8), though each descriptor alone is within the limit.
    good(&lu, &write10(0, 1, false), &[0xcc; 512]);
    let mut over = whole.clone();
    over.push((5, 0));
    over.push((3, 1));
    over.push((9, 1));
    let l = unmap_list(&over);
    let s = check(
        &lu,
        &unmap_cdb(l.len() as u16),
        &l,
        SenseCode::INVALID_FIELD_IN_PARAMETER_LIST,
    );
    let at = 8 + 16 * (whole.len() + 1) + 8;
    assert_eq!(field_pointer(&s), Some((at as u16, Some(7), false)));
    assert_eq!(
        good(&lu, &read10(0, 1), &[]),
        vec![0xcc; 512],
        "nothing unmapped"
    );
}

#[test]
fn file_unmap_through_execute_reads_zeros() {
    let dir = TempDir::new("exec-unmap");
    let lu = file_lu(&dir, "lun", 64, BlockSize::B4096);
    good(&lu, &write10(0, 64, true), &vec![0x11; 64 * 4096]);
    let l = unmap_list(&[(8, 16)]);
    good(&lu, &unmap_cdb(l.len() as u16), &l);
    let got = good(&lu, &read10(0, 64), &[]);
    assert!(got[8 * 4096..24 * 4096].iter().all(|&b| b == 0));
    assert!(got[..8 * 4096].iter().all(|&b| b == 0x11));
    assert_eq!(
        std::fs::metadata(dir.path().join("lun"))
            .expect("meta")
            .len(),
        64 * 4096
    );
}

#[test]
fn read_and_write_go_straight_through_staged_memory() {
    use srp_target::{DataOut, MemSpan};
    let dir = TempDir::new("staged");
    for lu in [
        ram_lu(64, BlockSize::B512),
        file_lu(&dir, "lun", 64, BlockSize::B512),
    ] {
        let nd = nexus_data(0);
        let mem = hca::mem::MemBlock::new(8192);
        let span = MemSpan {
            block: &mem,
            offset: 512,
            len: 4096,
        };
        // WRITE of 2 blocks whose data-out lies in the memory.
        let data = pattern(1024, 5);
        mem.write(512, &data).expect("in range");
        let mut din = Vec::new();
        let out = lu
            .execute_io(
                &nd.nexus(),
                &write10(3, 2, false),
                DataOut::Staged(span.head(1024)),
                &mut din,
                None,
            )
            .expect("no transport error");
        assert_eq!((out.status, out.data_out_len), (Status::Good, 1024));
        assert_eq!(
            good(&lu, &read10(3, 2), &[]),
            data,
            "written from the memory"
        );
        // READ into the memory: nothing in `din`, the data at the span's start.
        mem.fill(0, 8192, 0).expect("in range");
        let out = lu
            .execute_io(
                &nd.nexus(),
                &read10(3, 2),
                DataOut::Bytes(&[]),
                &mut din,
                Some(span),
            )
            .expect("no transport error");
        assert!(out.data_in_staged && din.is_empty());
        assert_eq!(out.data_in_len, 1024);
        let mut got = vec![0u8; 1024];
        mem.read(512, &mut got).expect("in range");
        assert_eq!(got, data);
        // A READ longer than the memory uses the bytes.
        let out = lu
            .execute_io(
                &nd.nexus(),
                &read10(0, 16),
                DataOut::Bytes(&[]),
                &mut din,
                Some(span),
            )
            .expect("no transport error");
        assert!(!out.data_in_staged);
        assert_eq!(din.len(), 8192);
        // A staged data-out shorter than the WRITE is the underrun; other commands read it
        // out of the memory (WRITE SAME(10) of one block: its one block of data-out).
        let short = lu.execute_io(
            &nd.nexus(),
            &write10(0, 2, false),
            DataOut::Staged(span.head(512)),
            &mut din,
            None,
        );
        assert!(matches!(
            short,
            Err(TransportError::DataOutUnderrun {
                need_bytes: 1024,
                have_bytes: 512
            })
        ));
        mem.write(512, &[0x3c; 512]).expect("in range");
        let ws = [0x41, 0, 0, 0, 0, 8, 0, 0, 4, 0];
        let out = lu
            .execute_io(
                &nd.nexus(),
                &ws,
                DataOut::Staged(span.head(512)),
                &mut din,
                None,
            )
            .expect("no transport error");
        assert_eq!(out.status, Status::Good, "{:?}", out.sense);
        assert_eq!(good(&lu, &read10(8, 4), &[]), vec![0x3c; 2048]);
    }
}

/// A backend whose reads panic (a bug anywhere below a command).
#[derive(Debug)]
struct PanicsOnRead(common::ByteRam);

impl srp_target::Backend for PanicsOnRead {
    fn block_size(&self) -> BlockSize {
        self.0.block_size()
    }
    fn blocks(&self) -> u64 {
        self.0.blocks()
    }
    fn read_at(&self, _: scsi::Lba, _: &mut [u8]) -> Result<(), srp_target::BackendError> {
        panic!("a bug below READ")
    }
    fn write_at(&self, lba: scsi::Lba, buf: &[u8]) -> Result<(), srp_target::BackendError> {
        self.0.write_at(lba, buf)
    }
    fn flush(&self) -> Result<(), srp_target::BackendError> {
        self.0.flush()
    }
    fn unmap(&self, lba: scsi::Lba, n: scsi::BlockCount) -> Result<(), srp_target::BackendError> {
        self.0.unmap(lba, n)
    }
}

#[test]
fn a_panicking_command_is_answered_and_the_lu_keeps_serving() {
    let lu = srp_target::LogicalUnit::new(
        Box::new(PanicsOnRead(common::ByteRam::new(16, BlockSize::B512))),
        srp_target::LuConfig::new(common::identity("panics")),
    );
    check(&lu, &read10(0, 1), &[], SenseCode::INTERNAL_TARGET_FAILURE);
    // Counted as a CHECK CONDITION; the LU still writes and answers.
    assert_eq!(lu.counters().check_conditions, 1);
    good(&lu, &write10(0, 1, false), &[7; 512]);
    good(&lu, &[0; 6], &[]);
    check(&lu, &read10(0, 1), &[], SenseCode::INTERNAL_TARGET_FAILURE);
}

/// A file LU of 512-byte blocks on 4 KiB physical ones, with `alignment`.
fn aligned_file_lu(
    dir: &TempDir,
    alignment: srp_target::exec::Alignment,
) -> srp_target::LogicalUnit {
    let path = dir.path().join("aligned.img");
    let b = srp_target::FileBackend::create(&path, 1 << 20, BlockSize::B512).expect("file");
    let mut c = srp_target::LuConfig::new(identity("aligned"));
    c.physical_block_bytes = Some(4096);
    c.alignment = alignment;
    srp_target::LogicalUnit::new(Box::new(b), c)
}

fn write_atomic16(lba: u64, blocks: u16) -> [u8; 16] {
    let mut c = cdb16(0x9c, 0, lba, 0);
    c[12..14].copy_from_slice(&blocks.to_be_bytes());
    c
}

#[test]
fn lowest_aligned_lba_and_unmap_alignment_are_reported_and_bound_write_atomic() {
    // A partition at sector 63 of a 512e disk (appliance/geometry.rs computes this from
    // sysfs): physical blocks start at LBA 1, the 1 MiB discard unit at LBA 128.
    let dir = TempDir::new("exec-alignment");
    let lu = aligned_file_lu(
        &dir,
        srp_target::exec::Alignment {
            lowest_aligned_lba: 1,
            unmap_granularity_blocks: Some(2048),
            unmap_alignment_blocks: 128,
            atomic_blocks: None,
        },
    );
    let rc = good(
        &lu,
        &[0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0],
        &[],
    );
    assert_eq!(rc[13] & 0x0f, 3, "2^3 blocks per physical block");
    assert_eq!(
        &rc[14..16],
        &[0xc0, 0x01],
        "LBPME, LBPRZ, LOWEST ALIGNED LBA 1"
    );
    let bl = good(&lu, &[0x12, 1, 0xb0, 0, 64, 0], &[]);
    assert_eq!(be32(&bl[28..]), 2048, "OPTIMAL UNMAP GRANULARITY");
    assert_eq!(be32(&bl[32..]), 0x8000_0080, "UGAVALID, alignment 128");
    // No aligned 8-block write is one physical block here: one logical block is atomic.
    assert_eq!(
        (be32(&bl[44..]), be32(&bl[48..]), be32(&bl[52..])),
        (1, 1, 1),
        "MAXIMUM ATOMIC TRANSFER LENGTH, ATOMIC ALIGNMENT, GRANULARITY"
    );
    good(&lu, &write_atomic16(5, 1), &pattern(512, 1));
    let s = check(
        &lu,
        &write_atomic16(8, 8),
        &pattern(4096, 2),
        SenseCode::INVALID_FIELD_IN_CDB,
    );
    assert_eq!(field_pointer(&s), Some((12, Some(7), true)));
    // Aligned at LBA 0: one physical block, aligned to one.
    let dir = TempDir::new("exec-alignment-0");
    let lu = aligned_file_lu(&dir, srp_target::exec::Alignment::default());
    let rc = good(
        &lu,
        &[0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0],
        &[],
    );
    assert_eq!(&rc[14..16], &[0xc0, 0x00]);
    let bl = good(&lu, &[0x12, 1, 0xb0, 0, 64, 0], &[]);
    assert_eq!(
        (be32(&bl[28..]), be32(&bl[32..])),
        (8, 0x8000_0000),
        "a physical block, at least 4 KiB, at LBA 0"
    );
    assert_eq!(
        (be32(&bl[44..]), be32(&bl[48..]), be32(&bl[52..])),
        (8, 8, 8)
    );
    good(&lu, &write_atomic16(8, 8), &pattern(4096, 3));
    assert_eq!(good(&lu, &read10(8, 8), &[]), pattern(4096, 3));
}
