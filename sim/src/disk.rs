//! [`SimDisk`]: the storage under the simulated target's LUN — what was flushed kept apart
//! from what was only written, so a crash can lose exactly what a power cut may.
//!
//! The crash model is the one the write-log checker uses (`srp_target::writelog::check`):
//! after a crash each sector holds the version the last completed flush made durable, or
//! any version written to it after that — unflushed writes dropped, reordered or torn at
//! sector granularity. Which one survives is drawn from the simulation's seed. The
//! target's file backend reaches it through [`SimMedium`], a [`Medium`] put beneath the
//! backend ([`srp_target::backend::medium::MediumLayer`]); nothing touches a real file.

use hca::sim::Rng;
use ib_verbs::mem::FileIoError;
use srp_target::backend::MemSpan;
use srp_target::backend::medium::Medium;
use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The unit a crash keeps or loses whole.
pub const SECTOR: u64 = 512;

/// One sector's versions.
#[derive(Debug, Default, Clone)]
struct Sector {
    /// What the last flush made durable (`None`: never written, zeros).
    durable: Option<Arc<[u8]>>,
    /// Written since, oldest first.
    volatile: Vec<Arc<[u8]>>,
}

impl Sector {
    fn latest(&self) -> Option<&Arc<[u8]>> {
        self.volatile.last().or(self.durable.as_ref())
    }
}

/// What the disk did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DiskStats {
    /// Sector writes.
    pub writes: u64,
    /// Flushes (`fdatasync`).
    pub flushes: u64,
    /// Crashes.
    pub crashes: u64,
    /// Sectors a crash set back to an older version than the latest written.
    pub lost: u64,
}

#[derive(Debug, Default)]
struct State {
    sectors: BTreeMap<u64, Sector>,
    stats: DiskStats,
}

/// The simulated disk (see the module doc). Shared by every incarnation of the target.
#[derive(Debug, Default)]
pub struct SimDisk {
    state: Mutex<State>,
    /// The injected bug ([`SimDisk::inject_lying_flush`]).
    lying_flush: std::sync::atomic::AtomicBool,
}

impl SimDisk {
    /// An empty (all-zero) disk.
    pub fn new() -> Arc<SimDisk> {
        Arc::new(SimDisk::default())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What it did.
    pub fn stats(&self) -> DiskStats {
        self.lock().stats
    }

    /// The bytes at `offset` as a read now sees them.
    pub fn read(&self, buf: &mut [u8], offset: u64) {
        let s = self.lock();
        for (i, chunk) in buf.chunks_mut(SECTOR as usize).enumerate() {
            let sector = offset / SECTOR + i as u64;
            match s.sectors.get(&sector).and_then(Sector::latest) {
                Some(data) => chunk.copy_from_slice(&data[..chunk.len()]),
                None => chunk.fill(0),
            }
        }
    }

    /// Writes whole sectors at `offset`.
    pub fn write(&self, data: &[u8], offset: u64) -> io::Result<()> {
        if offset % SECTOR != 0 || data.len() as u64 % SECTOR != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "the simulated disk takes whole sectors: {} bytes at {offset}",
                    data.len()
                ),
            ));
        }
        let mut s = self.lock();
        for (i, chunk) in data.chunks(SECTOR as usize).enumerate() {
            let sector = offset / SECTOR + i as u64;
            s.sectors
                .entry(sector)
                .or_default()
                .volatile
                .push(Arc::from(chunk));
            s.stats.writes += 1;
        }
        Ok(())
    }

    /// From now on a flush answers success and makes nothing durable: the bug the
    /// simulation must catch (an `fdatasync` lost beneath the backend, as the crash
    /// checker's mutation test has it).
    pub fn inject_lying_flush(&self) {
        self.lying_flush
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Makes every version written so far durable (a completed `fdatasync`).
    pub fn flush(&self) {
        let mut s = self.lock();
        s.stats.flushes += 1;
        if self.lying_flush.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        for sector in s.sectors.values_mut() {
            if let Some(last) = sector.volatile.pop() {
                sector.durable = Some(last);
                sector.volatile.clear();
            }
        }
    }

    /// A power cut: each sector keeps its durable version or any later one, drawn from
    /// `rng`; the survivor is what the disk holds from now on (durable).
    pub fn crash(&self, rng: &mut Rng) {
        let mut s = self.lock();
        s.stats.crashes += 1;
        let mut lost = 0;
        for sector in s.sectors.values_mut() {
            if sector.volatile.is_empty() {
                continue;
            }
            let n = sector.volatile.len() as u64;
            // 0: the durable version; k: the k-th write since.
            let pick = rng.range(0, n + 1);
            if pick < n {
                lost += 1;
            }
            if pick > 0 {
                sector.durable = Some(sector.volatile[(pick - 1) as usize].clone());
            }
            sector.volatile.clear();
        }
        s.stats.lost += lost;
    }

    /// A [`Medium`] over this disk, for the target's backend.
    pub fn medium(self: &Arc<Self>) -> Box<dyn Medium> {
        Box::new(SimMedium(self.clone()))
    }
}

/// The target backend's view of a [`SimDisk`].
#[derive(Debug)]
pub struct SimMedium(Arc<SimDisk>);

impl Medium for SimMedium {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.0.read(buf, offset);
        Ok(())
    }

    fn read_into(&self, dst: MemSpan<'_>, offset: u64) -> Result<(), FileIoError> {
        let mut buf = vec![0u8; dst.len];
        self.0.read(&mut buf, offset);
        dst.block.write(dst.offset, &buf)?;
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.0.write(buf, offset)
    }

    fn write_from(&self, src: MemSpan<'_>, offset: u64) -> Result<(), FileIoError> {
        let mut data = vec![0u8; src.len];
        src.block.read(src.offset, &mut data)?;
        self.0.write(&data, offset).map_err(FileIoError::from)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.0.flush();
        Ok(())
    }

    fn punch_hole(&self, offset: u64, len: u64) -> Result<(), nix::errno::Errno> {
        let zeros = vec![0u8; len as usize];
        self.0
            .write(&zeros, offset)
            .map_err(|_| nix::errno::Errno::EINVAL)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sector(b: u8) -> Vec<u8> {
        vec![b; SECTOR as usize]
    }

    #[test]
    fn a_crash_keeps_flushed_data_and_may_lose_the_rest() {
        let d = SimDisk::new();
        d.write(&sector(1), 0).expect("whole sectors");
        d.flush();
        d.write(&sector(2), 0).expect("whole sectors");
        d.write(&sector(3), 0).expect("whole sectors");
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..64 {
            let d2 = SimDisk::new();
            *d2.lock() = State {
                sectors: d.lock().sectors.clone(),
                stats: DiskStats::default(),
            };
            d2.crash(&mut Rng::new(seed));
            let mut buf = sector(0);
            d2.read(&mut buf, 0);
            seen.insert(buf[0]);
            // What survived is durable: a second crash keeps it.
            d2.crash(&mut Rng::new(seed + 1));
            let mut again = sector(0);
            d2.read(&mut again, 0);
            assert_eq!(again, buf);
        }
        assert_eq!(seen, [1, 2, 3].into_iter().collect());
    }

    #[test]
    fn unflushed_writes_of_a_never_flushed_sector_may_vanish() {
        let d = SimDisk::new();
        d.write(&sector(7), 512).expect("whole sectors");
        let mut zeros = 0;
        for seed in 0..32 {
            let d2 = SimDisk::new();
            d2.write(&sector(7), 512).expect("whole sectors");
            d2.crash(&mut Rng::new(seed));
            let mut buf = sector(9);
            d2.read(&mut buf, 512);
            zeros += usize::from(buf[0] == 0);
        }
        assert!(zeros > 0 && zeros < 32, "{zeros}");
        let mut buf = sector(0);
        d.read(&mut buf, 512);
        assert_eq!(buf[0], 7);
    }

    #[test]
    fn partial_sectors_are_refused() {
        let d = SimDisk::new();
        assert!(d.write(&[1, 2, 3], 0).is_err());
        assert!(d.write(&sector(1), 3).is_err());
    }
}
