//! The daemons under systemd (`Type=notify`): the sd_notify protocol spoken directly — one
//! datagram of `KEY=value` lines to the socket `NOTIFY_SOCKET` names (a path, or an
//! abstract name after `@`) — and the watchdog `WATCHDOG_USEC` asks for.
//!
//! - READY=1 once the ports, the control socket and (for the host) the first logins are
//!   up; STATUS= lines an operator sees in `systemctl status`; RELOADING=1 … READY=1
//!   around a SIGHUP reload; STOPPING=1 when SIGTERM starts the orderly logout.
//! - The watchdog is fed only while the daemon's loop answers: each period (half of
//!   `WATCHDOG_USEC`) a health check runs (the target's loop answers a control request; the
//!   host daemon answers its session list) and WATCHDOG=1 is sent only if it passed, so a
//!   hung loop is restarted by systemd rather than kept alive by a timer thread.
//! - Without `NOTIFY_SOCKET` (not under systemd) every call does nothing.
//!
//! No libsystemd: the protocol is a datagram of text, and the agreed dependency set has
//! what it needs (std's Unix datagram sockets).

use std::io;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Where notifications go: the service manager's socket, if there is one.
#[derive(Debug, Clone)]
pub(crate) struct Notifier {
    socket: Option<Target>,
    /// How often to feed the watchdog (half its timeout), if systemd asked for one.
    watchdog: Option<Duration>,
}

#[derive(Debug, Clone)]
enum Target {
    Path(PathBuf),
    Abstract(Vec<u8>),
}

impl Notifier {
    /// From the environment systemd gives a `Type=notify` service.
    pub(crate) fn from_env() -> Notifier {
        Notifier::from_vars(
            std::env::var("NOTIFY_SOCKET").ok().as_deref(),
            std::env::var("WATCHDOG_USEC").ok().as_deref(),
            std::env::var("WATCHDOG_PID").ok().as_deref(),
            std::process::id(),
        )
    }

    /// From the variables' values (`pid`: this process's).
    fn from_vars(
        socket: Option<&str>,
        watchdog_usec: Option<&str>,
        watchdog_pid: Option<&str>,
        pid: u32,
    ) -> Notifier {
        let socket = match socket {
            Some(s) if s.starts_with('@') => Some(Target::Abstract(s.as_bytes()[1..].to_vec())),
            Some(s) if s.starts_with('/') => Some(Target::Path(PathBuf::from(s))),
            _ => None,
        };
        // WATCHDOG_PID, when set, names the process the watchdog is meant for.
        let ours = watchdog_pid.is_none_or(|p| p.trim().parse::<u32>().ok() == Some(pid));
        let watchdog = watchdog_usec
            .and_then(|u| u.trim().parse::<u64>().ok())
            .filter(|u| *u > 0 && ours && socket.is_some())
            .map(|u| Duration::from_micros(u) / 2);
        Notifier { socket, watchdog }
    }

    /// Sends `state` (`KEY=value` lines); a manager that is gone is logged once per call.
    pub(crate) fn notify(&self, state: &str) {
        let Some(target) = &self.socket else {
            return;
        };
        if let Err(e) = send(target, state) {
            tracing::warn!(error = %e, state, "cannot notify the service manager");
        }
    }

    /// READY=1 with a status line.
    pub(crate) fn ready(&self, status: &str) {
        self.notify(&format!("READY=1\nSTATUS={status}"));
    }

    /// A reload starts (RELOADING=1, with the monotonic time systemd 253+ checks).
    pub(crate) fn reloading(&self) {
        let usec = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
            .map(|t| t.tv_sec() as u64 * 1_000_000 + t.tv_nsec() as u64 / 1000)
            .unwrap_or(0);
        self.notify(&format!("RELOADING=1\nMONOTONIC_USEC={usec}"));
    }

    /// The daemon is stopping (SIGTERM: the orderly logout runs).
    pub(crate) fn stopping(&self) {
        self.notify("STOPPING=1\nSTATUS=stopping: logging out");
    }

    /// Feeds the watchdog every period while `healthy` says the daemon's loop answers,
    /// until [`Watchdog::stop`]; a failed check is logged (and the watchdog starves, so
    /// systemd restarts the service). Nothing when no watchdog was asked for. The thread
    /// sleeps until its next feed and is woken at once by the stop (no polling).
    pub(crate) fn watchdog(
        &self,
        healthy: impl Fn() -> Result<(), String> + Send + 'static,
    ) -> io::Result<Option<Watchdog>> {
        let Some(period) = self.watchdog else {
            return Ok(None);
        };
        let me = self.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("watchdog".into())
            .spawn(move || {
                while !flag.load(Ordering::Acquire) {
                    match healthy() {
                        Ok(()) => me.notify("WATCHDOG=1"),
                        Err(why) => tracing::error!(
                            why = %why,
                            "the daemon's loop does not answer: the watchdog is not fed"
                        ),
                    }
                    let next = Instant::now() + period;
                    // Until the next feed, or the stop's unpark (spurious wakes re-park).
                    while !flag.load(Ordering::Acquire) {
                        let now = Instant::now();
                        if now >= next {
                            break;
                        }
                        std::thread::park_timeout(next - now);
                    }
                }
            })?;
        Ok(Some(Watchdog { stop, thread }))
    }
}

/// A running watchdog feeder ([`Notifier::watchdog`]).
pub(crate) struct Watchdog {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Watchdog {
    /// Stops feeding: wakes the thread and waits for it.
    pub(crate) fn stop(self) {
        self.stop.store(true, Ordering::Release);
        self.thread.thread().unpark();
        let _ = self.thread.join();
    }
}

fn send(target: &Target, state: &str) -> io::Result<()> {
    let s = UnixDatagram::unbound()?;
    match target {
        Target::Path(p) => s.send_to(state.as_bytes(), p).map(|_| ()),
        Target::Abstract(name) => {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
            s.send_to_addr(state.as_bytes(), &addr).map(|_| ())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_decides_what_is_sent() {
        let n = Notifier::from_vars(None, Some("2000000"), None, 7);
        assert!(
            n.socket.is_none() && n.watchdog.is_none(),
            "no socket: nothing"
        );
        let n = Notifier::from_vars(Some("/run/systemd/notify"), Some("2000000"), None, 7);
        assert!(n.socket.is_some());
        assert_eq!(n.watchdog, Some(Duration::from_secs(1)));
        let n = Notifier::from_vars(Some("@/org/x"), Some("2000000"), Some("8"), 7);
        assert!(
            n.socket.is_some() && n.watchdog.is_none(),
            "another process's watchdog"
        );
        let n = Notifier::from_vars(Some("relative"), Some("x"), None, 7);
        assert!(n.socket.is_none() && n.watchdog.is_none());
    }

    #[test]
    fn notifications_arrive_as_one_datagram_each() {
        let dir = std::env::temp_dir().join(format!("srpctl-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("notify.sock");
        let _ = std::fs::remove_file(&path);
        let manager = UnixDatagram::bind(&path).expect("bind");
        manager
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let n = Notifier::from_vars(path.to_str(), Some("200000"), None, std::process::id());
        n.ready("serving 2 IOCs");
        let mut buf = [0u8; 512];
        let len = manager.recv(&mut buf).expect("READY");
        assert_eq!(&buf[..len], b"READY=1\nSTATUS=serving 2 IOCs");
        let ok = Arc::new(AtomicBool::new(true));
        let o = ok.clone();
        let t = n
            .watchdog(move || {
                if o.load(Ordering::Relaxed) {
                    Ok(())
                } else {
                    Err("stuck".into())
                }
            })
            .expect("thread")
            .expect("a watchdog was asked for");
        let len = manager.recv(&mut buf).expect("WATCHDOG");
        assert_eq!(&buf[..len], b"WATCHDOG=1");
        // A loop that does not answer starves the watchdog.
        ok.store(false, Ordering::Relaxed);
        manager
            .set_read_timeout(Some(Duration::from_millis(400)))
            .expect("timeout");
        let mut late = 0;
        while manager.recv(&mut buf).is_ok() {
            // What was sent before the switch (at most one period's worth).
            late += 1;
            assert!(late <= 2, "the watchdog is still fed");
        }
        t.stop();
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The feeder sleeps a whole period between feeds; stopping it does not wait for the
    /// period to end (a 10 s period, stopped after its first feed).
    #[test]
    fn stopping_the_watchdog_wakes_its_thread() {
        let dir = std::env::temp_dir().join(format!("srpctl-notify-stop-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("notify.sock");
        let _ = std::fs::remove_file(&path);
        let manager = UnixDatagram::bind(&path).expect("bind");
        manager
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let n = Notifier::from_vars(path.to_str(), Some("20000000"), None, std::process::id());
        let w = n.watchdog(|| Ok(())).expect("thread").expect("asked for");
        let mut buf = [0u8; 64];
        let len = manager.recv(&mut buf).expect("the first feed");
        assert_eq!(&buf[..len], b"WATCHDOG=1");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            w.stop();
            let _ = tx.send(());
        });
        rx.recv_timeout(Duration::from_secs(5))
            .expect("stopped before its 10 s period ended");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
