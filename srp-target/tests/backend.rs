//! Backends: file creation and reopening, FUA durability, hole punching, RAM.

mod common;

use common::TempDir;
use scsi::{BlockCount, Lba};
use srp_target::{Backend, BackendError, BlockSize, FileBackend, RamBackend};
use std::os::unix::fs::{FileExt, MetadataExt};

#[test]
fn create_then_reopen_same_size_keeps_data() {
    let dir = TempDir::new("reopen");
    let path = dir.path().join("lun0");
    let b = FileBackend::create(&path, 64 * 4096, BlockSize::B4096).expect("create");
    assert_eq!(b.blocks(), 64);
    b.write_at(Lba(3), &[0x5a; 4096]).expect("write");
    b.flush().expect("flush");
    drop(b);
    let b = FileBackend::create(&path, 64 * 4096, BlockSize::B4096).expect("reopen");
    let mut buf = [0u8; 4096];
    b.read_at(Lba(3), &mut buf).expect("read");
    assert_eq!(buf, [0x5a; 4096]);
    drop(b);
    let err = FileBackend::create(&path, 65 * 4096, BlockSize::B4096).expect_err("size differs");
    assert!(matches!(err, BackendError::BadSize { .. }), "{err}");
    assert!(
        err.to_string().contains("lun0"),
        "error names the path: {err}"
    );
}

#[test]
fn bad_sizes_and_ranges_are_errors() {
    let dir = TempDir::new("bad");
    assert!(FileBackend::create(dir.path().join("a"), 0, BlockSize::B512).is_err());
    assert!(FileBackend::create(dir.path().join("b"), 1000, BlockSize::B512).is_err());
    let missing = FileBackend::open(dir.path().join("missing"), BlockSize::B512, false);
    match missing {
        Err(BackendError::Io { path, .. }) => assert!(path.ends_with("missing")),
        other => panic!("{other:?}"),
    }
    let b = FileBackend::create(dir.path().join("c"), 8 * 512, BlockSize::B512).expect("c");
    let mut buf = [0u8; 1024];
    assert!(matches!(
        b.read_at(Lba(7), &mut buf),
        Err(BackendError::OutOfRange { .. })
    ));
    assert!(matches!(
        b.write_at(Lba(0), &[0; 100]),
        Err(BackendError::Misaligned { .. })
    ));
}

#[test]
fn a_flushed_write_is_visible_through_a_separate_handle() {
    let dir = TempDir::new("fua");
    let path = dir.path().join("lun");
    let b = FileBackend::create(&path, 16 * 512, BlockSize::B512).expect("create");
    let data = common::pattern(1024, 7);
    b.write_at(Lba(4), &data).expect("write");
    b.flush().expect("flush");
    // A separate open file description: sees what reached the file, not a private buffer.
    let f = std::fs::File::open(&path).expect("open");
    let mut got = vec![0u8; 1024];
    f.read_exact_at(&mut got, 4 * 512).expect("read");
    assert_eq!(got, data);
}

/// Whether `fallocate(PUNCH_HOLE)` works in `dir` (tmpfs, ext4, xfs, btrfs do; some
/// overlay or network filesystems do not, and then UNMAP falls back to writing zeros).
fn punch_hole_supported(dir: &TempDir) -> bool {
    use nix::fcntl::{FallocateFlags, fallocate};
    let probe = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(dir.path().join("probe"))
        .expect("probe");
    probe.write_all_at(&[1u8; 8192], 0).expect("probe write");
    let mode = FallocateFlags::FALLOC_FL_PUNCH_HOLE | FallocateFlags::FALLOC_FL_KEEP_SIZE;
    fallocate(&probe, mode, 0, 4096).is_ok()
}

#[test]
fn unmap_punches_holes_and_reads_zeros() {
    let dir = TempDir::new("unmap");
    let path = dir.path().join("lun");
    let blocks = 256u64; // 1 MiB of 4 KiB blocks
    let b = FileBackend::create(&path, blocks * 4096, BlockSize::B4096).expect("create");
    b.write_at(Lba(0), &vec![0xee; 1 << 20]).expect("fill");
    b.flush().expect("flush");
    let before = std::fs::metadata(&path).expect("meta");
    b.unmap(Lba(16), BlockCount(128)).expect("unmap");
    let after = std::fs::metadata(&path).expect("meta");
    assert_eq!(
        after.len(),
        before.len(),
        "KEEP_SIZE: the LUN does not shrink"
    );
    let mut buf = vec![0u8; 128 * 4096];
    b.read_at(Lba(16), &mut buf).expect("read");
    assert!(buf.iter().all(|&x| x == 0), "unmapped blocks read as zeros");
    let mut edge = vec![0u8; 4096];
    b.read_at(Lba(15), &mut edge).expect("read");
    assert!(edge.iter().all(|&x| x == 0xee), "neighbours untouched");
    // Only where the filesystem punches holes does the allocation shrink; elsewhere the
    // fallback wrote zeros, which is correct but allocates.
    if punch_hole_supported(&dir) {
        assert!(
            after.blocks() < before.blocks(),
            "allocated 512-byte units: {} -> {}",
            before.blocks(),
            after.blocks()
        );
    }
}

#[test]
fn ram_backend_reads_writes_unmaps() {
    let b = RamBackend::new(8, BlockSize::B512).expect("ram");
    b.write_at(Lba(1), &[9; 1024]).expect("write");
    let mut buf = [0u8; 1536];
    b.read_at(Lba(0), &mut buf).expect("read");
    assert_eq!(&buf[..512], &[0; 512]);
    assert_eq!(&buf[512..], &[9; 1024]);
    b.unmap(Lba(2), BlockCount(1)).expect("unmap");
    b.read_at(Lba(0), &mut buf).expect("read");
    assert_eq!(&buf[1024..], &[0; 512]);
    assert!(RamBackend::new(0, BlockSize::B512).is_err());
    assert!(b.read_at(Lba(8), &mut [0; 512]).is_err());
}

#[test]
fn only_memory_backends_say_they_never_block() {
    assert!(
        RamBackend::new(8, BlockSize::B512)
            .expect("ram")
            .never_blocks()
    );
    // A file on tmpfs is memory too (the bench's /dev/shm LUN).
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        let p = shm.join(format!("srp-target-nb-{}", std::process::id()));
        let b = FileBackend::create(&p, 8 * 512, BlockSize::B512).expect("tmpfs file");
        let nb = b.never_blocks();
        drop(b);
        let _ = std::fs::remove_file(&p);
        assert!(nb, "a tmpfs file never blocks");
    }
    // The build directory lives on a disk file system (ext4/overlay on CI): its files go
    // to the workers. Checked only where that is true.
    let here = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let on_disk = std::process::Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(here)
        .output()
        .is_ok_and(|o| !String::from_utf8_lossy(&o.stdout).contains("tmpfs"));
    if on_disk {
        let p = here.join(format!("nb-{}", std::process::id()));
        let b = FileBackend::create(&p, 8 * 512, BlockSize::B512).expect("disk file");
        let nb = b.never_blocks();
        drop(b);
        let _ = std::fs::remove_file(&p);
        assert!(!nb, "a file on a disk file system may block");
    }
}

#[test]
fn direct_transfers_with_registered_memory_match_the_byte_interface() {
    let dir = TempDir::new("direct");
    let blocks = 128u64;
    let file =
        FileBackend::create(dir.path().join("lun"), blocks * 512, BlockSize::B512).expect("create");
    let ram = RamBackend::new(blocks, BlockSize::B512).expect("ram");
    let bytes_only = common::ByteRam::new(blocks, BlockSize::B512);
    let backends: [(&str, &dyn Backend); 3] =
        [("file", &file), ("ram", &ram), ("default", &bytes_only)];
    // 40 KiB: more than one step of the default path; at an odd offset of the memory.
    let len = 80 * 512;
    let data = common::pattern(len, 11);
    for (name, b) in backends {
        let mem = hca::mem::MemBlock::new(len + 100);
        mem.write(37, &data).expect("in range");
        let span = srp_target::MemSpan {
            block: &mem,
            offset: 37,
            len,
        };
        b.write_from(Lba(9), span).expect("write_from");
        let mut back = vec![0u8; len];
        b.read_at(Lba(9), &mut back).expect("read_at");
        assert!(back == data, "{name}: write_from lands where read_at reads");
        let out = hca::mem::MemBlock::new(len + 3);
        let span = srp_target::MemSpan {
            block: &out,
            offset: 3,
            len,
        };
        b.read_into(Lba(9), span).expect("read_into");
        let mut got = vec![0u8; len];
        out.read(3, &mut got).expect("in range");
        assert!(got == data, "{name}: read_into gives the blocks");
        // Ranges are checked as for the byte interface; a span outside its memory errors.
        let past = srp_target::MemSpan {
            block: &out,
            offset: 3,
            len: 512,
        };
        assert!(matches!(
            b.read_into(Lba(blocks), past),
            Err(BackendError::OutOfRange { .. })
        ));
        let outside = srp_target::MemSpan {
            block: &out,
            offset: len,
            len: 1024,
        };
        assert!(
            b.read_into(Lba(0), outside).is_err(),
            "{name}: span past the memory"
        );
    }
}

#[test]
fn a_ram_lun_larger_than_memory_is_an_error_not_an_abort() {
    // 2^40 blocks of 4 KiB: 4 PiB, far beyond any machine this runs on.
    let e = srp_target::RamBackend::new(1 << 40, BlockSize::B4096).expect_err("too large");
    assert!(e.to_string().contains("memory"), "{e}");
    // A small one is zero-filled and usable.
    let small = srp_target::RamBackend::new(8, BlockSize::B512).expect("small");
    let mut b = [1u8; 512];
    small.read_at(scsi::Lba(7), &mut b).expect("read");
    assert_eq!(b, [0; 512]);
}
