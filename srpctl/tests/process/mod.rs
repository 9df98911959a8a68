//! The real `srpctl target run` as a child process, for the CLI-level tests: started from
//! a config file, waited for until it serves, killed (SIGKILL) and reaped on drop.
#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The `srpctl target run` process; killed (SIGKILL) and reaped on drop.
pub struct TargetProcess(Child);

impl TargetProcess {
    /// Starts the target and waits until it has printed its IOC line (it is serving).
    pub fn start(config: &Path) -> TargetProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_srpctl"))
            .args(["target", "run", "-c"])
            .arg(config)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn srpctl target run");
        let stdout = child.stdout.take().expect("piped stdout");
        let proc = TargetProcess(child);
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            // Reads to the end even once nobody listens: a closed pipe would make the
            // daemon's next line fail.
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        loop {
            let line = rx
                .recv_timeout(Duration::from_secs(20))
                .expect("the target printed its IOC line within 20 s");
            if line.starts_with("ioc ") {
                return proc;
            }
        }
    }

    /// `kill -9` and reap.
    pub fn kill9(mut self) {
        self.0.kill().expect("SIGKILL");
        self.0.wait().expect("reap");
    }
}

impl Drop for TargetProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The `srpctl host run` process. Dropping it sends SIGTERM (the daemon unmounts its disks
/// directory), waits up to 20 s, then SIGKILLs and lazily unmounts what it left.
pub struct HostProcess {
    child: Child,
    disks_dir: std::path::PathBuf,
}

impl HostProcess {
    /// Starts the host daemon and waits until it printed its control socket line (the
    /// first sweep, logins and LUN scans are done by then).
    pub fn start(config: &Path, disks_dir: &Path) -> HostProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_srpctl"))
            .args(["host", "run", "-c"])
            .arg(config)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn srpctl host run");
        let stdout = child.stdout.take().expect("piped stdout");
        let proc = HostProcess {
            child,
            disks_dir: disks_dir.to_owned(),
        };
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                eprintln!("host: {line}");
                let _ = tx.send(line);
            }
        });
        loop {
            let line = rx
                .recv_timeout(Duration::from_secs(40))
                .expect("the host printed its control socket line within 40 s");
            if line.starts_with("control socket ") {
                return proc;
            }
        }
    }

    /// SIGTERM, and wait for a clean exit.
    pub fn stop(mut self) {
        self.terminate();
    }

    fn terminate(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let end = std::time::Instant::now() + Duration::from_secs(20);
        while std::time::Instant::now() < end {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = Command::new("umount")
            .arg("-l")
            .arg(&self.disks_dir)
            .status();
    }
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.terminate();
        }
    }
}

/// This build's `srpctl`.
pub const SRPCTL: &str = env!("CARGO_BIN_EXE_srpctl");

/// Forwards a child's stdout to stderr, `prefix`ed, for as long as the child writes (so
/// its pipe never fills), and to the returned channel while someone listens.
fn forward_lines(
    stdout: std::process::ChildStdout,
    prefix: &'static str,
) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            eprintln!("{prefix}: {line}");
            let _ = tx.send(line);
        }
    });
    rx
}

/// Waits up to `secs` for a line starting with `start` from `rx`.
fn wait_for_line(rx: &mpsc::Receiver<String>, start: &str, secs: u64, what: &str) {
    let end = std::time::Instant::now() + Duration::from_secs(secs);
    loop {
        let left = end.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.starts_with(start) => return,
            Ok(_) => {}
            Err(e) => panic!("{what} printed no line starting {start:?} within {secs} s ({e})"),
        }
    }
}

impl TargetProcess {
    /// Starts the target with `cmd`, a command that runs `srpctl` (e.g. `nsenter
    /// --net=… -- srpctl`, from `netns::Netns::exec(SRPCTL)`, which execs in place so the
    /// child is the daemon), adding `target run -c <config>`; waits for its IOC line.
    pub fn start_command(mut cmd: Command, config: &Path) -> TargetProcess {
        let mut child = cmd
            .args(["target", "run", "-c"])
            .arg(config)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn srpctl target run");
        let stdout = child.stdout.take().expect("piped stdout");
        let proc = TargetProcess(child);
        let rx = forward_lines(stdout, "target");
        wait_for_line(&rx, "ioc ", 20, "the target");
        proc
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl HostProcess {
    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Starts the host daemon with `cmd`, a command that runs `srpctl` (see
    /// [`TargetProcess::start_command`]), adding `host run -c <config>`; waits for its
    /// control socket line. `disks_dir` is lazily unmounted if it has to be killed.
    pub fn start_command(mut cmd: Command, config: &Path, disks_dir: &Path) -> HostProcess {
        let mut child = cmd
            .args(["host", "run", "-c"])
            .arg(config)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn srpctl host run");
        let stdout = child.stdout.take().expect("piped stdout");
        let proc = HostProcess {
            child,
            disks_dir: disks_dir.to_owned(),
        };
        let rx = forward_lines(stdout, "host");
        wait_for_line(&rx, "control socket ", 40, "the host");
        proc
    }
}

/// Runs `cmd` to completion within `secs` (its output captured); on overrun it is
/// SIGKILLed and reaped, and the test fails with what it printed.
pub fn output_within(mut cmd: Command, secs: u64) -> std::process::Output {
    use std::io::Read;
    let shown = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {shown}: {e}"));
    // Readers hand their bytes over a channel: a pipe a grandchild still holds (a daemon
    // it started) must not hold up the test.
    let reader = |mut r: Box<dyn Read + Send>| {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            let _ = tx.send(buf);
        });
        rx
    };
    let out = reader(Box::new(child.stdout.take().expect("piped stdout")));
    let err = reader(Box::new(child.stderr.take().expect("piped stderr")));
    let end = std::time::Instant::now() + Duration::from_secs(secs);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if std::time::Instant::now() >= end {
            let _ = child.kill();
            let _ = child.wait();
            // The pipes may be held by its own children: do not wait for them.
            panic!("{shown} did not finish within {secs} s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let collect = |rx: mpsc::Receiver<Vec<u8>>| {
        rx.recv_timeout(Duration::from_secs(5))
            .unwrap_or_else(|_| b"(output still held open by another process)".to_vec())
    };
    std::process::Output {
        status,
        stdout: collect(out),
        stderr: collect(err),
    }
}

/// Kills, on drop, the process whose pid is in `pid_file` — a daemon a drill's restart
/// command started, not this test's child — if it is still the one started from `config`
/// (its command line names it); then waits (bounded) for it to be gone or a zombie rather
/// than reap it.
pub struct PidFileGuard {
    /// Where the restart command wrote the pid.
    pub pid_file: std::path::PathBuf,
    /// The configuration file the process must have been started with.
    pub config: std::path::PathBuf,
}

impl Drop for PidFileGuard {
    fn drop(&mut self) {
        let Some(pid) = std::fs::read_to_string(&self.pid_file)
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
        else {
            return;
        };
        let ours = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|c| String::from_utf8_lossy(&c).contains(&*self.config.to_string_lossy()))
            .unwrap_or(false);
        if ours {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            for _ in 0..100 {
                let state =
                    std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                if state.is_empty() || state.contains(") Z ") {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}
