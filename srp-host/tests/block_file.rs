//! A RAM disk exposed as a block file: byte I/O at any offset, size, fsync → flush(), the end of
//! the disk, EIO from failing reads, large I/O kept large, concurrent unaligned writers.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use common::{RamDisk, TempDir, bounded, mount, pattern};

const MIB: usize = 1 << 20;

fn open_rw(path: &std::path::Path) -> File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap()
}

#[test]
fn round_trip_at_aligned_and_unaligned_offsets() {
    bounded(20, || {
        let dir = TempDir::new("rt");
        let mounted = mount(dir.path());
        let ram = Arc::new(RamDisk::new(512, 16 * 2048)); // 16 MiB
        let path = mounted.files().add("lun0", ram.clone()).unwrap();
        mounted
            .files()
            .add("lun1", Arc::new(RamDisk::new(4096, 16)))
            .unwrap();

        let meta = std::fs::metadata(&path).unwrap();
        assert!(meta.is_file());
        assert_eq!(meta.len(), 16 * MIB as u64);
        assert_eq!(
            std::fs::metadata(dir.path().join("lun1")).unwrap().len(),
            65536
        );
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["lun0", "lun1"]);

        let mut model = vec![0u8; 16 * MIB];
        let f = open_rw(&path);
        let writes: &[(u64, usize)] = &[
            (0, 4096),
            (1000, 3000),
            (8191, 2),
            (5 * 512 + 7, 1),
            (MIB as u64, MIB),
            (3 * MIB as u64 + 100, 2 * MIB + 33),
        ];
        for (i, &(off, len)) in writes.iter().enumerate() {
            let data = pattern(i as u64 + 1, len);
            f.write_all_at(&data, off).unwrap();
            model[off as usize..off as usize + len].copy_from_slice(&data);
        }
        for &(off, len) in &[
            (0u64, 8192usize),
            (999, 3002),
            (8190, 5),
            (MIB as u64 - 3, MIB + 7),
            (3 * MIB as u64, 3 * MIB),
        ] {
            let mut got = vec![0u8; len];
            f.read_exact_at(&mut got, off).unwrap();
            assert!(
                got == model[off as usize..off as usize + len],
                "mismatch reading {len} at {off}"
            );
        }
        // The device holds exactly what was written, and the whole file reads back.
        assert!(*ram.data.lock().unwrap() == model);
        let mut all = Vec::new();
        File::open(&path).unwrap().read_to_end(&mut all).unwrap();
        assert!(all == model);

        // One 1 MiB write and read reach the device whole, not in 4 KiB pieces.
        let (max_w, max_r) = (
            ram.max_write.load(Ordering::SeqCst),
            ram.max_read.load(Ordering::SeqCst),
        );
        eprintln!("largest device write {max_w} B, read {max_r} B");
        assert!(
            max_w >= 256 * 1024 && max_r >= 256 * 1024,
            "I/O chopped: write {max_w}, read {max_r}"
        );
    });
}

#[test]
fn fsync_reaches_flush_and_o_sync_is_fua() {
    bounded(20, || {
        let dir = TempDir::new("fsync");
        let mounted = mount(dir.path());
        let ram = Arc::new(RamDisk::new(512, 2048));
        let path = mounted.files().add("lun0", ram.clone()).unwrap();
        let mut f = open_rw(&path);
        f.write_all(&[1; 4096]).unwrap();
        let before = ram.flushes.load(Ordering::SeqCst);
        f.sync_all().unwrap();
        f.sync_data().unwrap();
        assert_eq!(ram.flushes.load(Ordering::SeqCst), before + 2);
        assert_eq!(ram.fua_writes.load(Ordering::SeqCst), 0);
        let g = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DSYNC)
            .open(&path)
            .unwrap();
        g.write_all_at(&[2; 512], 0).unwrap();
        assert_eq!(ram.fua_writes.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn writing_past_the_end_fails_and_the_file_never_grows() {
    bounded(20, || {
        let dir = TempDir::new("end");
        let mounted = mount(dir.path());
        let path = mounted
            .files()
            .add("lun0", Arc::new(RamDisk::new(512, 64)))
            .unwrap();
        let size = 64 * 512;
        let f = open_rw(&path);
        let e = f.write_at(&[1; 512], size).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
        // Straddling the end: the part that fits is written, as on a block device.
        assert_eq!(f.write_at(&[1; 1024], size - 512).unwrap(), 512);
        assert!(f.write_all_at(&[1; 1024], size - 512).is_err());
        let e = f.set_len(2 * size).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
        let mut buf = [0u8; 16];
        assert_eq!(
            f.read_at(&mut buf, size).unwrap(),
            0,
            "read at the end is EOF"
        );
    });
}

#[test]
fn o_trunc_is_ignored_as_on_a_block_device() {
    bounded(20, || {
        let dir = TempDir::new("trunc");
        let mounted = mount(dir.path());
        let ram = Arc::new(RamDisk::new(512, 64));
        let path = mounted.files().add("lun0", ram.clone()).unwrap();
        open_rw(&path).write_all_at(&[3; 4096], 4096).unwrap();
        let f = OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&path)
            .expect("O_TRUNC opens");
        f.write_all_at(&[4; 512], 0).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 64 * 512);
        assert!(ram.data.lock().unwrap()[4096..8192].iter().all(|&b| b == 3));
        // dd without conv=notrunc, as users type it.
        let out = std::process::Command::new("dd")
            .args(["if=/dev/zero", "bs=512", "count=2", "status=none"])
            .arg(format!("of={}", path.display()))
            .output()
            .expect("dd runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(ram.data.lock().unwrap()[..1024].iter().all(|&b| b == 0));
        assert!(ram.data.lock().unwrap()[4096..8192].iter().all(|&b| b == 3));
        // A real size change is still refused.
        let e = f.set_len(0).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}");
    });
}

#[test]
fn failing_device_reads_give_eio() {
    bounded(20, || {
        let dir = TempDir::new("eio");
        let mounted = mount(dir.path());
        let ram = Arc::new(RamDisk::new(512, 64));
        let path = mounted.files().add("lun0", ram.clone()).unwrap();
        let f = open_rw(&path);
        ram.fail_reads.store(true, Ordering::SeqCst);
        let mut buf = [0u8; 512];
        let e = f.read_at(&mut buf, 0).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
        // An unaligned write needs a read of its edge block: EIO too, and nothing written.
        let e = f.write_at(&[7; 10], 5).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
        assert!(ram.data.lock().unwrap().iter().all(|&b| b == 0));
        ram.fail_reads.store(false, Ordering::SeqCst);
        f.read_exact_at(&mut buf, 0).unwrap();
    });
}

#[test]
fn concurrent_unaligned_writers_sharing_blocks_do_not_corrupt() {
    bounded(30, || {
        let dir = TempDir::new("race");
        let mounted = mount(dir.path());
        let ram = Arc::new(RamDisk::new(512, 64));
        ram.read_delay_us.store(200, Ordering::SeqCst); // widen the read-modify-write window
        let path = mounted.files().add("lun0", ram.clone()).unwrap();
        // 16 writers, each owning 100 bytes; neighbours share 512-byte blocks. Every round all
        // write at once, then each checks its bytes survived its neighbours' read-modify-writes.
        let barrier = Arc::new(std::sync::Barrier::new(16));
        let writers: Vec<_> = (0..16u8)
            .map(|i| {
                let (f, barrier) = (open_rw(&path), barrier.clone());
                // A writer counts undone rounds instead of panicking, so no one is left
                // waiting at the barrier.
                std::thread::spawn(move || {
                    let mut undone = 0;
                    let at = u64::from(i) * 100 + 37;
                    for round in 0..40u8 {
                        let byte = i.wrapping_mul(16).wrapping_add(round) | 1;
                        barrier.wait();
                        f.write_all_at(&[byte; 100], at).unwrap();
                        barrier.wait();
                        let mut got = [0u8; 100];
                        f.read_exact_at(&mut got, at).unwrap();
                        undone += usize::from(got.iter().any(|&b| b != byte));
                    }
                    undone
                })
            })
            .collect();
        let undone: usize = writers.into_iter().map(|w| w.join().unwrap()).sum();
        assert_eq!(
            undone, 0,
            "rounds undone by a neighbour's read-modify-write"
        );
        let data = ram.data.lock().unwrap();
        assert!(data[..37].iter().all(|&b| b == 0) && data[1637..].iter().all(|&b| b == 0));
    });
}

#[test]
fn unmount_while_a_file_is_open_detaches_without_hanging() {
    bounded(20, || {
        let dir = TempDir::new("busy");
        let mounted = mount(dir.path());
        let path = mounted
            .files()
            .add("lun0", Arc::new(RamDisk::new(512, 64)))
            .unwrap();
        let f = open_rw(&path);
        let canonical = dir.path().canonicalize().unwrap();
        mounted.unmount().unwrap();
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
        assert!(
            !mounts.contains(canonical.to_str().unwrap()),
            "still mounted"
        );
        // The detached session serves the open file until it closes.
        f.write_all_at(&[3; 512], 0).unwrap();
        let mut buf = [0u8; 512];
        f.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(buf, [3; 512]);
    });
}

#[test]
fn thirty_two_reads_are_in_flight_at_once() {
    bounded(60, || {
        let dir = TempDir::new("depth");
        let mounted = mount(dir.path());
        let ram = Arc::new(RamDisk::new(512, 1024));
        let path = mounted.files().add("lun0", ram.clone()).unwrap();
        // Each read holds its FUSE thread until 32 are in flight (or 2 s pass): only
        // requests served side by side get there, as a queue depth of 32 needs.
        ram.read_gate.store(32, Ordering::SeqCst);
        let readers: Vec<_> = (0..32u64)
            .map(|i| {
                let f = open_rw(&path);
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    f.read_exact_at(&mut buf, i * 4096).unwrap();
                })
            })
            .collect();
        for r in readers {
            r.join().unwrap();
        }
        let most = ram.max_reads_in_flight.load(Ordering::SeqCst);
        assert_eq!(most, 32, "reads served at once");
    });
}
