//! `srpctl bench hca`: RDMA WRITE and READ bandwidth and SEND ping-pong latency between two
//! processes on loopback, next to iperf3's TCP single-stream bandwidth measured in the same
//! run (rounds interleaved, medians reported), and the driver's system-call counts that show
//! where the time goes.

use super::endpoint::{Endpoint, IOVA};
use anyhow::{Context, Result, anyhow, bail, ensure};
use ib_verbs::PathMtu;
use ib_verbs::ids::{Qpn, Rkey};
use ib_verbs::wr::{SendOp, WcOpcode, WcStatus};
use std::io::{BufRead, BufReader, Write};
use std::net::IpAddr;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

/// Options of the benchmark.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    pub(crate) seconds: f64,
    pub(crate) rounds: usize,
    pub(crate) sizes: Vec<u32>,
    pub(crate) local: IpAddr,
    pub(crate) peer: IpAddr,
    pub(crate) mtu: PathMtu,
    pub(crate) depth: usize,
    pub(crate) iperf: bool,
    pub(crate) gso: bool,
    /// The SRP-shaped ceiling's peer reads each answer's data from this file first (the
    /// target's backend read, which nbdkit's file plugin does too).
    pub(crate) backend_file: Option<std::path::PathBuf>,
}

const MEM: usize = 64 << 20;

/// The SRP-shaped points: (data bytes, depth) — the three points of `srpctl bench disk`.
const SRP_POINTS: [(u32, usize); 3] = [(4096, 32), (131072, 32), (4096, 1)];

struct Peer {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Peer {
    fn spawn(ip: IpAddr, gso: bool) -> Result<Peer> {
        let exe = std::env::current_exe()?;
        let mut args = vec!["bench-peer".to_owned(), "--addr".to_owned(), ip.to_string()];
        if !gso {
            args.push("--no-gso".to_owned());
        }
        let mut child = Command::new(exe)
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("start the peer process")?;
        let stdin = child.stdin.take().ok_or_else(|| anyhow!("peer stdin"))?;
        let stdout = child.stdout.take().ok_or_else(|| anyhow!("peer stdout"))?;
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Ok(Peer {
            child,
            stdin,
            lines,
        })
    }

    fn read(&self, timeout: Duration) -> Result<Vec<String>> {
        let l = self
            .lines
            .recv_timeout(timeout)
            .map_err(|_| anyhow!("the peer process did not answer"))?;
        Ok(l.split_whitespace().map(str::to_owned).collect())
    }

    fn ask(&mut self, cmd: &str, timeout: Duration) -> Result<Vec<String>> {
        writeln!(self.stdin, "{cmd}")?;
        self.stdin.flush()?;
        self.read(timeout)
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "QUIT");
        let _ = self.stdin.flush();
        std::thread::sleep(Duration::from_millis(50));
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Keeps `depth` RDMA operations of `size` bytes in flight for `secs`; returns MiB/s.
fn bandwidth(
    ep: &Endpoint,
    rkey: Rkey,
    read: bool,
    size: u32,
    depth: usize,
    secs: f64,
) -> Result<f64> {
    let slots = (MEM / 2 / size as usize).clamp(1, depth);
    let op = |slot: usize| {
        let remote_addr = IOVA + (slot as u64 * u64::from(size));
        if read {
            SendOp::Read { remote_addr, rkey }
        } else {
            SendOp::Write { remote_addr, rkey }
        }
    };
    let local = |slot: usize| ep.sge((MEM / 2) as u64 + slot as u64 * u64::from(size), size);
    for s in 0..slots {
        ep.post(s as u64, op(s), local(s))?;
    }
    let start = Instant::now();
    let mut bytes = 0u64;
    let mut wcs = Vec::new();
    let mut in_flight = slots;
    while in_flight > 0 {
        wcs.clear();
        if ep.poll_wait(&mut wcs, Duration::from_millis(100))? == 0 {
            continue;
        }
        let running = start.elapsed().as_secs_f64() < secs;
        for wc in &wcs {
            ensure!(
                wc.status == WcStatus::Success,
                "benchmark operation failed: {wc:?}"
            );
            bytes += u64::from(size);
            in_flight -= 1;
            if running {
                let s = wc.wr_id as usize;
                ep.post(wc.wr_id, op(s), local(s))?;
                in_flight += 1;
            }
        }
    }
    Ok(bytes as f64 / start.elapsed().as_secs_f64() / (1 << 20) as f64)
}

/// `n` SEND ping-pongs of `size` bytes; returns sorted round-trip times in µs.
fn ping_pong(ep: &Endpoint, peer: &mut Peer, n: u64, size: u32) -> Result<Vec<f64>> {
    let said = peer.ask(&format!("PONG {n} {size}"), Duration::from_secs(10))?;
    ensure!(
        said.first().map(String::as_str) == Some("PONGING"),
        "peer said {said:?}"
    );
    let mut rtts = Vec::with_capacity(n as usize);
    let mut wcs = Vec::new();
    for i in 0..n {
        ep.post_recv(i, ep.sge(2 << 20, size))?;
        let t = Instant::now();
        ep.post(i, SendOp::Send, ep.sge(3 << 20, size))?;
        let deadline = t + Duration::from_secs(5);
        'wait: loop {
            wcs.clear();
            ep.poll(&mut wcs)?;
            for wc in &wcs {
                ensure!(wc.status == WcStatus::Success, "ping failed: {wc:?}");
                if wc.opcode == WcOpcode::Recv {
                    break 'wait;
                }
            }
            ensure!(Instant::now() < deadline, "no pong within 5 s");
            std::hint::spin_loop();
        }
        rtts.push(t.elapsed().as_secs_f64() * 1e6);
    }
    ensure!(
        peer.read(Duration::from_secs(10))?
            .first()
            .map(String::as_str)
            == Some("PONGED"),
        "peer did not finish"
    );
    rtts.sort_by(f64::total_cmp);
    Ok(rtts)
}

/// The SRP-shaped transport ceiling: keeps `depth` "READs" outstanding for `secs` — a
/// 64-byte SEND (an SRP_CMD's size without descriptors' worth of difference) answered by
/// the peer with an RDMA WRITE of `data` bytes and a 64-byte SEND (an SRP_RSP) — and returns
/// (operations per second, average µs per operation). What the soft HCA alone allows an SRP
/// read on this machine: no SCSI, SRP, port or registration work on either side. With
/// `backend` (a file path) the peer reads each answer's data from it first, sequentially,
/// into a buffer of the answer's own: the ceiling of a target that serves a file.
fn srp_shape(
    ep: &Endpoint,
    peer: &mut Peer,
    data: u32,
    depth: usize,
    secs: f64,
    backend: Option<&str>,
) -> Result<(f64, f64)> {
    const CMD: u32 = 64;
    const RSP: u32 = 64;
    const CMDS: u64 = 4 << 20;
    const RSPS: u64 = 5 << 20;
    ensure!(depth <= 255, "serve mode names a slot in one byte");
    let said = peer.ask(
        &format!(
            "SERVE {} {data} {CMD} {RSP} {}",
            ep.rkey().0,
            backend.unwrap_or("")
        ),
        Duration::from_secs(10),
    )?;
    ensure!(
        said.first().map(String::as_str) == Some("SERVING"),
        "peer said {said:?}"
    );
    let cmd = |slot: usize| -> Result<()> {
        let at = CMDS + slot as u64 * u64::from(CMD);
        ep.fill(at, 1, slot as u8)?;
        ep.post(slot as u64, SendOp::Send, ep.sge(at, CMD))
    };
    let recv = |slot: u64| ep.post_recv(slot, ep.sge(RSPS + slot * u64::from(RSP), RSP));
    for slot in 0..depth {
        recv(slot as u64)?;
    }
    let start = Instant::now();
    for slot in 0..depth {
        cmd(slot)?;
    }
    let (mut done, mut in_flight, mut next) = (0u64, depth, 0usize);
    let mut wcs = Vec::new();
    while in_flight > 0 {
        wcs.clear();
        ep.poll_wait(&mut wcs, Duration::from_millis(100))?;
        ensure!(
            start.elapsed().as_secs_f64() < secs + 10.0,
            "the peer stopped answering"
        );
        let running = start.elapsed().as_secs_f64() < secs;
        for wc in &wcs {
            ensure!(wc.status == WcStatus::Success, "operation failed: {wc:?}");
            if wc.opcode != WcOpcode::Recv {
                continue;
            }
            done += 1;
            in_flight -= 1;
            recv(wc.wr_id)?;
            if running {
                // Any free slot will do: the responses come back in order.
                cmd(next % depth)?;
                next += 1;
                in_flight += 1;
            }
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    // The stop command, then the peer's count.
    const STOP: u64 = u64::MAX;
    let at = CMDS;
    ep.fill(at, 1, 0xff)?;
    ep.post(STOP, SendOp::Send, ep.sge(at, CMD))?;
    let said = peer.read(Duration::from_secs(10))?;
    ensure!(
        said.first().map(String::as_str) == Some("SERVED"),
        "peer said {said:?}"
    );
    // Our SENDs complete in order: once the stop command's has, none is left.
    let end = Instant::now() + Duration::from_secs(10);
    'drain: loop {
        ensure!(Instant::now() < end, "the stop command never completed");
        wcs.clear();
        ep.poll_wait(&mut wcs, Duration::from_millis(100))?;
        for wc in &wcs {
            ensure!(wc.status == WcStatus::Success, "operation failed: {wc:?}");
            if wc.wr_id == STOP && wc.opcode != WcOpcode::Recv {
                break 'drain;
            }
        }
    }
    Ok((
        done as f64 / elapsed,
        elapsed * 1e6 * depth as f64 / done.max(1) as f64,
    ))
}

/// iperf3 TCP single stream on loopback for `secs`, in MiB/s; `None` if iperf3 is missing.
fn iperf(secs: f64) -> Result<Option<f64>> {
    if Command::new("iperf3").arg("--version").output().is_err() {
        return Ok(None);
    }
    let port = "5299";
    let mut server = Command::new("iperf3")
        .args(["-s", "-1", "-B", "127.0.0.1", "-p", port])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("start iperf3 -s")?;
    std::thread::sleep(Duration::from_millis(300));
    let out = Command::new("iperf3")
        .args(["-c", "127.0.0.1", "-p", port, "-J", "-t"])
        .arg(format!("{}", secs.ceil().max(1.0)))
        .output();
    let _ = server.kill();
    let _ = server.wait();
    let text = String::from_utf8_lossy(&out.context("run iperf3 -c")?.stdout).into_owned();
    // "sum_received": { ... "bits_per_second": N ... }
    let at = text
        .find("\"sum_received\"")
        .ok_or_else(|| anyhow!("iperf3 output without sum_received"))?;
    let bps = text[at..]
        .split("\"bits_per_second\":")
        .nth(1)
        .and_then(|s| s.split([',', '}']).next())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .ok_or_else(|| anyhow!("iperf3 output without bits_per_second"))?;
    Ok(Some(bps / 8.0 / (1 << 20) as f64))
}

/// Bulk copy speed of registered memory against a plain `memcpy`, in GB/s, for `size`.
fn copy_speed(size: usize) -> (f64, f64) {
    let block = ib_verbs::mem::MemBlock::new(size + 8);
    let mut buf: Vec<u8> = (0..size).map(|i| (i * 7 + 1) as u8).collect();
    let rounds = ((256 << 20) / size).max(1);
    let t = Instant::now();
    for _ in 0..rounds {
        let _ = block.write(3, std::hint::black_box(&buf));
        let _ = block.read(3, std::hint::black_box(&mut buf));
    }
    let ours = (2 * size * rounds) as f64 / t.elapsed().as_secs_f64() / 1e9;
    let mut plain = vec![0u8; size];
    let t = Instant::now();
    for _ in 0..rounds {
        plain.copy_from_slice(std::hint::black_box(&buf));
        buf.copy_from_slice(std::hint::black_box(&plain));
    }
    let memcpy = (2 * size * rounds) as f64 / t.elapsed().as_secs_f64() / 1e9;
    (ours, memcpy)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

fn per_call(n: u64, calls: u64) -> f64 {
    if calls == 0 {
        0.0
    } else {
        n as f64 / calls as f64
    }
}

/// Runs the benchmark and prints the report.
pub(crate) fn run(o: &Options) -> Result<()> {
    let mut peer = Peer::spawn(o.peer, o.gso)?;
    let ready = peer.read(Duration::from_secs(10))?;
    ensure!(
        ready.first().map(String::as_str) == Some("READY"),
        "peer said {ready:?}"
    );
    let peer_qpn = Qpn::from_wire(ready[1].parse()?);
    let rkey = Rkey(ready[2].parse()?);
    let ep = Endpoint::open(o.local, 0x5352_5042_0000_0002, MEM, o.gso)?;
    ep.connect(o.peer, peer_qpn, o.mtu, 0x100, 0x200)?;
    let cmd = format!("CONNECT {} {} {}", o.local, ep.qpn.get(), u8::from(o.mtu));
    ensure!(
        peer.ask(&cmd, Duration::from_secs(10))?
            .first()
            .map(String::as_str)
            == Some("CONNECTED"),
        "connect"
    );

    println!(
        "srpctl bench hca: {} <-> {} (two processes), MTU {}, queue depth {}, {} round(s) of {:.1} s per point",
        o.local,
        o.peer,
        o.mtu.bytes().unwrap_or(0),
        o.depth,
        o.rounds,
        o.seconds
    );
    let mut write = vec![Vec::new(); o.sizes.len()];
    let mut read = vec![Vec::new(); o.sizes.len()];
    let mut tcp = Vec::new();
    let mut lat = Vec::new();
    let mut srp: Vec<Vec<(f64, f64)>> = vec![Vec::new(); SRP_POINTS.len()];
    let backend = match &o.backend_file {
        Some(p) => {
            let p = p
                .to_str()
                .filter(|p| !p.is_empty() && !p.contains(char::is_whitespace))
                .ok_or_else(|| anyhow!("--backend-file: a path without spaces, please"))?;
            std::fs::File::open(p).with_context(|| format!("--backend-file {p}"))?;
            Some(p)
        }
        None => None,
    };
    let before = ep.counters();
    for round in 0..o.rounds {
        // Interleaved: peer measurement, ours, peer, ours (PERFORMANCE.md).
        if o.iperf {
            if let Some(t) = iperf(o.seconds)? {
                tcp.push(t);
            }
        }
        for (i, &size) in o.sizes.iter().enumerate() {
            write[i].push(bandwidth(&ep, rkey, false, size, o.depth, o.seconds)?);
            read[i].push(bandwidth(&ep, rkey, true, size, o.depth, o.seconds)?);
        }
        lat.extend(ping_pong(&ep, &mut peer, 2000, 64)?);
        for (i, &(data, depth)) in SRP_POINTS.iter().enumerate() {
            srp[i].push(srp_shape(&ep, &mut peer, data, depth, o.seconds, backend)?);
        }
        eprintln!("round {}/{} done", round + 1, o.rounds);
    }
    let after = ep.counters();
    let tcp_mib = if tcp.is_empty() {
        None
    } else {
        Some(median(&mut tcp))
    };
    println!(
        "\n{:>10}  {:>12}  {:>12}  {:>10}  {:>10}",
        "size", "WRITE MiB/s", "READ MiB/s", "WRITE/TCP", "READ/TCP"
    );
    for (i, &size) in o.sizes.iter().enumerate() {
        let (w, r) = (median(&mut write[i]), median(&mut read[i]));
        let ratio = |x: f64| {
            tcp_mib
                .map(|t| format!("{:.2}", x / t))
                .unwrap_or_else(|| "-".into())
        };
        println!(
            "{:>10}  {:>12.1}  {:>12.1}  {:>10}  {:>10}",
            size,
            w,
            r,
            ratio(w),
            ratio(r)
        );
    }
    match tcp_mib {
        Some(t) => {
            println!("iperf3 TCP single stream on loopback (same run, median): {t:.1} MiB/s")
        }
        None => println!("iperf3 not found: no TCP reference (apt-get install iperf3)"),
    }
    lat.sort_by(f64::total_cmp);
    if !lat.is_empty() {
        let avg = lat.iter().sum::<f64>() / lat.len() as f64;
        let p = |q: f64| lat[((lat.len() - 1) as f64 * q) as usize];
        println!(
            "SEND ping-pong, 64 B, round trip: avg {avg:.1} µs, p50 {:.1} µs, p99 {:.1} µs",
            p(0.5),
            p(0.99)
        );
    }
    println!(
        "\nSRP-shaped transport ceiling (SEND 64 B -> the peer's RDMA WRITE of the data + SEND 64 B; no SCSI, SRP or port work; medians):"
    );
    if let Some(b) = backend {
        println!(
            "  (the peer reads each answer's data from {b} first, sequentially, as a target's backend does)"
        );
    }
    for (i, &(data, depth)) in SRP_POINTS.iter().enumerate() {
        let mut ops: Vec<f64> = srp[i].iter().map(|s| s.0).collect();
        let mut us: Vec<f64> = srp[i].iter().map(|s| s.1).collect();
        let ops = median(&mut ops);
        println!(
            "  {:>4} KiB read, depth {:>2}: {:>9.0} ops/s  {:>8.1} MiB/s  {:>7.1} µs avg",
            data >> 10,
            depth,
            ops,
            ops * f64::from(data) / f64::from(1u32 << 20),
            median(&mut us)
        );
    }
    let d = |name: &str| after.get(name).saturating_sub(before.get(name));
    let io = IoCounts {
        send_calls: d("send_calls"),
        datagrams_sent: d("datagrams_sent"),
        recv_calls: d("recv_calls"),
        datagrams_received: d("datagrams_received"),
        wakeups: d("wakeups"),
    };
    println!("\nwhere the time goes (this side):");
    println!(
        "  sent {} packets in {} send calls (GSO runs or sendmmsg; {:.1} per call); received {} datagrams (GRO buffers) in {} receive batches ({:.1} per batch, one recvmsg each); {} port-thread wake-ups",
        io.datagrams_sent,
        io.send_calls,
        per_call(io.datagrams_sent, io.send_calls),
        io.datagrams_received,
        io.recv_calls,
        per_call(io.datagrams_received, io.recv_calls),
        io.wakeups
    );
    println!(
        "  engine: {} packets built, {} received; payload copies per byte: 1 into the datagram (registered memory -> buffer) on send, 1 out of it on receive, plus the kernel's 2",
        d("tx_packets"),
        d("rx_packets")
    );
    let (ours, memcpy) = copy_speed(64 << 10);
    println!(
        "  registered-memory copies (64 KiB, misaligned): {ours:.1} GB/s, plain memcpy {memcpy:.1} GB/s"
    );
    if d("icrc_errors") + d("malformed") > 0 {
        bail!("the benchmark saw ICRC or parse errors: {after:?}");
    }
    Ok(())
}

/// The software HCA's system calls over the run (its port counters' driver part).
struct IoCounts {
    send_calls: u64,
    datagrams_sent: u64,
    recv_calls: u64,
    datagrams_received: u64,
    wakeups: u64,
}
