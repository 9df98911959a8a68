//! Test support shared by the integration tests of several crates (a dev-dependency only):
//! capture loopback traffic with dumpcap and ask tshark about it, so third-party dissection
//! checks read the same everywhere; a real Ceph cluster on a loopback address ([`ceph`]).
#![deny(unsafe_code)]

pub mod ceph;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running dumpcap on `lo`, stopped (and killed if need be) on drop.
pub struct Capture {
    child: Child,
    file: PathBuf,
}

impl Capture {
    /// Starts capturing on `lo` with a BPF `filter` into `file` (classic pcap); returns once
    /// the capture is running.
    pub fn start(file: &Path, filter: &str) -> Capture {
        let child = Command::new("dumpcap")
            .args(["-q", "-P", "-i", "lo", "-f", filter, "-w"])
            .arg(file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start dumpcap (install tshark: scripts/test.sh does)");
        let cap = Capture {
            child,
            file: file.to_owned(),
        };
        // The file appears with its header once capturing has begun.
        let end = Instant::now() + Duration::from_secs(10);
        while std::fs::metadata(file).map(|m| m.len()).unwrap_or(0) < 24 {
            assert!(Instant::now() < end, "dumpcap did not start capturing");
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(200));
        cap
    }

    /// Stops the capture (SIGINT, so dumpcap closes the file properly); returns the file.
    pub fn stop(mut self) -> PathBuf {
        std::thread::sleep(Duration::from_millis(300));
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let end = Instant::now() + Duration::from_secs(10);
        while self.child.try_wait().ok().flatten().is_none() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.file.clone()
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs tshark on `file` with `args` and returns its standard output.
pub fn tshark(file: &Path, args: &[&str]) -> String {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(file)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run tshark: {e}"));
    assert!(
        out.status.success(),
        "tshark {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The values of one field per frame (`-T fields -e field`), empty lines dropped.
pub fn tshark_field(file: &Path, field: &str) -> Vec<String> {
    tshark(file, &["-T", "fields", "-e", field])
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

/// The protocols tshark guesses InfiniBand payloads to be (heuristically). None is SRP
/// (Wireshark has no SCSI RDMA Protocol dissector), and they misread SRP IUs: an SRP_RSP
/// with a request limit delta of 1 looks like an RPC-over-RDMA header of version 1 and is
/// then "malformed". The wire checks are of the InfiniBand layers (BTH, extension headers,
/// MADs, CM), so these are turned off ([`tshark_problem_args`]).
pub const PAYLOAD_GUESSES: [&str; 9] = [
    "rpcordma",
    "smb_direct",
    "smc",
    "nvme-rdma",
    "lnet",
    "iser",
    "infiniband.eoib",
    "infiniband_sdp",
    "fcoib",
];

/// The tshark arguments (after `-r FILE`) that list the frames it flags as malformed or
/// with error-level expert info, the payload guesses off.
pub fn tshark_problem_args() -> Vec<&'static str> {
    let mut args = Vec::new();
    for p in PAYLOAD_GUESSES {
        args.extend(["--disable-protocol", p]);
    }
    args.extend(["-Y", "_ws.malformed || _ws.expert.severity >= error"]);
    args
}

/// Frames tshark flags as malformed or with error-level expert info (empty when clean).
pub fn tshark_problems(file: &Path) -> String {
    tshark(file, &tshark_problem_args())
}

/// Whether the wire checks should be skipped (`HCA_SKIP_WIRE_CHECK` set).
pub fn skip_wire_check() -> bool {
    std::env::var_os("HCA_SKIP_WIRE_CHECK").is_some()
}

/// A fresh scratch directory for one test, named after it and the process.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}
