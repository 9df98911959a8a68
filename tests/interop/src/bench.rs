//! Our target over rdma-core next to LIO/ib_srpt, in one guest, on one rxe device, both
//! driven by the same Linux `ib_srp` and fio (issue #28's numbers): 4k random read at
//! QD32 (IOPS, and the whole guest's CPU per I/O from `/proc/stat`), 128k sequential read
//! at QD16 (MiB/s), 4k random read at QD1 (mean and 99th-percentile latency).
//!
//! Both targets serve a 128 MiB RAM LUN filled with random data first (LIO `rd_mcp`, ours
//! `ram = true`); both run for the whole benchmark and each is idle while the other is
//! measured (our target's CQs are armed: no CPU while idle). Rounds alternate the order
//! (ours, LIO, LIO, ours, …); each point is the median of its rounds. The guest is
//! emulated (TCG), so only the ratios mean anything.

use crate::in_guest::{self, GuestDaemon};
use crate::linux::{
    Backstore, SrpLogin, SrptConfig, linux_initiator_port_id, setup_lio_srpt, setup_rxe, srp_login,
    srp_logout,
};
use crate::matrix::side::OURS_IOC;
use crate::{Error, Guest, GuestConfig, NetNs, Result};
use std::time::Duration;

/// One target's figures for one round.
#[derive(Debug, Clone, Copy, Default)]
pub struct Point {
    /// 4k random read, QD32: I/Os per second.
    pub iops: f64,
    /// 4k random read, QD32: the whole guest's busy CPU time per I/O, µs.
    pub cpu_us_per_io: f64,
    /// 128k sequential read, QD16: MiB/s.
    pub seq_mibs: f64,
    /// 4k random read, QD1: mean completion latency, µs.
    pub lat_mean_us: f64,
    /// 4k random read, QD1: 99th percentile, µs.
    pub lat_p99_us: f64,
}

/// Every round of both targets.
#[derive(Debug, Clone, Default)]
pub struct Results {
    /// With `profile`: where the guest's CPU went during one more 4k QD32 run of each
    /// (`perf report --sort comm,dso`), ours then LIO.
    pub profiles: Vec<(String, String)>,
    /// Ours, one per round.
    pub ours: Vec<Point>,
    /// LIO, one per round.
    pub lio: Vec<Point>,
    /// Seconds per fio point.
    pub secs: u32,
}

/// The LUN size, MiB.
const LUN_MIB: u64 = 128;
/// Our target's RDMA-CM port (ib_srpt takes 5555 on every address).
const OURS_PORT: u16 = 5556;

/// Runs `rounds` rounds of `secs`-second points; with `profile`, one more 4k QD32 run of
/// each target under `perf record -a` (cpu-clock: the guest has no PMU).
pub fn run(rounds: usize, secs: u32, profile: bool) -> Result<Results> {
    let ns = NetNs::new()?;
    let guest = Guest::boot(GuestConfig::new(&ns).memory_mib(2048))?;
    let rxe = setup_rxe(&guest)?;
    let allow = linux_initiator_port_id(&rxe[0], 0);
    let lio = setup_lio_srpt(
        &guest,
        &SrptConfig::new(
            &rxe,
            vec![Backstore::Ramdisk { mib: LUN_MIB }],
            vec![allow.clone()],
        ),
    )?;
    let ip = rxe[0].ip;
    let conf = format!(
        "[target]\nname = \"bench\"\nnode_guid = \"0x0002c90300c0ff00\"\ncontrol_socket = \"/tmp/b/target.sock\"\n\
         state_dir = \"/tmp/b/state\"\nrdma_cm_port = {OURS_PORT}\n\n\
         [[port]]\nname = \"p0\"\naddress = \"{ip}\"\nprovider = \"rdma-core\"\n\n\
         [[lun]]\nname = \"ram\"\nram = true\nsize = \"{LUN_MIB}MiB\"\n\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"0x{ioc}\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"ram\" }}\nallow = [\"{allow}\"]\n",
        ioc = OURS_IOC[0]
    );
    guest.run_ok("mkdir -p /tmp/b", Duration::from_secs(30))?;
    let path = in_guest::write_share(&guest, "bench-target.toml", &conf)?;
    // Release build preferred: the benchmark measures the product, not a debug build.
    let mut target = GuestDaemon::start(&guest, "target", &["target", "run", "-c", &path])?;
    target.wait_for_log(&guest, "control socket", Duration::from_secs(60))?;
    let logins = [
        SrpLogin::with_ids(
            "rxe0",
            OURS_IOC[0],
            OURS_IOC[0],
            &format!("{ip}:{OURS_PORT}"),
        ),
        SrpLogin::new("rxe0", &lio, ip),
    ];
    let mut out = Results {
        secs,
        ..Results::default()
    };
    for round in 0..rounds {
        let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for k in order {
            let p = match measure(&guest, &logins[k], secs) {
                Ok(p) => p,
                Err(e) => {
                    if k == 0 {
                        eprintln!(
                            "---- our target's log ----\n{}\n---- its threads ----\n{}",
                            target.log(),
                            target.backtrace(&guest)
                        );
                    }
                    return Err(e);
                }
            };
            eprintln!(
                "round {} {}: {:.0} IOPS, {:.1} µs CPU/I/O, {:.0} MiB/s, {:.0} µs QD1 (p99 {:.0})",
                round + 1,
                ["ours", "lio"][k],
                p.iops,
                p.cpu_us_per_io,
                p.seq_mibs,
                p.lat_mean_us,
                p.lat_p99_us
            );
            [&mut out.ours, &mut out.lio][k].push(p);
        }
    }
    if profile {
        for (k, login) in logins.iter().enumerate() {
            let s = srp_login(&guest, login)?;
            let dev = s.disks.first().map(|d| d.block.clone()).unwrap_or_default();
            let fio = format!(
                "fio --name=p --filename={dev} --rw=randread --bs=4k --iodepth=32 \
                 --ioengine=libaio --direct=1 --time_based --runtime={secs} \
                 --size={LUN_MIB}M --output-format=json --output=/tmp/p.json"
            );
            // Ours also: the kernel symbols under its loop thread, and its system calls
            // per I/O (strace -c over a second run; strace slows it, the ratio stands).
            let ours_extra = if k == 0 {
                format!(
                    "echo '--- kernel symbols under srpt-daemon (>= 2 %)'\n\
                     perf report -i /tmp/perf.data --stdio --no-children --comms srpt-daemon \
                     --sort sym --percent-limit 2 -g none 2>/dev/null | grep -v '^#' | grep -v '^$'\n\
                     strace -f -c -o /tmp/strace.txt -p $(cat {pid}) & S=$!\nsleep 1\n{fio}\n\
                     kill -INT $S; wait $S\n\
                     ios=$(grep -o '\"total_ios\" : [0-9]*' /tmp/p.json | head -1 | grep -o '[0-9]*$')\n\
                     echo \"--- system calls of our target over $ios I/Os (strace -c -f)\"\n\
                     head -25 /tmp/strace.txt",
                    pid = target.pid_file()
                )
            } else {
                String::new()
            };
            let report = guest.run_ok(
                &format!(
                    "cd /tmp && perf record -q -a -g -e cpu-clock -F 499 -o /tmp/perf.data -- \
                     {fio} >/dev/null 2>&1\n\
                     perf report -i /tmp/perf.data --stdio --no-children --sort comm,dso \
                     --percent-limit 1.5 -g none 2>/dev/null | grep -v '^#' | grep -v '^$'\n\
                     {ours_extra}"
                ),
                Duration::from_secs(u64::from(secs) * 2 + 300),
            );
            srp_logout(&guest, &s)?;
            out.profiles.push((
                ["ours", "lio"][k].to_owned(),
                report.unwrap_or_else(|e| e.to_string()),
            ));
        }
    }
    target.stop(&guest);
    let _ = guest.shutdown();
    Ok(out)
}

/// Logs in, fills the LUN, runs the three points, logs out.
fn measure(guest: &Guest, login: &SrpLogin, secs: u32) -> Result<Point> {
    let s = srp_login(guest, login)?;
    let dev = s
        .disks
        .first()
        .map(|d| d.block.clone())
        .ok_or_else(|| Error::Guest(format!("no disk: {s:?}")))?;
    let r = (|| {
        guest.run_ok(
            &format!(
                "fio --name=fill --filename={dev} --rw=write --bs=1m --size={LUN_MIB}M \
                 --ioengine=libaio --iodepth=4 --direct=1 --refill_buffers --output=/dev/null"
            ),
            Duration::from_secs(600),
        )?;
        let (rand, busy) = fio_with_cpu(guest, &dev, "randread", "4k", 32, secs)?;
        let (seq, _) = fio_with_cpu(guest, &dev, "read", "128k", 16, secs)?;
        let (qd1, _) = fio_with_cpu(guest, &dev, "randread", "4k", 1, secs)?;
        let ios = rand["total_ios"].as_f64().unwrap_or(0.0);
        Ok(Point {
            iops: rand["iops"].as_f64().unwrap_or(0.0),
            cpu_us_per_io: if ios > 0.0 { busy * 1e6 / ios } else { 0.0 },
            seq_mibs: seq["bw"].as_f64().unwrap_or(0.0) / 1024.0,
            lat_mean_us: qd1["clat_ns"]["mean"].as_f64().unwrap_or(0.0) / 1000.0,
            lat_p99_us: qd1["clat_ns"]["percentile"]["99.000000"]
                .as_f64()
                .unwrap_or(0.0)
                / 1000.0,
        })
    })();
    let out = srp_logout(guest, &s);
    let p = r?;
    out?;
    Ok(p)
}

/// One time-based fio job (libaio, direct); its read section and the guest's busy CPU
/// seconds over the run (user, nice, system, irq, softirq and steal of every CPU, from
/// `/proc/stat` at USER_HZ 100).
fn fio_with_cpu(
    guest: &Guest,
    dev: &str,
    rw: &str,
    bs: &str,
    qd: u32,
    secs: u32,
) -> Result<(serde_json::Value, f64)> {
    let script = format!(
        "busy() {{ awk '/^cpu /{{print $2+$3+$4+$7+$8+$9}}' /proc/stat; }}\n\
         a=$(busy)\n\
         fio --name=bench --filename={dev} --rw={rw} --bs={bs} --iodepth={qd} \
         --ioengine=libaio --direct=1 --time_based --runtime={secs} --size={LUN_MIB}M \
         --output-format=json > /tmp/fio.json\n\
         b=$(busy)\necho BUSY $((b - a))\ncat /tmp/fio.json"
    );
    let out = guest.run_ok(&script, Duration::from_secs(u64::from(secs) + 120))?;
    let busy = out
        .lines()
        .find_map(|l| l.strip_prefix("BUSY "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .ok_or_else(|| Error::Guest(format!("no CPU figure: {out}")))?
        / 100.0;
    let json = out
        .find('{')
        .map(|i| &out[i..])
        .ok_or_else(|| Error::Guest(format!("no fio JSON: {out}")))?;
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| Error::Guest(format!("fio JSON: {e}: {out}")))?;
    Ok((v["jobs"][0]["read"].clone(), busy))
}

/// The median of `f` over `points`.
pub fn median(points: &[Point], f: impl Fn(&Point) -> f64) -> f64 {
    let mut v: Vec<f64> = points.iter().map(f).collect();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The table for docs/benchmarks.md: medians and ours as a ratio of LIO.
pub fn table(r: &Results) -> String {
    type Metric = (&'static str, fn(&Point) -> f64, &'static str, bool);
    let metrics: [Metric; 5] = [
        ("4k randread QD32, IOPS", |p| p.iops, "", true),
        (
            "4k randread QD32, guest CPU per I/O",
            |p| p.cpu_us_per_io,
            " µs",
            false,
        ),
        ("128k seqread QD16, MiB/s", |p| p.seq_mibs, "", true),
        (
            "4k randread QD1, mean latency",
            |p| p.lat_mean_us,
            " µs",
            false,
        ),
        (
            "4k randread QD1, p99 latency",
            |p| p.lat_p99_us,
            " µs",
            false,
        ),
    ];
    let mut s = String::from(
        "| point | LIO/ib_srpt | ours (rdma-core) | ours ÷ LIO |\n|---|---|---|---|\n",
    );
    for (name, f, unit, more_is_better) in metrics {
        let (l, o) = (median(&r.lio, f), median(&r.ours, f));
        let ratio = if l > 0.0 { o / l } else { 0.0 };
        let better = if more_is_better {
            "higher is better"
        } else {
            "lower is better"
        };
        s.push_str(&format!(
            "| {name} | {l:.1}{unit} | {o:.1}{unit} | {ratio:.2}x ({better}) |\n"
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_the_ratio_table() {
        let p = |iops: f64| Point {
            iops,
            cpu_us_per_io: 10.0,
            seq_mibs: 100.0,
            lat_mean_us: 50.0,
            lat_p99_us: 90.0,
        };
        assert_eq!(median(&[p(3.0), p(1.0), p(2.0)], |p| p.iops), 2.0);
        assert_eq!(median(&[p(4.0), p(1.0)], |p| p.iops), 2.5);
        let r = Results {
            ours: vec![p(200.0)],
            lio: vec![p(100.0)],
            secs: 10,
            profiles: Vec::new(),
        };
        let t = table(&r);
        assert!(
            t.contains("| 4k randread QD32, IOPS | 100.0 | 200.0 | 2.00x"),
            "{t}"
        );
        assert!(
            t.contains("| 4k randread QD1, mean latency | 50.0 µs | 50.0 µs | 1.00x"),
            "{t}"
        );
    }
}
