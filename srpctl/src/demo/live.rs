//! `srpctl demo`: the whole stack on embedded defaults, on loopback, in one process.
//!
//! A target daemon serves a 64 MiB file-backed LUN through two IOCs (ports 127.0.200.1 and
//! 127.0.200.4); a host daemon sweeps both portals over Device Management and logs in to
//! each from its own local address: two paths to one logical unit, one multipath disk.
//! Data is written through the disk — its FUSE block file when this machine can mount one
//! (root, /dev/fuse), else the disk's block device in process — flushed and read back
//! (round robin over both paths), then read again through each path alone (the other
//! administratively failed); the target's backing file and counters confirm what crossed
//! the wire. Exits non-zero on any mismatch or error. Everything lives in a temporary
//! directory removed at the end.

use anyhow::{Context, Result, ensure};
use ib_verbs::Guid;
use mpio::MultipathDisk;
use scsi::Lba;
use srp_hostd::BlockDevice;
use srp_hostd::HostDaemon;
use srp_hostd::config::{HostConfig, PortalConfig};
use srp_hostd::control::{DiskInfo, HostRequest};
use srp_target::config::TargetConfig;
use srp_target::control::{ControlAnswer, ControlRequest};
use srp_target::daemon::{Daemon, DaemonOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PORTAL_A: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 200, 1));
const PORTAL_B: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 200, 4));
const HOST_A: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 200, 2));
const HOST_B: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 200, 5));
/// Bytes written and verified.
const DATA: usize = 8 << 20;

/// A temporary directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Result<Scratch> {
        let p = std::env::temp_dir().join(format!("srpctl-demo-{}", std::process::id()));
        std::fs::create_dir_all(&p).with_context(|| format!("creating {}", p.display()))?;
        Ok(Scratch(p))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn target_config(dir: &Path) -> String {
    format!(
        r#"[target]
name = "demo-target"
node_guid = "0x0002c90300de0000"
rdma_cm_port = 5599
control_socket = "{sock}"
state_dir = "{state}"

[[port]]
name = "p0"
address = "{PORTAL_A}"

[[port]]
name = "p1"
address = "{PORTAL_B}"

[[lun]]
name = "demo-vol"
file = "{file}"
size = "64MiB"

[[ioc]]
name = "ioc-a"
guid = "0x0002c90300de0001"
ports = ["p0"]
exports = {{ 0 = "demo-vol" }}
allow = ["any"]

[[ioc]]
name = "ioc-b"
guid = "0x0002c90300de0002"
ports = ["p1"]
exports = {{ 0 = "demo-vol" }}
allow = ["any"]
"#,
        sock = dir.join("target.sock").display(),
        state = dir.join("state").display(),
        file = dir.join("demo-vol.img").display()
    )
}

fn host_config(dir: &Path) -> HostConfig {
    let portal = |address, local| PortalConfig {
        local: vec![local],
        ..PortalConfig::new(address)
    };
    let mut c = HostConfig::with_portals(
        "demo-host",
        vec![portal(PORTAL_A, HOST_A), portal(PORTAL_B, HOST_B)],
    );
    c.node_guid = Guid(0x0002_c903_00de_0100);
    c.disks_dir = dir.join("disks");
    c.control_socket = dir.join("host.sock");
    c
}

/// A deterministic pattern: every 512-byte block names its LBA and the seed.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut v = vec![0u8; len];
    for (i, block) in v.chunks_mut(512).enumerate() {
        let mut x = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ seed;
        for b in block.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        block[..8].copy_from_slice(&(i as u64).to_be_bytes());
    }
    v
}

/// Where the demo's I/O went.
enum Through {
    File(PathBuf),
    Device(Arc<MultipathDisk>),
}

impl Through {
    fn write_and_flush(&self, offset: u64, data: &[u8]) -> Result<()> {
        match self {
            Through::File(p) => {
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(libc_o_direct())
                    .open(p)
                    .with_context(|| format!("opening {}", p.display()))?;
                f.seek(SeekFrom::Start(offset))?;
                f.write_all(data).context("writing the block file")?;
                f.sync_all().context("fsync (SYNCHRONIZE CACHE)")?;
            }
            Through::Device(d) => {
                d.write(Lba(offset / 512), data, false)
                    .map_err(|e| anyhow::anyhow!("write: {e}"))?;
                d.flush().map_err(|e| anyhow::anyhow!("flush: {e}"))?;
            }
        }
        Ok(())
    }

    fn read(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        match self {
            Through::File(p) => {
                let mut f =
                    std::fs::File::open(p).with_context(|| format!("opening {}", p.display()))?;
                f.seek(SeekFrom::Start(offset))?;
                f.read_exact(&mut buf).context("reading the block file")?;
            }
            Through::Device(d) => d
                .read(Lba(offset / 512), &mut buf)
                .map_err(|e| anyhow::anyhow!("read: {e}"))?,
        }
        Ok(buf)
    }
}

/// O_DIRECT: the block file is direct_io anyway; this keeps the page cache out of it.
fn libc_o_direct() -> i32 {
    0o40000
}

fn can_mount_fuse() -> bool {
    nix::unistd::Uid::effective().is_root()
        && std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/fuse")
            .is_ok()
}

fn show_disk(d: &DiskInfo) {
    println!(
        "    disk {}: {} {}, {} blocks of {} bytes, policy {}{}",
        d.name,
        d.vendor,
        d.product,
        d.blocks,
        d.block_size,
        d.policy,
        if d.path.is_empty() {
            String::new()
        } else {
            format!(", block file {}", d.path)
        }
    );
    for p in &d.paths {
        println!(
            "      path: session {} via {} ({} -> {}), {}, {} reads, {} writes",
            p.session, p.ioc_name, p.local, p.portal, p.state, p.reads, p.writes
        );
    }
}

/// Takes path `session` out of service (or returns it) and waits until the disk's view
/// agrees.
fn set_path(host: &HostDaemon, session: u32, enabled: bool) -> Result<()> {
    host.control()
        .call(HostRequest::SetPath { session, enabled })
        .map_err(|e| anyhow::anyhow!("path {session}: {e}"))?;
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let state = host.disks().first().and_then(|d| {
            d.paths
                .iter()
                .find(|p| p.session == session)
                .map(|p| p.state.clone())
        });
        let want = if enabled { "active" } else { "admin-down" };
        if state.as_deref() == Some(want) {
            return Ok(());
        }
        ensure!(
            Instant::now() < end,
            "path {session} did not become {want}: {state:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs the demo.
pub(crate) fn run() -> Result<()> {
    let started = Instant::now();
    let scratch = Scratch::new()?;
    let dir = scratch.0.clone();
    println!("srpctl demo: an SRP target and host on loopback, I/O verified end to end");

    let text = target_config(&dir);
    let config = TargetConfig::from_str(&text, "demo-target.toml")
        .map_err(|e| anyhow::anyhow!("embedded target config: {e}"))?
        .config;
    let target = Daemon::start(config, DaemonOptions::new(providers::system()))
        .context("starting the target")?;
    println!(
        "target: 64 MiB file-backed LUN {} exported by ioc-a on {PORTAL_A} and ioc-b on {PORTAL_B}",
        dir.join("demo-vol.img").display()
    );

    let hc = host_config(&dir);
    let fuse = can_mount_fuse();
    let host = if fuse {
        HostDaemon::start(hc, providers::system()).context("starting the host daemon")?
    } else {
        println!(
            "host: not root or no /dev/fuse: disks are used in process instead of as block files"
        );
        HostDaemon::start_in_process(hc, providers::system())
    };
    let sessions = host.sessions();
    println!(
        "host: swept both portals over Device Management; {} session(s):",
        sessions.len()
    );
    for s in &sessions {
        println!(
            "    session {}: {} -> {} IOC {} \"{}\", {}, {} login(s)",
            s.id, s.local, s.portal, s.ioc_guid, s.ioc_name, s.state, s.logins
        );
    }
    let disks = host.disks();
    ensure!(sessions.len() == 2, "expected a session through each IOC");
    ensure!(
        disks.len() == 1 && disks[0].paths.len() == 2,
        "expected one multipath disk with a path through each IOC: {disks:?}"
    );
    let disk = &disks[0];
    let through = if fuse {
        Through::File(PathBuf::from(&disk.path))
    } else {
        Through::Device(host.disk(&disk.name).context("the disk vanished")?)
    };
    let (p1, p2) = (disk.paths[0].session, disk.paths[1].session);

    let data = pattern(DATA, 0x5eed);
    let offset = 1 << 20;
    let t = Instant::now();
    through.write_and_flush(offset, &data)?;
    let wrote = t.elapsed();
    let t = Instant::now();
    let back = through.read(offset, DATA)?;
    let read = t.elapsed();
    let first = |v: &[u8]| v.iter().zip(&data).position(|(x, y)| x != y);
    ensure!(back == data, "data mismatch at byte {:?}", first(&back));
    let mib = |d: Duration| (DATA as f64 / (1 << 20) as f64) / d.as_secs_f64().max(1e-9);
    println!(
        "I/O: wrote {} MiB through the disk at offset {offset} and flushed ({:.0} MiB/s), read it \
         back ({:.0} MiB/s), round robin over both paths: every byte matches",
        DATA >> 20,
        mib(wrote),
        mib(read)
    );
    // Each path alone: the other one administratively failed, then the other way round.
    set_path(&host, p1, false)?;
    let via_p2 = through.read(offset, DATA)?;
    set_path(&host, p1, true)?;
    set_path(&host, p2, false)?;
    let via_p1 = through.read(offset, DATA)?;
    set_path(&host, p2, true)?;
    ensure!(
        via_p2 == data,
        "mismatch through path {p2} alone at byte {:?}",
        first(&via_p2)
    );
    ensure!(
        via_p1 == data,
        "mismatch through path {p1} alone at byte {:?}",
        first(&via_p1)
    );
    println!(
        "multipath: read it again with path {p1} failed (all through path {p2}), then with path \
         {p2} failed (all through path {p1}): every byte matches, no error reached the reader"
    );
    for d in host.disks() {
        show_disk(&d);
    }
    // The medium itself: the target's backing file holds what the host wrote.
    let mut img = std::fs::File::open(dir.join("demo-vol.img"))?;
    img.seek(SeekFrom::Start(offset))?;
    let mut on_disk = vec![0u8; DATA];
    img.read_exact(&mut on_disk)?;
    ensure!(
        on_disk == data,
        "the target's backing file does not hold the data"
    );
    println!("target: its backing file holds the same bytes");
    if let Ok(ControlAnswer::Sessions(v)) = target.control().call(ControlRequest::ListSessions) {
        for s in v {
            println!(
                "    target session on {} ({}): initiator {}, window {}, {} commands, {} bytes from the host, {} bytes to it",
                s.ioc,
                s.port,
                s.initiator,
                s.window,
                s.counters.commands,
                s.counters.data_out_bytes,
                s.counters.data_in_bytes
            );
        }
    }
    drop(through);
    host.shutdown();
    drop(target.shutdown());
    println!(
        "done in {:.1} s: host logged out, target stopped, nothing left behind",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
