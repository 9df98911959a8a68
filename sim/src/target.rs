//! The simulated target: the real daemon loop ([`SteppedDaemon`]) with two ports, one IOC
//! on each exporting the same LUN, whose storage is a [`SimDisk`]; crashed (dropped, the
//! disk losing what a power cut may) and restarted on the same disk.

use crate::disk::SimDisk;
use hca::ca::SimFabric;
use hca::sim::{Rng, SimNet};
use srp_target::backend::medium::MediumLayer;
use srp_target::config::{IocConfig, TargetConfig};
use srp_target::daemon::{DaemonOptions, SteppedDaemon};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// The LU's size.
pub const LU_BYTES: u64 = 4 << 20;

/// A scratch directory (the LU's placeholder file, the state directory), removed on drop.
#[derive(Debug)]
struct Scratch(PathBuf);

impl Scratch {
    fn new(seed: u64) -> std::io::Result<Scratch> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("srp-sim-{}-{seed}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The simulated target (see the module doc).
pub struct SimTarget {
    config: TargetConfig,
    options: DaemonOptions,
    daemon: Option<SteppedDaemon>,
    disk: Arc<SimDisk>,
    /// Crashes so far.
    pub crashes: u64,
    _scratch: Scratch,
}

impl std::fmt::Debug for SimTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimTarget")
            .field("up", &self.daemon.is_some())
            .field("crashes", &self.crashes)
            .finish_non_exhaustive()
    }
}

fn config_text(dir: &std::path::Path, ports: [IpAddr; 2]) -> String {
    format!(
        r#"[target]
name = "sim-target"
node_guid = "0x0002c90300ee0000"
control_socket = "{sock}"
state_dir = "{state}"
idle_probe = "10s"

[[port]]
name = "p0"
address = "{p0}"

[[port]]
name = "p1"
address = "{p1}"

[[lun]]
name = "sim-vol"
file = "{file}"
size = "{size}"
block_size = 512

[[ioc]]
name = "ioc-a"
guid = "0x0002c90300ee0001"
ports = ["p0"]
exports = {{ 0 = "sim-vol" }}
allow = ["any"]

[[ioc]]
name = "ioc-b"
guid = "0x0002c90300ee0002"
ports = ["p1"]
exports = {{ 0 = "sim-vol" }}
allow = ["any"]
"#,
        sock = dir.join("target.sock").display(),
        state = dir.join("state").display(),
        file = dir.join("sim-vol.img").display(),
        size = LU_BYTES,
        p0 = ports[0],
        p1 = ports[1],
    )
}

impl SimTarget {
    /// Builds and starts the target on `net` with its ports at `ports`.
    pub fn start(net: &Arc<SimNet>, ports: [IpAddr; 2], seed: u64) -> Result<SimTarget, String> {
        let scratch = Scratch::new(seed).map_err(|e| format!("scratch directory: {e}"))?;
        let text = config_text(&scratch.0, ports);
        let loaded = TargetConfig::from_str(&text, "sim target").map_err(|e| e.to_string())?;
        let disk = SimDisk::new();
        let d = disk.clone();
        let options = DaemonOptions {
            medium_layer: Some(MediumLayer(Arc::new(move |_, _| d.medium()))),
            // Every port a software HCA on the net, its clock and seed: the run replays.
            ..DaemonOptions::new(Arc::new(SimFabric(net.clone())))
        };
        let mut t = SimTarget {
            config: loaded.config,
            options,
            daemon: None,
            disk,
            crashes: 0,
            _scratch: scratch,
        };
        t.restart()?;
        Ok(t)
    }

    /// The IOCs (what the host logs in to).
    pub fn iocs(&self) -> &[IocConfig] {
        &self.config.iocs
    }

    /// Its storage.
    pub fn disk(&self) -> &Arc<SimDisk> {
        &self.disk
    }

    /// Whether it runs.
    pub fn is_up(&self) -> bool {
        self.daemon.is_some()
    }

    /// A power cut: the daemon is gone at once (nothing sent), the disk keeps what the
    /// crash model lets it.
    pub fn crash(&mut self, rng: &mut Rng) {
        if self.daemon.take().is_some() {
            self.crashes += 1;
            self.disk.crash(rng);
        }
    }

    /// Starts it again (on the same disk).
    pub fn restart(&mut self) -> Result<(), String> {
        let d = SteppedDaemon::build(&self.config, &self.options).map_err(|e| e.to_string())?;
        self.daemon = Some(d);
        Ok(())
    }

    /// One turn of the daemon's loop (0 when it is down).
    pub fn turn(&mut self) -> usize {
        let Some(d) = self.daemon.as_mut() else {
            return 0;
        };
        let mut n = 0;
        loop {
            let k = d.turn();
            if k == 0 {
                d.arm();
                return n + d.turn();
            }
            n += k;
        }
    }

    /// When its loop next has timed work.
    pub fn next_due(&self) -> Option<Instant> {
        self.daemon.as_ref().and_then(SteppedDaemon::next_due)
    }

    /// Its log of logins, rejects and logouts since the last call.
    pub fn events(&mut self) -> Vec<String> {
        self.daemon
            .as_ref()
            .map(|d| d.events().iter().map(|e| format!("{e:?}")).collect())
            .unwrap_or_default()
    }
}
