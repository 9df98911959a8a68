//! The sampler: asks the host daemon for the disk's paths every [`PERIOD`] and keeps their
//! counters and states, from which the report draws IOPS per path and when the host saw
//! the faulted path go and come back.

use srp_hostd::control::{DiskInfo, HostClient};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How often the host daemon is asked.
pub(crate) const PERIOD: Duration = Duration::from_millis(200);

/// One path in one sample.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PathSample {
    /// The path's session.
    pub(crate) session: u32,
    /// What it reaches: the IOC's GUID and the portal (a path that comes back as a new
    /// session — the iSCSI model's surprise removal and re-login — reaches the same).
    pub(crate) target: String,
    /// Reads plus writes completed on it so far.
    pub(crate) ops: u64,
    /// Its state (`active`, `standby`, `failed`, …).
    pub(crate) state: String,
    /// I/Os on it at that moment.
    pub(crate) in_flight: u32,
}

/// The disk's paths at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Sample {
    /// When the answer came, µs since the drill's start.
    pub(crate) at_us: u64,
    /// I/Os queued for want of a path.
    pub(crate) queued: u32,
    /// Every path.
    pub(crate) paths: Vec<PathSample>,
}

impl Sample {
    /// The disk's paths as `disk` shows them, at `at_us`.
    pub(crate) fn of(disk: &DiskInfo, at_us: u64) -> Sample {
        Sample {
            at_us,
            queued: disk.queued,
            paths: disk
                .paths
                .iter()
                .map(|p| PathSample {
                    session: p.session,
                    target: format!("{}@{}", p.ioc_guid, p.portal),
                    ops: p.reads + p.writes,
                    state: p.state.clone(),
                    in_flight: p.in_flight,
                })
                .collect(),
        }
    }

    /// Path `session` in this sample.
    pub(crate) fn path(&self, session: u32) -> Option<&PathSample> {
        self.paths.iter().find(|p| p.session == session)
    }
}

/// What the sampler collected; shared with the progress display.
#[derive(Debug, Default)]
pub(crate) struct Samples {
    /// Every sample, in order.
    pub(crate) samples: Vec<Sample>,
    /// Polls that failed (daemon unreachable, disk missing).
    pub(crate) failed_polls: u64,
    /// The last failure.
    pub(crate) last_error: Option<String>,
}

/// Polls the daemon at `socket` for disk `disk` every [`PERIOD`] until `stop`.
pub(crate) fn run(
    socket: PathBuf,
    disk: String,
    out: Arc<Mutex<Samples>>,
    stop: Arc<AtomicBool>,
    t0: Instant,
) {
    let mut client: Option<HostClient> = None;
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let polled = poll(&mut client, &socket, &disk);
        let at_us = t0.elapsed().as_micros() as u64;
        {
            let mut o = out.lock().unwrap_or_else(PoisonError::into_inner);
            match polled {
                Ok(d) => o.samples.push(Sample::of(&d, at_us)),
                Err(e) => {
                    // Reconnect on the next poll.
                    client = None;
                    o.failed_polls += 1;
                    o.last_error = Some(e);
                }
            }
        }
        next += PERIOD;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            next = now;
        }
    }
}

fn poll(client: &mut Option<HostClient>, socket: &Path, disk: &str) -> Result<DiskInfo, String> {
    if client.is_none() {
        *client = Some(HostClient::connect(socket).map_err(|e| e.to_string())?);
    }
    let Some(c) = client.as_mut() else {
        return Err("not connected".into());
    };
    let disks = c.disks().map_err(|e| e.to_string())?;
    disks
        .into_iter()
        .find(|d| d.name == disk)
        .ok_or_else(|| format!("disk {disk} is gone from the host daemon's list"))
}
