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
