//! A lost disk disappears cleanly: its file leaves the directory at once, handles opened before
//! fail with EIO, I/O racing the removal ends, and the other disks carry on.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::{RamDisk, TempDir, bounded, mount, pattern};
use srp_host::DiskError;

#[test]
fn removed_disk_vanishes_and_open_handles_get_eio() {
    bounded(20, || {
        let dir = TempDir::new("rm");
        let mounted = mount(dir.path());
        let files = mounted.files();
        let a = files
            .add("lun-a", Arc::new(RamDisk::new(512, 2048)))
            .unwrap();
        let b = files
            .add("lun-b", Arc::new(RamDisk::new(512, 2048)))
            .unwrap();
        let fa = OpenOptions::new().read(true).write(true).open(&a).unwrap();
        let fb = OpenOptions::new().read(true).write(true).open(&b).unwrap();
        let mut buf = vec![0u8; 4096];
        fa.read_exact_at(&mut buf, 0).unwrap();

        files.remove("lun-a").unwrap();
        assert!(!a.exists(), "removed file still visible");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["lun-b"]);
        assert_eq!(files.names(), ["lun-b"]);
        let e = fa.read_at(&mut buf, 0).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
        let e = fa.write_at(&buf, 0).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
        let e = OpenOptions::new().read(true).open(&a).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}");
        assert_eq!(
            files.remove("lun-a"),
            Err(DiskError::NotFound("lun-a".into()))
        );
        drop(fa);

        // The survivor is untouched; the name can come back with a new disk.
        fb.write_all_at(&pattern(1, 4096), 512).unwrap();
        fb.read_exact_at(&mut buf, 512).unwrap();
        assert_eq!(buf, pattern(1, 4096));
        let again = Arc::new(RamDisk::new(4096, 4));
        files.add("lun-a", again).unwrap();
        assert_eq!(std::fs::metadata(&a).unwrap().len(), 16384);
    });
}

#[test]
fn removal_during_io_ends_every_reader() {
    bounded(20, || {
        let dir = TempDir::new("rmio");
        let mounted = mount(dir.path());
        let ram = Arc::new(RamDisk::new(512, 8192));
        ram.read_delay_us.store(100, Ordering::SeqCst);
        let path = mounted.files().add("lun0", ram).unwrap();
        let started = Arc::new(std::sync::Barrier::new(5));
        let readers: Vec<_> = (0..4u64)
            .map(|i| {
                let f = OpenOptions::new().read(true).open(&path).unwrap();
                let started = started.clone();
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 64 * 1024];
                    let mut off = i * 65536;
                    let give_up = Instant::now() + Duration::from_secs(10);
                    f.read_exact_at(&mut buf, off).unwrap();
                    started.wait();
                    // Read until the removal shows up as an error (or give up).
                    while Instant::now() < give_up {
                        match f.read_at(&mut buf, off % (4 << 20)) {
                            Ok(_) => off += 4096 + 7,
                            Err(e) => return e.raw_os_error(),
                        }
                    }
                    None
                })
            })
            .collect();
        started.wait();
        std::thread::sleep(Duration::from_millis(50));
        mounted.files().remove("lun0").unwrap();
        for r in readers {
            assert_eq!(
                r.join().unwrap(),
                Some(libc::EIO),
                "a reader did not see the loss"
            );
        }
        // Unmounting with nothing open is immediate.
        mounted.unmount().unwrap();
    });
}

/// A device whose reads wait until released: a stand-in for a LUN that stopped answering.
struct Stuck {
    release: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
}

impl srp_host::BlockDevice for Stuck {
    fn block_size(&self) -> u32 {
        512
    }
    fn capacity_blocks(&self) -> u64 {
        8
    }
    fn read(&self, _: scsi::Lba, _: &mut [u8]) -> Result<(), srp_host::DeviceError> {
        let _ = self.release.lock().unwrap().recv();
        Err(srp_host::DeviceError::Gone)
    }
    fn write(&self, _: scsi::Lba, _: &[u8], _: bool) -> Result<(), srp_host::DeviceError> {
        Ok(())
    }
    fn flush(&self) -> Result<(), srp_host::DeviceError> {
        Ok(())
    }
}

#[test]
fn abort_frees_a_reader_stuck_on_a_silent_device() {
    bounded(20, || {
        let dir = TempDir::new("abort");
        let mounted = mount(dir.path());
        let (release, rx) = std::sync::mpsc::channel();
        let stuck = Arc::new(Stuck {
            release: std::sync::Mutex::new(rx),
        });
        let path = mounted.files().add("lun0", stuck).unwrap();
        let f = OpenOptions::new().read(true).open(&path).unwrap();
        let reader = std::thread::spawn(move || f.read_at(&mut [0u8; 512], 0).unwrap_err());
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(!reader.is_finished(), "the silent device answered");
        mounted.files().abort().unwrap();
        let e = reader.join().unwrap();
        assert_eq!(e.raw_os_error(), Some(libc::ECONNABORTED), "{e}");
        // Let the FUSE worker return so the unmount can join it.
        release.send(()).unwrap();
        mounted.unmount().unwrap();
    });
}
