//! Issue #7's target-kill drill: the whole target process SIGKILLed under the drill's
//! verifying writes and started again within `no_path_retry`
//! (`srpctl drill failover --fault kill --kill-cmd … --restart-cmd …`). Every acknowledged
//! write must be present afterwards: the drill's reads after the restart find no mismatch
//! and no I/O error, and a scan of the whole region through the block file finds only
//! intact blocks of this run, each at its own LBA. On loopback 127.0.151.x: the target
//! exports one file-backed LUN through two IOCs (127.0.151.1 and .4), the host logs in from
//! .2 and .5 (one multipath disk, two paths). The restarted target writes its pid to a
//! file, which a drop guard reads to kill it; the daemons and the FUSE mount go on drop,
//! even on failure. Needs root and /dev/fuse.

#[path = "../../srp-target/tests/common/mod.rs"]
mod common;
mod process;

use common::TempDir;
use process::{HostProcess, SRPCTL, TargetProcess, output_within};
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The host's `[multipath] no_path_retry`, seconds.
const NO_PATH_RETRY_S: u64 = 20;
/// Seconds between the kill and the restart.
const DOWN_S: u64 = 3;
/// The part of the disk the drill uses, MiB (small, so that its reads after the restart
/// revisit most blocks written before the kill).
const REGION_MB: u64 = 8;
const IO_SIZE: usize = 4096;

fn write_configs(dir: &Path) -> (PathBuf, PathBuf, PathBuf, PathBuf) {
    let target = dir.join("target.toml");
    std::fs::write(
        &target,
        format!(
            "[target]\nname = \"drill-kill\"\nnode_guid = \"0x0002c90300e8e000\"\n\
             rdma_cm_port = 5611\ncontrol_socket = \"{}\"\n\n\
             [[port]]\nname = \"p0\"\naddress = \"127.0.151.1\"\n\n\
             [[port]]\nname = \"p1\"\naddress = \"127.0.151.4\"\n\n\
             [[lun]]\nname = \"vol\"\nfile = \"{}\"\nsize = \"64MiB\"\n\n\
             [[ioc]]\nname = \"ioc-a\"\nguid = \"0x0002c90300e8e001\"\nports = [\"p0\"]\n\
             exports = {{ 0 = \"vol\" }}\nallow = [\"any\"]\n\n\
             [[ioc]]\nname = \"ioc-b\"\nguid = \"0x0002c90300e8e002\"\nports = [\"p1\"]\n\
             exports = {{ 0 = \"vol\" }}\nallow = [\"any\"]\n",
            dir.join("target.sock").display(),
            dir.join("vol.img").display()
        ),
    )
    .expect("write target config");
    let host = dir.join("host.toml");
    let disks = dir.join("disks");
    let socket = dir.join("host.sock");
    std::fs::write(
        &host,
        format!(
            "[host]\nname = \"drill-kill\"\nnode_guid = \"0x0002c90300e8e100\"\n\
             disks_dir = \"{}\"\ncontrol_socket = \"{}\"\nsweep_interval = \"1s\"\n\n\
             [timers]\nreconnect_delay = \"1s\"\nfast_io_fail = \"15s\"\ndev_loss = \"600s\"\n\n\
             [multipath]\npolicy = \"round-robin\"\nno_path_retry = \"{NO_PATH_RETRY_S}s\"\n\n\
             [[portal]]\naddress = \"127.0.151.1\"\nlocal = [\"127.0.151.2\"]\n\n\
             [[portal]]\naddress = \"127.0.151.4\"\nlocal = [\"127.0.151.5\"]\n",
            disks.display(),
            socket.display()
        ),
    )
    .expect("write host config");
    (target, host, disks, socket)
}

/// Waits (up to 40 s) for one disk with two active paths; returns it.
fn wait_two_active_paths(socket: &Path) -> Value {
    let end = Instant::now() + Duration::from_secs(40);
    loop {
        let mut cmd = Command::new(SRPCTL);
        cmd.args(["disks", "--json", "--socket"]).arg(socket);
        let out = output_within(cmd, 15);
        let list: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        if let Some([disk]) = list.as_array().map(Vec::as_slice) {
            let active = disk["paths"]
                .as_array()
                .map_or(0, |p| p.iter().filter(|p| p["state"] == "active").count());
            if active == 2 {
                return disk.clone();
            }
        }
        assert!(
            Instant::now() < end,
            "no disk with two active paths within 40 s: {list:#}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Reads the first `len` bytes of `file` on a thread, failing after `secs`.
fn read_bounded(file: &str, len: usize, secs: u64) -> Vec<u8> {
    let (tx, rx) = std::sync::mpsc::channel();
    let path = file.to_owned();
    std::thread::spawn(move || {
        let mut buf = vec![0; len];
        let r = std::fs::File::open(&path).and_then(|mut f| f.read_exact(&mut buf));
        let _ = tx.send(r.map(|()| buf));
    });
    rx.recv_timeout(Duration::from_secs(secs))
        .unwrap_or_else(|_| panic!("reading {file} took over {secs} s"))
        .unwrap_or_else(|e| panic!("reading {file}: {e}"))
}

/// Checks every `IO_SIZE` block of `region`: all zero (never written), or a drill block
/// of run `run` with its own LBA and a good CRC (the drill's block format:
/// srpctl/src/drill/block.rs). Returns how many were written.
fn scan(region: &[u8], run: u64, block_size: u64) -> usize {
    let u64_at =
        |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
    let mut written = 0;
    for (i, b) in region.chunks(IO_SIZE).enumerate() {
        if b.iter().all(|&x| x == 0) {
            continue;
        }
        let lba = i as u64 * IO_SIZE as u64 / block_size;
        assert_eq!(&b[..8], b"SRPDRILL", "LBA {lba}: not a drill block");
        assert_eq!(u64_at(b, 8), run, "LBA {lba}: a block of another run");
        assert_eq!(u64_at(b, 16), lba, "LBA {lba}: holds another LBA's block");
        let mut h = crc32fast::Hasher::new();
        h.update(&b[..32]);
        h.update(&[0; 4]);
        h.update(&b[36..]);
        let want = u32::from_le_bytes(b[32..36].try_into().expect("4 bytes"));
        assert_eq!(
            h.finalize(),
            want,
            "LBA {lba}: bad CRC (a torn or corrupt block)"
        );
        written += 1;
    }
    written
}

#[test]
fn acknowledged_writes_survive_killing_and_restarting_the_target() {
    let dir = TempDir::new("drill-kill");
    let (target_cfg, host_cfg, disks_dir, socket) = write_configs(dir.path());
    let pid_file = dir.path().join("target.pid");
    let log = dir.path().join("target-restarted.log");
    // Declared before the processes: dropped after them (the restarted target last).
    let _restarted = process::PidFileGuard {
        pid_file: pid_file.clone(),
        config: target_cfg.clone(),
    };
    let _target = TargetProcess::start_command(Command::new(SRPCTL), &target_cfg);
    std::fs::write(&pid_file, _target.pid().to_string()).expect("write pid file");
    let host = HostProcess::start_command(Command::new(SRPCTL), &host_cfg, &disks_dir);
    let disk = wait_two_active_paths(&socket);
    let file = disk["path"].as_str().expect("block file").to_owned();
    let block_size = disk["block_size"].as_u64().expect("block size");

    let kill = format!("kill -9 \"$(cat '{}')\"", pid_file.display());
    // In the background, its output to a file (the drill's pipes must not be held), its
    // pid where the guard finds it.
    let restart = format!(
        "'{SRPCTL}' target run -c '{}' >>'{}' 2>&1 </dev/null & echo $! >'{}'",
        target_cfg.display(),
        log.display(),
        pid_file.display()
    );
    let report = dir.path().join("kill.json");
    let picture = dir.path().join("kill.svg");
    let mut cmd = Command::new(SRPCTL);
    cmd.args(["drill", "failover", "--socket"])
        .arg(&socket)
        .args([
            "--fault",
            "kill",
            "--kill-cmd",
            &kill,
            "--restart-cmd",
            &restart,
        ])
        .args([
            "--warmup",
            "2",
            "--fault-secs",
            &DOWN_S.to_string(),
            "--after",
            "5",
        ])
        .args(["--region-mb", &REGION_MB.to_string()])
        .args(["--io-size", &IO_SIZE.to_string()])
        .arg("--report")
        .arg(&report)
        .arg("--picture")
        .arg(&picture);
    let started = Instant::now();
    let out = output_within(cmd, 90);
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    eprintln!(
        "== drill kill ({:.1} s):\n{text}",
        started.elapsed().as_secs_f64()
    );
    assert!(
        out.status.success(),
        "the drill failed:\n{text}\nrestarted target's log:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let r: Value =
        serde_json::from_slice(&std::fs::read(&report).expect("the report")).expect("JSON");
    assert_eq!(r["passed"], true, "{r:#}");
    assert_eq!(r["fault"]["kind"], "kill");
    assert_eq!(r["io"]["errors"], 0, "{:#}", r["errors"]);
    assert_eq!(r["io"]["mismatches"], 0, "{:#}", r["mismatches"]);
    assert_eq!(
        r["fault"]["errors"].as_array().map(Vec::len),
        Some(0),
        "{r:#}"
    );
    // The kill was real: a new target process, and I/O stopped for about the outage.
    let new_pid: u32 = std::fs::read_to_string(&pid_file)
        .expect("pid file")
        .trim()
        .parse()
        .expect("pid");
    assert_ne!(
        new_pid,
        _target.pid(),
        "the restart command started a new target"
    );
    let stall = r["max_stall"]["ms"].as_f64().expect("max_stall.ms");
    assert!(
        stall >= DOWN_S as f64 * 1000.0 * 0.8 && stall < NO_PATH_RETRY_S as f64 * 1000.0,
        "max stall {stall} ms for a {DOWN_S} s outage (no_path_retry {NO_PATH_RETRY_S} s)"
    );
    // The writes after the restart landed and were read back verified.
    let writes = r["io"]["writes"].as_u64().unwrap_or(0);
    assert!(writes > 100, "hardly any writes: {writes}");
    let restore_ms = r["restore_ms"].as_f64().expect("restore_ms");
    let after: u64 = r["iops"]
        .as_array()
        .expect("iops")
        .iter()
        .skip((restore_ms / 1000.0).ceil() as usize + 2)
        .filter_map(Value::as_u64)
        .sum();
    assert!(
        after > 0,
        "no I/O completed after the restart: {:#}",
        r["iops"]
    );

    // Every block of the region, read after the drill: intact, this run's, at its LBA.
    let run = u64::from_str_radix(
        r["settings"]["run_id"]
            .as_str()
            .expect("run_id")
            .trim_start_matches("0x"),
        16,
    )
    .expect("hex run id");
    let region = read_bounded(&file, (REGION_MB << 20) as usize, 30);
    let written = scan(&region, run, block_size);
    assert!(written > 100, "only {written} blocks written");
    eprintln!(
        "drill kill: max stall {stall} ms for a {DOWN_S} s outage; {written} blocks of the \
         region intact after the restart"
    );
    host.stop();
}
