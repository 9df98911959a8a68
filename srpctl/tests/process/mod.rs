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
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
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
                if tx.send(line).is_err() {
                    break;
                }
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
