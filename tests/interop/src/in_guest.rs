//! Our daemons inside the guest: `srpctl` run by the guest's kernel on the guest's own
//! RDMA devices through rdma-core (`provider = "rdma-core"`), the way they run on a machine
//! with a real RDMA NIC. The guest sees the host's root read-only, so it runs the very
//! binary the host built ([`crate::ours::srpctl_bin`]), copied once into the guest's tmpfs
//! first: the 9p root is cached loosely, and a binary rebuilt on the host while a guest
//! runs would otherwise reach it as a mix of old and new pages (seen: "IO Safety
//! violation" aborts, ENOTSOCK from a fresh socket). Configuration, logs and state live in
//! the guest's share (the host reads the logs as the daemon writes them).
//!
//! A daemon is a background job of the guest: started by one command, stopped by another
//! (SIGTERM, then SIGKILL after 10 s); the guest's power-off ends whatever is left. Dropping
//! a [`GuestDaemon`] during a panic prints its log.

use crate::ours::srpctl_bin;
use crate::{Error, Guest, Result};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Where the guest keeps its copy of `srpctl`.
pub const GUEST_SRPCTL: &str = "/run/srpctl";

/// The guest's copy of the host's `srpctl` ([`GUEST_SRPCTL`]), made on first use.
pub fn guest_srpctl(guest: &Guest) -> Result<&'static str> {
    // The guest's commands run in its /tmp: the host's path, made absolute.
    let bin = srpctl_bin()?;
    let mut bin = std::fs::canonicalize(&bin).map_err(Error::io(format!("{}", bin.display())))?;
    // The guest mounts its own tmpfs on /tmp and /run, hiding the host's: a binary built in
    // a checkout under /tmp (CI's `mktemp -d` clone) reaches the guest through the share.
    if bin.starts_with("/tmp") || bin.starts_with("/run") {
        let shared = guest.share_dir().join("srpctl.bin");
        if !shared.exists() {
            std::fs::copy(&bin, &shared)
                .map_err(Error::io(format!("copy {} into the share", bin.display())))?;
        }
        bin = PathBuf::from(crate::guest::GUEST_SHARE).join("srpctl.bin");
    }
    guest.run_ok(
        &format!(
            "[ -x {GUEST_SRPCTL} ] || {{ cp {} {GUEST_SRPCTL}.tmp && mv {GUEST_SRPCTL}.tmp {GUEST_SRPCTL}; }}",
            shell_quote(&bin.display().to_string())
        ),
        Duration::from_secs(60),
    )?;
    Ok(GUEST_SRPCTL)
}

/// A `srpctl` daemon running in the guest.
#[derive(Debug)]
pub struct GuestDaemon {
    name: String,
    /// Host path of its log (in the share).
    log: PathBuf,
    /// Guest path of its pid file.
    pid: String,
    stopped: bool,
}

/// The share's path, as the guest sees it, of a file the host writes at
/// `guest.share_dir().join(name)`.
pub fn guest_path(name: &str) -> String {
    format!("{}/{name}", crate::guest::GUEST_SHARE)
}

/// Writes `text` into the share as `name`; returns the guest's path of it.
pub fn write_share(guest: &Guest, name: &str, text: &str) -> Result<String> {
    let p = guest.share_dir().join(name);
    if let Some(dir) = p.parent() {
        std::fs::create_dir_all(dir).map_err(Error::io(format!("create {}", dir.display())))?;
    }
    std::fs::write(&p, text).map_err(Error::io(format!("write {}", p.display())))?;
    Ok(guest_path(name))
}

impl GuestDaemon {
    /// Starts `srpctl <args>` in the guest's background, its output to `<name>.log` in the
    /// share, `SRPCTL_LOG` as the host's (default `info`).
    pub fn start(guest: &Guest, name: &str, args: &[&str]) -> Result<GuestDaemon> {
        let bin = guest_srpctl(guest)?;
        let log = format!("{name}.log");
        let level = std::env::var("SRPCTL_LOG").unwrap_or_else(|_| "info".into());
        let pid = format!("/tmp/srpctl-{name}.pid");
        let args: Vec<String> = args.iter().map(|a| shell_quote(a)).collect();
        let script = format!(
            "SRPCTL_LOG={level} setsid {bin} {args} </dev/null >{log} 2>&1 &\necho $! > {pid}",
            args = args.join(" "),
            log = guest_path(&log),
        );
        guest.run_ok(&script, Duration::from_secs(30))?;
        Ok(GuestDaemon {
            name: name.into(),
            log: guest.share_dir().join(log),
            pid,
            stopped: false,
        })
    }

    /// The guest's file holding its process ID.
    pub fn pid_file(&self) -> &str {
        &self.pid
    }

    /// What it has printed so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Whether it is still running.
    pub fn running(&self, guest: &Guest) -> bool {
        guest
            .run(
                &format!("kill -0 $(cat {}) 2>/dev/null", self.pid),
                Duration::from_secs(30),
            )
            .is_ok_and(|o| o.rc == 0)
    }

    /// Waits up to `timeout` for `what` in its log; fails early when it exits.
    pub fn wait_for_log(&self, guest: &Guest, what: &str, timeout: Duration) -> Result<()> {
        let end = Instant::now() + timeout;
        let mut checked = Instant::now();
        loop {
            if self.log().contains(what) {
                return Ok(());
            }
            if checked.elapsed() > Duration::from_secs(2) {
                checked = Instant::now();
                if !self.running(guest) {
                    return Err(Error::Guest(format!(
                        "{} (in the guest) exited before printing {what:?}:\n{}",
                        self.name,
                        self.log()
                    )));
                }
            }
            if Instant::now() >= end {
                return Err(Error::Guest(format!(
                    "{} (in the guest) did not print {what:?} within {timeout:?}:\n{}",
                    self.name,
                    self.log()
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Every thread's stack of the running daemon (gdb in the guest), for a failure's
    /// report: what a hung daemon waits on.
    pub fn backtrace(&self, guest: &Guest) -> String {
        let script = format!(
            "gdb -q -p $(cat {}) -batch -ex 'thread apply all bt 12' 2>&1 | grep -v '^\\[New LWP\\|^warning'",
            self.pid
        );
        match guest.run(&script, Duration::from_secs(120)) {
            Ok(o) => o.stdout,
            Err(e) => format!("no backtrace: {e}"),
        }
    }

    /// Stops it: SIGTERM, SIGKILL after 10 s. Returns its log and whether it exited by
    /// itself within those 10 s.
    pub fn stop(&mut self, guest: &Guest) -> (String, bool) {
        self.stopped = true;
        let script = format!(
            "p=$(cat {pid}) || exit 0\nkill -TERM $p 2>/dev/null || exit 0\n\
             for _ in $(seq 100); do kill -0 $p 2>/dev/null || exit 0; sleep 0.1; done\n\
             kill -KILL $p; exit 7",
            pid = self.pid
        );
        let clean = guest
            .run(&script, Duration::from_secs(30))
            .is_ok_and(|o| o.rc == 0);
        (self.log(), clean)
    }
}

impl Drop for GuestDaemon {
    fn drop(&mut self) {
        if !self.stopped && std::thread::panicking() {
            eprintln!(
                "---- {} (guest) log ----\n{}\n---- end of {} log ----",
                self.name,
                self.log(),
                self.name
            );
        }
    }
}

/// Runs `srpctl <args>` in the guest; its standard output, or an error with both outputs.
pub fn srpctl(guest: &Guest, args: &[&str]) -> Result<String> {
    let bin = guest_srpctl(guest)?;
    let args: Vec<String> = args.iter().map(|a| shell_quote(a)).collect();
    guest.run_ok(
        &format!("{bin} {}", args.join(" ")),
        Duration::from_secs(120),
    )
}

/// `s` quoted for bash.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@+".contains(&b))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}
