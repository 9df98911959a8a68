//! Serve one RAM disk as a block file until stdin closes, for trying the layer by hand:
//! `cargo run --release -p srp-host --example ramdisk -- /mnt/disks 256` then
//! `dd if=/dev/zero of=/mnt/disks/ram0 bs=1M count=64 oflag=direct conv=notrunc`.

use std::io::Read;
use std::sync::{Arc, Mutex};

use scsi::Lba;
use srp_host::{BlockDevice, BlockFiles, DeviceError, MountOptions};

struct Ram(Mutex<Vec<u8>>);

impl Ram {
    fn span(lba: Lba, len: usize) -> std::ops::Range<usize> {
        let at = usize::try_from(lba.0)
            .unwrap_or(usize::MAX)
            .saturating_mul(512);
        at..at.saturating_add(len)
    }
}

impl BlockDevice for Ram {
    fn block_size(&self) -> u32 {
        512
    }
    fn capacity_blocks(&self) -> u64 {
        self.0.lock().map_or(0, |d| d.len() as u64 / 512)
    }
    fn read(&self, lba: Lba, buf: &mut [u8]) -> Result<(), DeviceError> {
        let data = self.0.lock().map_err(|e| DeviceError::Io(e.to_string()))?;
        let src = data
            .get(Self::span(lba, buf.len()))
            .ok_or(DeviceError::Gone)?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn write(&self, lba: Lba, src: &[u8], _fua: bool) -> Result<(), DeviceError> {
        let mut data = self.0.lock().map_err(|e| DeviceError::Io(e.to_string()))?;
        let dst = data
            .get_mut(Self::span(lba, src.len()))
            .ok_or(DeviceError::Gone)?;
        dst.copy_from_slice(src);
        Ok(())
    }
    fn flush(&self) -> Result<(), DeviceError> {
        Ok(())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().ok_or("usage: ramdisk DIR [MIB]")?;
    let mib: usize = args.next().map_or(Ok(256), |s| s.parse())?;
    let mounted = BlockFiles::mount(&dir, &MountOptions::default())?;
    let path = mounted
        .files()
        .add("ram0", Arc::new(Ram(Mutex::new(vec![0; mib << 20]))))?;
    println!("{}", path.display());
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    mounted.unmount()?;
    Ok(())
}
