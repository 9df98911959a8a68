//! Our side of an interop run: `srpctl` daemons as real processes inside the test's network
//! namespace, their configuration files, logs and control commands.
//!
//! The daemons run through `nsenter --net` (not `ip netns exec`, which also gives the
//! process a mount namespace of its own: the host daemon's FUSE block files would be
//! invisible to the test). Each daemon's standard error goes to a log file the test reads
//! and prints on failure; dropping a [`Daemon`] stops it (SIGTERM, then SIGKILL after 10 s).

use crate::netns::NetNs;
use crate::{Error, Result};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The environment variable naming the `srpctl` binary to run (default: the workspace's
/// `target/debug/srpctl`, else `target/release/srpctl`, whichever is newer).
pub const ENV_SRPCTL: &str = "SRPCTL_BIN";

/// The `srpctl` binary the interop tests run.
pub fn srpctl_bin() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os(ENV_SRPCTL) {
        return Ok(PathBuf::from(p));
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let newest = ["debug", "release"]
        .iter()
        .map(|p| target.join(p).join("srpctl"))
        .filter_map(|p| Some((p.metadata().ok()?.modified().ok()?, p)))
        .max();
    newest.map(|(_, p)| p).ok_or_else(|| {
        Error::Guest(format!(
            "no srpctl binary under {}: build it first (cargo build -p srpctl) or set {ENV_SRPCTL}",
            target.display()
        ))
    })
}

/// A command that runs `program` in `ns`'s network namespace only (the host's mounts).
pub fn in_netns(ns: &NetNs, program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = Command::new("nsenter");
    cmd.arg(format!("--net=/run/netns/{}", ns.name()))
        .arg("--")
        .arg(program);
    cmd
}

/// A daemon process of ours (`srpctl target run`, `srpctl host run`).
#[derive(Debug)]
pub struct Daemon {
    name: String,
    child: Option<Child>,
    log: PathBuf,
}

impl Daemon {
    /// Starts `srpctl <args>` in `ns`, standard error and output to `log`, with
    /// `SRPCTL_LOG=debug` unless `quiet`.
    pub fn start(ns: &NetNs, name: &str, args: &[&str], log: &Path) -> Result<Daemon> {
        let bin = srpctl_bin()?;
        let out =
            std::fs::File::create(log).map_err(Error::io(format!("create {}", log.display())))?;
        let err = out.try_clone().map_err(Error::io("dup the log file"))?;
        let child = in_netns(ns, &bin)
            .args(args)
            .env(
                "SRPCTL_LOG",
                std::env::var("SRPCTL_LOG").unwrap_or("info".into()),
            )
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(Error::io(format!("start {}", bin.display())))?;
        Ok(Daemon {
            name: name.to_owned(),
            child: Some(child),
            log: log.to_owned(),
        })
    }

    /// Everything the daemon has printed so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits up to `timeout` for `what` to appear in the log; fails early if the daemon
    /// exits.
    pub fn wait_for_log(&mut self, what: &str, timeout: Duration) -> Result<()> {
        let end = Instant::now() + timeout;
        loop {
            if self.log().contains(what) {
                return Ok(());
            }
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    return Err(Error::Guest(format!(
                        "{} exited ({status}) before printing {what:?}:\n{}",
                        self.name,
                        self.log()
                    )));
                }
            }
            if Instant::now() >= end {
                return Err(Error::Guest(format!(
                    "{} did not print {what:?} within {timeout:?}:\n{}",
                    self.name,
                    self.log()
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Whether it is still running.
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Stops it: SIGTERM, then SIGKILL if it has not exited within 10 s. Returns its log.
    pub fn stop(&mut self) -> String {
        if let Some(mut c) = self.child.take() {
            let _ = kill(Pid::from_raw(c.id() as i32), Signal::SIGTERM);
            let end = Instant::now() + Duration::from_secs(10);
            loop {
                match c.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() >= end => {
                        let _ = c.kill();
                        let _ = c.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(50)),
                }
            }
        }
        self.log()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.child.is_some() {
            let log = self.stop();
            if std::thread::panicking() {
                eprintln!(
                    "---- {} log ----\n{log}\n---- end of {} log ----",
                    self.name, self.name
                );
            }
        }
    }
}

/// Runs `srpctl <args>` in `ns` and returns its standard output; fails with its output on a
/// non-zero exit.
pub fn srpctl(ns: &NetNs, args: &[&str]) -> Result<String> {
    let bin = srpctl_bin()?;
    let out = in_netns(ns, &bin)
        .args(args)
        .output()
        .map_err(Error::io(format!("run {}", bin.display())))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(Error::Command {
            script: format!("srpctl {}", args.join(" ")),
            rc: out.status.code().unwrap_or(-1),
            stdout,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(stdout)
}

/// A temporary directory for one test's files, removed on drop unless the test panicked or
/// `SRP_INTEROP_KEEP` is set (then kept and named, for the logs and captures).
#[derive(Debug)]
pub struct WorkDir(PathBuf);

impl WorkDir {
    /// `/tmp/srp-interop-<tag>-<pid>`, fresh.
    pub fn new(tag: &str) -> Result<WorkDir> {
        let p = std::env::temp_dir().join(format!("srp-interop-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).map_err(Error::io(format!("create {}", p.display())))?;
        Ok(WorkDir(p))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if std::thread::panicking() || std::env::var_os(crate::ENV_KEEP).is_some() {
            eprintln!("kept {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
