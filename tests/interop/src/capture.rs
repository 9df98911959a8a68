//! Packet capture on an interface of a namespace.

use crate::{Error, NetNs, Result};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// dumpcap capturing one interface of a namespace into a pcapng file; stopped with SIGINT
/// (so the file is complete) by [`Capture::stop`] or on drop.
#[derive(Debug)]
pub struct Capture {
    child: Option<Child>,
    file: PathBuf,
}

impl Capture {
    /// Starts dumpcap on `iface` (e.g. a guest's tap, [`crate::Nic::tap`]) inside `ns`,
    /// writing `file`, with an optional BPF `filter` (e.g. `udp port 4791`); returns once
    /// packets are being captured.
    pub fn start(ns: &NetNs, iface: &str, file: &Path, filter: Option<&str>) -> Result<Capture> {
        let _ = std::fs::remove_file(file);
        let mut cmd = ns.command("dumpcap");
        cmd.args(["-q", "-i", iface]);
        if let Some(f) = filter {
            cmd.args(["-f", f]);
        }
        let child = cmd
            .arg("-w")
            .arg(file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(Error::io("start dumpcap (Debian package tshark)"))?;
        let mut cap = Capture {
            child: Some(child),
            file: file.to_owned(),
        };
        // The file gets its header once capturing has begun.
        let end = Instant::now() + Duration::from_secs(15);
        while std::fs::metadata(file).map(|m| m.len()).unwrap_or(0) < 24 {
            let exited = cap
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
                .is_some();
            if exited || Instant::now() > end {
                let detail = cap
                    .child
                    .take()
                    .and_then(|mut c| {
                        let _ = c.kill();
                        c.wait_with_output().ok()
                    })
                    .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
                    .unwrap_or_default();
                return Err(Error::Host {
                    cmd: format!("dumpcap -i {iface} in {}", ns.name()),
                    detail: format!("did not start capturing: {detail}"),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(200));
        Ok(cap)
    }

    /// The capture file.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Stops the capture and returns the (complete) file.
    pub fn stop(mut self) -> PathBuf {
        self.finish();
        self.file.clone()
    }

    fn finish(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // Let the last packets reach the file, then ask dumpcap to close it.
        std::thread::sleep(Duration::from_millis(300));
        if let Ok(pid) = i32::try_from(child.id()) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGINT);
        }
        let end = Instant::now() + Duration::from_secs(10);
        while child.try_wait().ok().flatten().is_none() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The values of `field` in every frame of a capture (`tshark -T fields`), empty ones left
/// out.
pub fn tshark_fields(file: &Path, field: &str) -> Result<Vec<String>> {
    let file = file.display().to_string();
    let out = crate::host("tshark", &["-r", &file, "-T", "fields", "-e", field])?;
    Ok(out
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect())
}

/// Frames tshark flags as malformed or with error-level expert info, one line each (empty
/// when the capture dissects cleanly), with its guesses at InfiniBand payloads off
/// (`testkit::PAYLOAD_GUESSES`: none is SRP, and they misread SRP IUs).
pub fn tshark_problems(file: &Path) -> Result<String> {
    let file = file.display().to_string();
    let mut args = vec!["-r", file.as_str()];
    args.extend(testkit::tshark_problem_args());
    crate::host("tshark", &args)
}

/// Checks a capture of RoCEv2 traffic: more than `min_frames` frames, every one dissected as
/// InfiniBand, none malformed. Returns the number of frames.
pub fn dissects_cleanly(file: &Path, min_frames: usize) -> Result<usize> {
    let frames = tshark_fields(file, "frame.number")?.len();
    let bth = tshark_fields(file, "infiniband.bth.opcode")?.len();
    if frames <= min_frames || bth != frames {
        return Err(Error::Guest(format!(
            "{} frames, {bth} of them dissected as InfiniBand (wanted more than {min_frames}, all)",
            frames
        )));
    }
    let bad = tshark_problems(file)?;
    if !bad.is_empty() {
        return Err(Error::Guest(format!("malformed frames:\n{bad}")));
    }
    Ok(frames)
}
