//! Linux-guest interop harness.
//!
//! Boots Debian's stock Linux 6.1 (`linux-image-6.1.0-N-amd64`, which has `rdma_rxe`,
//! `ib_srp`, `ib_srpt`, LIO and dm-multipath) under QEMU TCG, wired by tap devices into a
//! network namespace the harness creates, so that the project's daemons, run in the same
//! namespace, can talk RoCEv2 (UDP 4791) to the guest's `rdma_rxe`.
//!
//! - [`NetNs`]: a uniquely named network namespace, removed (with anything left in it) on drop.
//! - [`Guest`]: the booted guest. [`Guest::run`] runs a bash script in it as root and returns
//!   its exit code and output; the guest sees the host's whole root file system read-only
//!   (over 9p), so every host tool is there.
//! - [`Capture`]: dumpcap on an interface of the namespace.
//! - [`linux`]: the guest's own SRP stack: [`linux::setup_rxe`], [`linux::setup_lio_srpt`],
//!   [`linux::srp_login`], [`linux::srp_logout`].
//! - [`ours`]: our side: `srpctl` daemons run in the namespace ([`ours::Daemon`]), one-shot
//!   `srpctl` commands, a work directory.
//! - [`in_guest`]: our daemons run inside the guest on its rxe devices through rdma-core.
//! - [`mod@bench`]: our target over rdma-core next to LIO/ib_srpt, same ib_srp and fio.
//!
//! The guest's kernel, initramfs and QEMU come from `scripts/interop-setup.sh` and live in
//! the cache ([`Cache`]). Tests opt in with `SRP_INTEROP=1` ([`skip_reason`]); see
//! `tests/interop/README.md`.
#![deny(unsafe_code)]

pub mod bench;
pub mod capture;
mod error;
pub mod guest;
pub mod in_guest;
pub mod linux;
pub mod matrix;
pub mod netns;
pub mod ours;
pub mod workload;

pub use capture::{Capture, dissects_cleanly, tshark_fields, tshark_problems};
pub use error::{Error, Result};
pub use guest::{Guest, GuestConfig, Nic, NicConfig, Output};
pub use netns::NetNs;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// The environment variable that opts in to the interop tests (`SRP_INTEROP=1`).
pub const ENV_ENABLE: &str = "SRP_INTEROP";
/// The environment variable that moves the cache (default [`DEFAULT_CACHE`]).
pub const ENV_CACHE: &str = "SRP_INTEROP_CACHE";
/// The cache's default location, outside the checkout.
pub const DEFAULT_CACHE: &str = "/var/cache/srp-interop";
/// Set (to anything) to keep a guest's work directory (console log, share) after drop.
pub const ENV_KEEP: &str = "SRP_INTEROP_KEEP";

/// Why the interop tests should not run here, or `None` when they should: they run only
/// when `SRP_INTEROP=1` is set (booting Linux under TCG takes seconds per guest, so the
/// project's default test run leaves them out), as root, with `/dev/net/tun`.
pub fn skip_reason() -> Option<String> {
    if std::env::var(ENV_ENABLE).as_deref() != Ok("1") {
        return Some(format!(
            "{ENV_ENABLE}=1 not set: the Linux-guest interop tests boot Linux 6.1 under QEMU \
             and are opt-in (tests/interop/README.md)"
        ));
    }
    if !nix::unistd::Uid::effective().is_root() {
        return Some("the interop tests need root (network namespaces, tap devices)".into());
    }
    if !Path::new("/dev/net/tun").exists() {
        return Some("no /dev/net/tun (CONFIG_TUN): the guest's NICs are tap devices".into());
    }
    None
}

/// Returns from the calling test (which passes) with a `SKIP:` line on standard error
/// when [`skip_reason`] says the interop tests should not run. The line is written past the
/// test harness's output capture, so a plain `cargo test` shows it.
#[macro_export]
macro_rules! skip_unless_enabled {
    () => {
        if let Some(reason) = $crate::skip_reason() {
            $crate::print_skip(&reason);
            return;
        }
    };
}

/// Writes the current test's `SKIP` line straight to standard error (past libtest's
/// capture; libtest names each test's thread after the test).
pub fn print_skip(reason: &str) {
    use std::io::Write as _;
    let current = std::thread::current();
    let test = current.name().unwrap_or("test");
    let _ = writeln!(std::io::stderr(), "SKIP {test}: {reason}");
}

/// The artifacts `scripts/interop-setup.sh` leaves in the cache.
#[derive(Debug, Clone)]
pub struct Cache {
    /// The cache directory.
    pub dir: PathBuf,
    /// The pinned kernel ABI, e.g. `6.1.0-56-amd64`.
    pub kernel_version: String,
    /// The kernel image.
    pub kernel: PathBuf,
    /// The harness's initramfs for that kernel.
    pub initramfs: PathBuf,
    /// The QEMU binary.
    pub qemu: PathBuf,
    /// QEMU's firmware directories (one `-L` each) when QEMU was unpacked rather than
    /// installed; empty otherwise.
    pub qemu_datadirs: Vec<PathBuf>,
}

/// Whether this process ran the installer yet (it locks itself against other processes).
static SETUP: Mutex<bool> = Mutex::new(false);

impl Cache {
    /// The cache directory: `$SRP_INTEROP_CACHE` or [`DEFAULT_CACHE`].
    pub fn dir() -> PathBuf {
        std::env::var_os(ENV_CACHE)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_CACHE))
    }

    /// The installer, `scripts/interop-setup.sh` of this checkout.
    pub fn setup_script() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/interop-setup.sh")
    }

    /// Opens a populated cache (one whose `ready` marker the installer wrote).
    pub fn open() -> Result<Cache> {
        let dir = Self::dir();
        if !dir.join("ready").exists() {
            return Err(Error::Setup(format!(
                "{} is not populated: run scripts/interop-setup.sh",
                dir.display()
            )));
        }
        let read = |name: &str| {
            std::fs::read_to_string(dir.join(name))
                .map_err(|e| Error::Setup(format!("{}: {e}", dir.join(name).display())))
        };
        let kernel_version = read("kernel.version")?.trim().to_owned();
        let kdir = dir.join("kernel").join(&kernel_version);
        let kernel = kdir.join("boot").join(format!("vmlinuz-{kernel_version}"));
        let initramfs = dir.join(format!("initramfs-{kernel_version}.cpio.gz"));
        let mut qemu = None;
        let mut qemu_datadirs = Vec::new();
        for line in read("qemu.env")?.lines() {
            if let Some(v) = line.strip_prefix("QEMU_BIN=") {
                qemu = Some(PathBuf::from(v));
            } else if let Some(v) = line.strip_prefix("QEMU_DATADIR=") {
                qemu_datadirs = v
                    .split(':')
                    .filter(|d| !d.is_empty())
                    .map(PathBuf::from)
                    .collect();
            }
        }
        let qemu = qemu.ok_or_else(|| Error::Setup("qemu.env names no QEMU_BIN".into()))?;
        for p in [&kernel, &initramfs, &qemu] {
            if !p.exists() {
                return Err(Error::Setup(format!(
                    "{} missing: rerun scripts/interop-setup.sh",
                    p.display()
                )));
            }
        }
        Ok(Cache {
            dir,
            kernel_version,
            kernel,
            initramfs,
            qemu,
            qemu_datadirs,
        })
    }

    /// Runs `scripts/interop-setup.sh` (once per process: it only checks when everything is
    /// in place, 0.3 s, and rebuilds what the checkout changed, such as the initramfs), then
    /// opens the cache. The first run on a machine installs and downloads: a few minutes.
    pub fn ensure() -> Result<Cache> {
        let mut done = SETUP.lock().unwrap_or_else(|e| e.into_inner());
        if !*done {
            let script = Self::setup_script();
            if !Self::dir().join("ready").exists() {
                eprintln!(
                    "srp-interop: populating {} with {} (first time: a few minutes)",
                    Self::dir().display(),
                    script.display()
                );
            }
            let out = Command::new("bash")
                .arg(&script)
                .output()
                .map_err(Error::io(format!("run {}", script.display())))?;
            if !out.status.success() {
                let log = String::from_utf8_lossy(&out.stderr);
                let lines: Vec<&str> = log.lines().collect();
                return Err(Error::Setup(format!(
                    "{} failed ({}):\n{}",
                    script.display(),
                    out.status,
                    lines[lines.len().saturating_sub(30)..].join("\n")
                )));
            }
            *done = true;
        }
        drop(done);
        Self::open()
    }
}

/// Runs a host command and returns its standard output, or [`Error::Host`] with its status
/// and standard error.
pub(crate) fn host(program: &str, args: &[&str]) -> Result<String> {
    let cmd = format!("{program} {}", args.join(" "));
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(Error::io(format!("run `{cmd}`")))?;
    if !out.status.success() {
        return Err(Error::Host {
            cmd,
            detail: format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The last `n` lines of a text file (empty if it cannot be read).
pub(crate) fn file_tail(path: &Path, n: usize) -> String {
    let text = std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Aborts the whole test process if it is still running after `limit`: the last resort of
/// a time-bounded test (every guest operation has its own bound). After an abort no drop
/// runs, but the guests power themselves off when their agent socket closes, and the next
/// [`NetNs::new`] removes the namespaces left behind.
#[derive(Debug)]
pub struct Watchdog {
    disarm: Option<std::sync::mpsc::Sender<()>>,
}

impl Watchdog {
    /// Arms a watchdog named `what` (printed when it fires).
    pub fn new(what: &str, limit: std::time::Duration) -> Watchdog {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let name = what.to_owned();
        let spawned = std::thread::Builder::new()
            .name("srp-interop-watchdog".into())
            .spawn(move || {
                if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(limit) {
                    eprintln!("srp-interop: {name} still running after {limit:?}: aborting");
                    std::process::abort();
                }
            });
        if spawned.is_err() {
            eprintln!("srp-interop: could not start the watchdog for {what}");
        }
        Watchdog { disarm: Some(tx) }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        if let Some(tx) = self.disarm.take() {
            let _ = tx.send(());
        }
    }
}
