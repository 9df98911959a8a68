//! `srpctl bench copy`: copy offload against the same copy made by the initiator, in one
//! run (issue #16's acceptance: offload at least 2x the initiator's READ+WRITE).
//!
//! In one process: the target daemon serving a writable file LUN on /dev/shm whose first
//! half is random data, and the SRP initiator (the StorPort miniport's port, as `bench disk`
//! drives it) logged in from `--host`. Each round copies the first `--size-mib` MiB to the
//! second half three ways, the destination emptied before each and compared with the
//! source after each:
//! - `read+write`: the initiator reads and writes `--io-kib` pieces, `--depth` of them in
//!   flight (what `dd`/`cp` over the disk, or a host without offload, does);
//! - `xcopy`: EXTENDED COPY (LID1) commands of `--segment-mib` MiB, one after the other,
//!   two Identification CSCDs naming the LU by its NAA (as `sg_xcopy` sends them);
//! - `odx`: POPULATE TOKEN of `--token-mib` MiB, RECEIVE ROD TOKEN INFORMATION, WRITE USING
//!   TOKEN (as Windows ODX does).
//!
//! Medians of the rounds are reported with each offload's ratio to `read+write`.

use super::disk::{Session, execute, execute_with, read16, srb_ok};
use anyhow::{Context, Result, anyhow, ensure};
use scsi::Command;
use scsi::cdb::copy::{SA_EXTENDED_COPY_LID1, SA_POPULATE_TOKEN, SA_WRITE_USING_TOKEN};
use scsi::cdb::{CopyIn, CopyOut, CopyResults};
use scsi::copy::{
    BlockSegment, CSCD_LEN, CopyParamError, IdCscd, LIST_ID_USAGE_NONE, PopulateToken,
    ROD_TOKEN_LEN, Range, SEGMENT_LEN, WriteUsingToken, XcopyHeader, token_param_list,
};
use srp_hostd::HostConfig;
use srp_hostd::config::DriverModel;
use srp_initiator_storport::port::{DataDirection, SrbStatus, SystemMemory};
use srp_initiator_storport::srp::RegistrationMode;
use srp_target::config::TargetConfig;
use srp_target::daemon::{Daemon, DaemonOptions};
use std::io::Write;
use std::net::IpAddr;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use wirekit::WireRepr;

/// Options of `srpctl bench copy`.
#[derive(clap::Args, Clone, Debug)]
pub(crate) struct Options {
    /// Bytes copied per method and round, in MiB (the LU is twice as large).
    #[arg(long, default_value_t = 1024)]
    pub(crate) size_mib: u64,
    /// Rounds; medians reported.
    #[arg(long, default_value_t = 3)]
    pub(crate) rounds: usize,
    /// READ+WRITE pieces kept in flight by the initiator.
    #[arg(long, default_value_t = 8)]
    pub(crate) depth: usize,
    /// READ+WRITE piece size in KiB (at most the host's max_transfer, 256 KiB by default).
    #[arg(long, default_value_t = 256)]
    pub(crate) io_kib: u64,
    /// Bytes per EXTENDED COPY command, in MiB (at most 65535 blocks).
    #[arg(long, default_value_t = 32)]
    pub(crate) segment_mib: u64,
    /// Bytes per ODX token, in MiB (at most the target's 256).
    #[arg(long, default_value_t = 256)]
    pub(crate) token_mib: u64,
    /// The target port's address.
    #[arg(long, default_value = "127.0.207.1")]
    pub(crate) target: IpAddr,
    /// The initiator's address.
    #[arg(long, default_value = "127.0.207.2")]
    pub(crate) host: IpAddr,
    /// The target's RDMA-CM TCP port.
    #[arg(long, default_value_t = 5602)]
    pub(crate) rdma_cm_port: u16,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub(crate) json: bool,
}

const IOC_GUID: u64 = 0x0002_c903_00be_c301;

/// The LU's file on /dev/shm, removed on drop.
struct Backing(PathBuf);

impl Drop for Backing {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn make_backing(size: u64) -> Result<Backing> {
    let path = PathBuf::from(format!(
        "/dev/shm/srpctl-bench-copy-{}.img",
        std::process::id()
    ));
    let backing = Backing(path.clone());
    let mut f = std::fs::File::create(&path).with_context(|| format!("{}", path.display()))?;
    let mut x = 0x2545_f491_4f6c_dd1du64 ^ u64::from(std::process::id());
    let mut chunk = vec![0u8; 1 << 20];
    for _ in 0..size >> 20 {
        for w in chunk.chunks_exact_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            w.copy_from_slice(&x.to_le_bytes());
        }
        f.write_all(&chunk)
            .with_context(|| format!("filling {}", path.display()))?;
    }
    f.set_len(2 * size)?;
    Ok(backing)
}

fn target_config(o: &Options, file: &std::path::Path) -> Result<TargetConfig> {
    let text = format!(
        "[target]\nname = \"srpctl-bench-copy\"\nnode_guid = \"0x0002c90300bec300\"\n\
         rdma_cm_port = {}\n\n[[port]]\nname = \"p0\"\naddress = \"{}\"\n\n\
         [[lun]]\nname = \"bench\"\nfile = \"{}\"\n\n\
         [[ioc]]\nname = \"ioc-bench\"\nguid = \"{IOC_GUID:#018x}\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"bench\" }}\nallow = [\"any\"]\n",
        o.rdma_cm_port,
        o.target,
        file.display()
    );
    Ok(TargetConfig::from_str(&text, "bench-copy.toml")
        .map_err(|e| anyhow!("benchmark target configuration: {e}"))?
        .config)
}

/// The LU's NAA designator, from VPD 83h.
fn naa(s: &Session) -> Result<[u8; 16]> {
    let r = execute(&s.port, &[0x12, 0x01, 0x83, 0x01, 0x00, 0], 256)?;
    check(&r, "INQUIRY VPD 83h")?;
    let page = r.data.to_vec();
    let mut at = 4;
    while at + 4 <= page.len() {
        let len = usize::from(page[at + 3]);
        if page[at + 1] & 0x3f == 0x03 && len == 16 {
            let mut id = [0u8; 16];
            id.copy_from_slice(&page[at + 4..at + 20]);
            return Ok(id);
        }
        at += 4 + len;
    }
    Err(anyhow!("the LU reports no NAA designator"))
}

fn check(r: &srp_initiator_storport::port::SrbResult, what: &str) -> Result<()> {
    // A short data-in (the answer shorter than the buffer) is DATA_OVERRUN in StorPort.
    let short = r.status.code() == SrbStatus::DATA_OVERRUN && r.scsi_status == 0;
    ensure!(
        srb_ok(r) || short,
        "{what}: SRB {:?}, SCSI status {:#04x}, sense {:02x?}",
        r.status,
        r.scsi_status,
        r.sense
    );
    Ok(())
}

/// The initiator's copy: `depth` threads, each reading and writing its pieces in turn.
fn read_write(o: &Options, s: &Session, size: u64) -> Result<()> {
    let bs = u64::from(s.block_size);
    let piece = o.io_kib << 10;
    let pieces = size.div_ceil(piece);
    let next = AtomicU64::new(0);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..o.depth)
            .map(|_| {
                scope.spawn(|| -> Result<()> {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= pieces {
                            return Ok(());
                        }
                        let off = i * piece;
                        let len = piece.min(size - off);
                        let blocks = (len / bs) as u32;
                        let r = execute(&s.port, &read16(off / bs, blocks), len as usize)?;
                        check(&r, "READ")?;
                        let mut w = read16((size + off) / bs, blocks);
                        w[0] = 0x8a;
                        let r = execute_with(&s.port, &w, DataDirection::Out, r.data.to_vec())?;
                        check(&r, "WRITE")?;
                    }
                })
            })
            .collect();
        workers.into_iter().try_for_each(|w| {
            w.join()
                .unwrap_or_else(|_| Err(anyhow!("a copier panicked")))
        })
    })
}

/// A THIRD-PARTY COPY OUT or IN command's CDB.
fn cdb(cmd: Command) -> Result<Vec<u8>> {
    let mut c = vec![0u8; cmd.buffer_len()];
    cmd.emit(&mut c)
        .map_err(|e| anyhow!("{cmd:?} does not fit its CDB: {e}"))?;
    Ok(c)
}

/// Bytes of `t`, emitted.
fn bytes<'a, T: WireRepr<'a, Error = CopyParamError>>(t: &T) -> Result<Vec<u8>> {
    let mut b = vec![0u8; t.buffer_len()];
    t.emit(&mut b)
        .map_err(|e| anyhow!("copy parameters: {e}"))?;
    Ok(b)
}

/// EXTENDED COPY (LID1) commands of `--segment-mib`, two CSCDs (source, destination).
fn xcopy(o: &Options, s: &Session, naa: &[u8; 16], size: u64) -> Result<()> {
    let bs = u64::from(s.block_size);
    let per = ((o.segment_mib << 20) / bs).min(0xffff);
    let total = size / bs;
    let cscd = bytes(&IdCscd::for_naa(naa, s.block_size))?;
    let mut lba = 0u64;
    let mut id = 0u8;
    while lba < total {
        let n = per.min(total - lba);
        let mut list = bytes(&XcopyHeader {
            list_id: id,
            striped: false,
            list_id_usage: LIST_ID_USAGE_NONE,
            priority: 0,
            cscd_len: 2 * CSCD_LEN as u16,
            segment_len: SEGMENT_LEN as u32,
            inline_len: 0,
        })?;
        list.extend(&cscd);
        list.extend(&cscd);
        list.extend(bytes(&BlockSegment {
            dc: false,
            cat: false,
            source: 0,
            destination: 1,
            blocks: n as u16,
            source_lba: lba,
            destination_lba: lba + total,
        })?);
        let c = cdb(Command::CopyOut(CopyOut {
            action: SA_EXTENDED_COPY_LID1,
            list_id: 0,
            param_len: list.len() as u32,
        }))?;
        let r = execute_with(&s.port, &c, DataDirection::Out, list)?;
        check(&r, "EXTENDED COPY")?;
        lba += n;
        id = id.wrapping_add(1);
    }
    Ok(())
}

/// POPULATE TOKEN, RECEIVE ROD TOKEN INFORMATION, WRITE USING TOKEN per `--token-mib`.
fn odx(o: &Options, s: &Session, size: u64) -> Result<()> {
    let bs = u64::from(s.block_size);
    let per = (o.token_mib << 20) / bs;
    let total = size / bs;
    let list_err = |e| anyhow!("token parameters: {e}");
    let out = |action, list_id, list: &[u8]| {
        cdb(Command::CopyOut(CopyOut {
            action,
            list_id,
            param_len: list.len() as u32,
        }))
    };
    let mut lba = 0u64;
    let mut id = 1u32;
    while lba < total {
        let n = per.min(total - lba);
        let populate = PopulateToken {
            data_len: 0,
            rtv: false,
            immed: false,
            inactivity_s: 0,
            rod_type: 0,
            ranges_len: 0,
        };
        let source = [Range {
            lba,
            blocks: n as u32,
        }];
        let pt = token_param_list(&populate, &source).map_err(list_err)?;
        let c = out(SA_POPULATE_TOKEN, id, &pt)?;
        let r = execute_with(&s.port, &c, DataDirection::Out, pt)?;
        check(&r, "POPULATE TOKEN")?;
        let rrti = cdb(Command::CopyIn(CopyIn {
            action: CopyResults::RodTokenInformation,
            list_id: id,
            alloc_len: 1024,
        }))?;
        let r = execute(&s.port, &rrti, 1024)?;
        check(&r, "RECEIVE ROD TOKEN INFORMATION")?;
        let info = r.data.to_vec();
        let m = usize::from(info[13]);
        let at = 32 + m + 6;
        ensure!(
            info.len() >= at + ROD_TOKEN_LEN,
            "RRTI: no token ({} bytes)",
            info.len()
        );
        let mut token = [0u8; ROD_TOKEN_LEN];
        token.copy_from_slice(&info[at..at + ROD_TOKEN_LEN]);
        // DEL_TKN: each token is used once.
        let wut = WriteUsingToken {
            data_len: 0,
            del_tkn: true,
            immed: false,
            offset: 0,
            token,
            ranges_len: 0,
        };
        let destination = [Range {
            lba: lba + total,
            blocks: n as u32,
        }];
        let list = token_param_list(&wut, &destination).map_err(list_err)?;
        let c = out(SA_WRITE_USING_TOKEN, id, &list)?;
        let r = execute_with(&s.port, &c, DataDirection::Out, list)?;
        check(&r, "WRITE USING TOKEN")?;
        lba += n;
        id += 1;
    }
    Ok(())
}

/// Empties the destination half (a hole: zeros) and checks nothing equals the source.
fn clear(file: &std::path::Path, size: u64) -> Result<()> {
    let f = std::fs::OpenOptions::new().write(true).open(file)?;
    f.set_len(size)?;
    f.set_len(2 * size)?;
    Ok(())
}

/// Whether the destination half equals the source half.
fn verify(file: &std::path::Path, size: u64, what: &str) -> Result<()> {
    let f = std::fs::File::open(file)?;
    let mut a = vec![0u8; 1 << 20];
    let mut b = vec![0u8; 1 << 20];
    let mut off = 0;
    while off < size {
        let n = (1u64 << 20).min(size - off) as usize;
        f.read_exact_at(&mut a[..n], off)?;
        f.read_exact_at(&mut b[..n], size + off)?;
        ensure!(
            a[..n] == b[..n],
            "{what}: the copy differs from the source in the MiB at {off}"
        );
        off += n as u64;
    }
    Ok(())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs the benchmark and prints the report.
pub(crate) fn run(o: &Options) -> Result<()> {
    ensure!(o.rounds >= 1, "--rounds must be at least 1");
    ensure!((1..=64).contains(&o.depth), "--depth: 1 to 64");
    ensure!((4..=8192).contains(&o.size_mib), "--size-mib: 4 to 8192");
    ensure!(
        (4..=256).contains(&o.io_kib) && o.io_kib % 4 == 0,
        "--io-kib: 4 to 256, whole 4 KiB"
    );
    ensure!((1..=256).contains(&o.token_mib), "--token-mib: 1 to 256");
    ensure!(o.segment_mib >= 1, "--segment-mib: at least 1");
    let size = o.size_mib << 20;
    let backing = make_backing(size)?;
    let config = target_config(o, &backing.0)?;
    let options = DaemonOptions {
        shutdown_step: Duration::from_millis(500),
        ..DaemonOptions::new(providers::system())
    };
    let _daemon = Daemon::start(config.clone(), options).context("starting the target")?;
    let mut host = HostConfig::with_portals("srpctl-bench-copy", Vec::new());
    host.queue_depth = host.queue_depth.max(o.depth as u32);
    let memory = SystemMemory::new(srp_hostd::session::memory_pages(&host));
    let s = Session::open(
        o.target,
        o.depth,
        &config,
        o.host,
        RegistrationMode::PerIo,
        DriverModel::StorPort,
        0x0002_c903_00be_c310,
        &memory,
    )?;
    let naa = naa(&s)?;
    let methods = ["read+write", "xcopy", "odx"];
    let mut mib_s: Vec<Vec<f64>> = vec![Vec::new(); methods.len()];
    for round in 0..o.rounds {
        for (m, name) in methods.iter().enumerate() {
            clear(&backing.0, size)?;
            let t = Instant::now();
            match m {
                0 => read_write(o, &s, size)?,
                1 => xcopy(o, &s, &naa, size)?,
                _ => odx(o, &s, size)?,
            }
            let secs = t.elapsed().as_secs_f64();
            verify(&backing.0, size, name)?;
            let rate = o.size_mib as f64 / secs;
            mib_s[m].push(rate);
            if !o.json {
                eprintln!("round {}: {name}: {rate:.0} MiB/s", round + 1);
            }
        }
    }
    let med: Vec<f64> = mib_s.into_iter().map(median).collect();
    if o.json {
        println!(
            "{{\"size_mib\":{},\"rounds\":{},\"read_write_mib_s\":{:.1},\"xcopy_mib_s\":{:.1},\"odx_mib_s\":{:.1},\"xcopy_ratio\":{:.2},\"odx_ratio\":{:.2}}}",
            o.size_mib,
            o.rounds,
            med[0],
            med[1],
            med[2],
            med[1] / med[0],
            med[2] / med[0]
        );
        return Ok(());
    }
    println!(
        "srpctl bench copy: {} MiB copied within one LU (a /dev/shm file), target {} <-> initiator {}, median of {} round(s); every copy compared with its source",
        o.size_mib, o.target, o.host, o.rounds
    );
    println!("{:<12} {:>10} {:>10}", "method", "MiB/s", "ratio");
    for (m, name) in methods.iter().enumerate() {
        println!("{name:<12} {:>10.0} {:>9.2}x", med[m], med[m] / med[0]);
    }
    println!(
        "read+write: {} KiB pieces, {} in flight; xcopy: {} MiB per EXTENDED COPY; odx: {} MiB per token",
        o.io_kib, o.depth, o.segment_mib, o.token_mib
    );
    Ok(())
}
