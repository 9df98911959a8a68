//! `srpctl bench atomic`: what WRITE ATOMIC's intent log costs (issue #29, Deliver 3),
//! next to the plain write it replaces, in one run.
//!
//! In one process: the target daemon serving a file LUN in `--dir` (a real filesystem by
//! default, /var/tmp: on tmpfs a sync costs nothing and the figure would mean nothing),
//! with its intent log in the target's state directory beside it, and the SRP initiator
//! (the StorPort miniport's port, as `bench disk` drives it). For each size, at queue depth
//! one, four interleaved ways for `--seconds` each, rounds repeated:
//! - `write`: WRITE(16), the write cache on (no sync);
//! - `atomic`: WRITE ATOMIC(16), the write cache on (the log's append and sync);
//! - `write fua`: WRITE(16) with FUA (the LU's sync);
//! - `atomic fua`: WRITE ATOMIC(16) with FUA (the log's sync, the LU's, the log emptied).
//!
//! Medians of the rounds are reported as operations per second and mean latency, with each
//! atomic way's ratio to the plain write of the same durability.

use super::disk::{Session, execute_with, srb_ok};
use anyhow::{Context, Result, anyhow, ensure};
use srp_hostd::HostConfig;
use srp_hostd::config::DriverModel;
use srp_initiator_storport::port::{DataDirection, SystemMemory};
use srp_initiator_storport::srp::RegistrationMode;
use srp_target::config::TargetConfig;
use srp_target::daemon::{Daemon, DaemonOptions};
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Options of `srpctl bench atomic`.
#[derive(clap::Args, Clone, Debug)]
pub(crate) struct Options {
    /// Write sizes in KiB (whole 4 KiB, at most 256).
    #[arg(long, value_delimiter = ',', default_value = "4,16,64,256")]
    pub(crate) sizes_kib: Vec<u64>,
    /// Seconds per way, size and round.
    #[arg(long, default_value_t = 2.0)]
    pub(crate) seconds: f64,
    /// Rounds; medians reported.
    #[arg(long, default_value_t = 3)]
    pub(crate) rounds: usize,
    /// Where the LU's file and the target's state (the intent log) go: a directory on the
    /// filesystem to measure.
    #[arg(long, default_value = "/var/tmp")]
    pub(crate) dir: PathBuf,
    /// The target port's address.
    #[arg(long, default_value = "127.0.208.1")]
    pub(crate) target: IpAddr,
    /// The initiator's address.
    #[arg(long, default_value = "127.0.208.2")]
    pub(crate) host: IpAddr,
    /// The target's RDMA-CM TCP port.
    #[arg(long, default_value_t = 5603)]
    pub(crate) rdma_cm_port: u16,
}

const IOC_GUID: u64 = 0x0002_c903_00be_c401;
/// The LU's size.
const LU_MIB: u64 = 64;

/// The benchmark's files, removed on drop.
struct Files(PathBuf);

impl Drop for Files {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn target_config(o: &Options, dir: &std::path::Path) -> Result<TargetConfig> {
    let text = format!(
        "[target]\nname = \"srpctl-bench-atomic\"\nnode_guid = \"0x0002c90300bec400\"\n\
         rdma_cm_port = {}\nstate_dir = \"{}\"\n\n[[port]]\nname = \"p0\"\naddress = \"{}\"\n\n\
         [[lun]]\nname = \"bench\"\nfile = \"{}\"\nsize = \"{LU_MIB}MiB\"\n\
         physical_block_size = 4096\n\n\
         [[ioc]]\nname = \"ioc-bench\"\nguid = \"{IOC_GUID:#018x}\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"bench\" }}\nallow = [\"any\"]\n",
        o.rdma_cm_port,
        dir.join("state").display(),
        o.target,
        dir.join("lu.img").display()
    );
    Ok(TargetConfig::from_str(&text, "bench-atomic.toml")
        .map_err(|e| anyhow!("benchmark target configuration: {e}"))?
        .config)
}

/// The four ways: (name, opcode, FUA).
const WAYS: [(&str, u8, bool); 4] = [
    ("write", 0x8a, false),
    ("atomic", 0x9c, false),
    ("write fua", 0x8a, true),
    ("atomic fua", 0x9c, true),
];

fn cdb(opcode: u8, fua: bool, lba: u64, blocks: u32) -> [u8; 16] {
    let mut c = [0u8; 16];
    c[0] = opcode;
    c[1] = if fua { 0x08 } else { 0 };
    c[2..10].copy_from_slice(&lba.to_be_bytes());
    if opcode == 0x9c {
        // WRITE ATOMIC(16): TRANSFER LENGTH in bytes 12..14 (ATOMIC BOUNDARY 0).
        c[12..14].copy_from_slice(&(blocks as u16).to_be_bytes());
    } else {
        c[10..14].copy_from_slice(&blocks.to_be_bytes());
    }
    c
}

/// Operations per second of `way` at `bytes` for `secs`, one at a time.
fn measure(s: &Session, way: (&str, u8, bool), bytes: u64, secs: f64) -> Result<f64> {
    let bs = u64::from(s.block_size);
    let blocks = bytes / bs;
    let slots = (LU_MIB << 20) / bytes;
    let data = vec![0x5au8; bytes as usize];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let start = Instant::now();
    let mut ops = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let lba = (x % slots) * blocks;
        let r = execute_with(
            &s.port,
            &cdb(way.1, way.2, lba, blocks as u32),
            DataDirection::Out,
            data.clone(),
        )?;
        ensure!(
            srb_ok(&r),
            "{} of {bytes} bytes: SRB {:?}, SCSI status {:#04x}, sense {:02x?}",
            way.0,
            r.status,
            r.scsi_status,
            r.sense
        );
        ops += 1;
    }
    Ok(ops as f64 / start.elapsed().as_secs_f64())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs the benchmark and prints the report.
pub(crate) fn run(o: &Options) -> Result<()> {
    ensure!(o.rounds >= 1, "--rounds must be at least 1");
    ensure!(o.seconds > 0.0, "--seconds must be positive");
    for &k in &o.sizes_kib {
        ensure!(
            (4..=256).contains(&k) && k % 4 == 0,
            "--sizes-kib: 4 to 256, whole 4 KiB ({k})"
        );
    }
    let files = Files(
        o.dir
            .join(format!("srpctl-bench-atomic-{}", std::process::id())),
    );
    std::fs::create_dir_all(&files.0).with_context(|| format!("{}", files.0.display()))?;
    let config = target_config(o, &files.0)?;
    let options = DaemonOptions {
        shutdown_step: Duration::from_millis(500),
        ..DaemonOptions::new(providers::system())
    };
    let _daemon = Daemon::start(config.clone(), options).context("starting the target")?;
    let host = HostConfig::with_portals("srpctl-bench-atomic", Vec::new());
    let memory = SystemMemory::new(srp_hostd::session::memory_pages(&host));
    let s = Session::open(
        o.target,
        1,
        &config,
        o.host,
        RegistrationMode::PerIo,
        DriverModel::StorPort,
        0x0002_c903_00be_c410,
        &memory,
    )?;
    let fs = nix::sys::statfs::statfs(&files.0)
        .map(|f| match f.filesystem_type().0 {
            0xef53 => "ext4".to_owned(),
            0x5846_5342 => "xfs".to_owned(),
            0x9123_683e => "btrfs".to_owned(),
            0x0102_1994 => "tmpfs (a sync costs nothing here)".to_owned(),
            0x794c_7630 => "overlayfs".to_owned(),
            other => format!("{other:#x}"),
        })
        .unwrap_or_else(|_| "?".into());
    println!(
        "srpctl bench atomic: QD1 writes to a {LU_MIB} MiB file LU in {} (filesystem {fs}), the intent log beside it; median of {} round(s) of {} s per way",
        o.dir.display(),
        o.rounds,
        o.seconds
    );
    println!(
        "{:>8} {:>12} {:>10} {:>12} {:>10} {:>8} {:>8}",
        "KiB", "way", "ops/s", "mean µs", "", "", ""
    );
    for &k in &o.sizes_kib {
        let mut rates: Vec<Vec<f64>> = vec![Vec::new(); WAYS.len()];
        for _ in 0..o.rounds {
            for (i, way) in WAYS.iter().enumerate() {
                rates[i].push(measure(&s, *way, k << 10, o.seconds)?);
            }
        }
        let med: Vec<f64> = rates.into_iter().map(median).collect();
        for (i, (name, _, _)) in WAYS.iter().enumerate() {
            let ratio = if i % 2 == 1 {
                format!("{:.2}x of {}", med[i] / med[i - 1], WAYS[i - 1].0)
            } else {
                String::new()
            };
            println!(
                "{k:>8} {name:>12} {:>10.0} {:>12.0}   {ratio}",
                med[i],
                1e6 / med[i]
            );
        }
    }
    Ok(())
}
