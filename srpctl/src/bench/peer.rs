//! The passive side of `srpctl bench hca`, run as a separate process (`srpctl bench-peer`)
//! and driven over stdin/stdout: it answers RDMA WRITE and READ as any responder does,
//! echoes SENDs in ping-pong mode, and in serve mode answers each SEND as an SRP target
//! answers a READ: an RDMA WRITE of the data, then a SEND of the response.

use super::endpoint::Endpoint;
use super::endpoint::IOVA;
use anyhow::{Context, Result, bail, ensure};
use ib_verbs::PathMtu;
use ib_verbs::ids::{Qpn, Rkey};
use ib_verbs::wr::{SendOp, WcOpcode, WcStatus};
use std::io::{BufRead, Write};
use std::net::IpAddr;

/// Runs the peer until stdin closes or says QUIT.
pub(crate) fn run(ip: IpAddr, mem_bytes: usize, gso: bool) -> Result<()> {
    let ep = Endpoint::open(ip, 0x5352_5042_0000_0003, mem_bytes, gso)?;
    let say = |s: String| -> Result<()> {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{s}")?;
        Ok(out.flush()?)
    };
    say(format!("READY {} {}", ep.qpn.get(), ep.rkey().0))?;
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["CONNECT", ip, qpn, mtu] => {
                let mtu = PathMtu::from(mtu.parse::<u8>()?);
                ep.connect(ip.parse()?, Qpn::from_wire(qpn.parse()?), mtu, 0x200, 0x100)?;
                say("CONNECTED".into())?;
            }
            ["PONG", n, size] => {
                pong(&ep, n.parse()?, size.parse()?, || say("PONGING".into()))?;
                say("PONGED".into())?;
            }
            ["SERVE", rkey, data, cmd_len, rsp_len, backend @ ..] => {
                let backend = match backend {
                    [] => None,
                    [path] => Some(Backend::open(path)?),
                    _ => bail!("SERVE takes at most one backend file"),
                };
                let served = serve(
                    &ep,
                    mem_bytes,
                    Serve {
                        rkey: Rkey(rkey.parse()?),
                        data: data.parse()?,
                        cmd_len: cmd_len.parse()?,
                        rsp_len: rsp_len.parse()?,
                        backend,
                    },
                    || say("SERVING".into()),
                )?;
                say(format!("SERVED {served}"))?;
            }
            ["QUIT"] => break,
            other => bail!("unknown command {other:?}"),
        }
    }
    Ok(())
}

/// Answers `n` SENDs of `size` bytes with a SEND of the same size.
/// `ready` is called once the receives are posted (the pinger starts then).
fn pong(ep: &Endpoint, n: u64, size: u32, ready: impl FnOnce() -> Result<()>) -> Result<()> {
    for i in 0..8 {
        ep.post_recv(i, ep.sge(0, size))?;
    }
    ready()?;
    let mut wcs = Vec::new();
    let mut done = 0;
    while done < n {
        wcs.clear();
        if ep.poll(&mut wcs)? == 0 {
            std::hint::spin_loop();
            continue;
        }
        for wc in &wcs {
            if wc.status != WcStatus::Success {
                bail!("peer completion failed: {wc:?}");
            }
            if wc.opcode == WcOpcode::Recv {
                done += 1;
                ep.post_recv(wc.wr_id, ep.sge(0, size))
                    .context("repost receive")?;
                ep.post(done, SendOp::Send, ep.sge(1 << 20, size))?;
            }
        }
    }
    Ok(())
}

/// Where serve mode's buffers are: the initiator's data slots (in its memory), our command
/// receives, our response and our data source.
pub(crate) const SERVE_DATA: u64 = 8 << 20;
const SERVE_RECVS: usize = 256;
const SERVE_RSP: u64 = 1 << 20;
const SERVE_SOURCE: u64 = 2 << 20;

/// A file the serve mode reads each answer's data from, sequentially, wrapping at its end.
struct Backend {
    file: std::fs::File,
    len: u64,
    at: u64,
}

impl Backend {
    fn open(path: &str) -> Result<Backend> {
        let file = std::fs::File::open(path).with_context(|| format!("open {path}"))?;
        let len = file.metadata()?.len();
        Ok(Backend { file, len, at: 0 })
    }

    /// Reads the next `data` bytes of the file into our memory at `offset`.
    fn read_next(&mut self, ep: &Endpoint, offset: u64, data: u32) -> Result<()> {
        let data64 = u64::from(data);
        ensure!(
            self.len >= data64,
            "the backend file ({} bytes) is smaller than one answer ({data} bytes)",
            self.len
        );
        if self.at + data64 > self.len {
            self.at = 0;
        }
        ep.read_file(offset, data as usize, &self.file, self.at)?;
        self.at += data64;
        Ok(())
    }
}

/// What serve mode answers with.
struct Serve {
    /// The initiator's memory key.
    rkey: Rkey,
    /// Data bytes per answer.
    data: u32,
    /// Bytes of a command SEND.
    cmd_len: u32,
    /// Bytes of a response SEND.
    rsp_len: u32,
    /// With a backend file, each answer's data is read from it first into the answer's own
    /// source buffer (a target's backend read); without, every answer sends the same bytes.
    backend: Option<Backend>,
}

/// Serve mode: each SEND (`cmd_len` bytes; its first byte names the initiator's data slot,
/// 0xff ends the mode) is answered by an RDMA WRITE of `data` bytes into that slot of the
/// initiator's memory (`rkey`) and a SEND of `rsp_len` bytes: an SRP READ's traffic with no
/// SCSI, SRP or port work (with a backend file: plus the backend's read). Waits on CQ
/// notifications, as the target's loop does. Returns how many it answered.
/// `ready` is called once the receives are posted (the driver starts sending then).
fn serve(
    ep: &Endpoint,
    mem_bytes: usize,
    mut s: Serve,
    ready: impl FnOnce() -> Result<()>,
) -> Result<u64> {
    let (data, cmd_len) = (s.data, s.cmd_len);
    ensure!(
        SERVE_SOURCE + 256 * u64::from(data) <= mem_bytes as u64,
        "answers of {data} bytes do not fit the peer's memory"
    );
    let recv = |i: u64| ep.post_recv(i, ep.sge(i * u64::from(cmd_len), cmd_len));
    for i in 0..SERVE_RECVS as u64 {
        recv(i)?;
    }
    ready()?;
    let mut wcs = Vec::new();
    let mut served = 0;
    loop {
        wcs.clear();
        ep.poll_wait(&mut wcs, std::time::Duration::from_millis(100))?;
        for wc in &wcs {
            if wc.status != WcStatus::Success {
                bail!("peer completion failed: {wc:?}");
            }
            if wc.opcode != WcOpcode::Recv {
                continue;
            }
            let slot = ep.byte_at(wc.wr_id * u64::from(cmd_len))?;
            if slot == 0xff {
                return Ok(served);
            }
            recv(wc.wr_id).context("repost receive")?;
            let remote_addr = IOVA + SERVE_DATA + u64::from(slot) * u64::from(data);
            // A slot is reused only after its response came back, after its WRITE.
            let source = match &mut s.backend {
                Some(b) => {
                    let at = SERVE_SOURCE + u64::from(slot) * u64::from(data);
                    b.read_next(ep, at, data)?;
                    at
                }
                None => SERVE_SOURCE,
            };
            ep.post_chain(vec![
                (
                    served,
                    SendOp::Write {
                        remote_addr,
                        rkey: s.rkey,
                    },
                    ep.sge(source, data),
                ),
                (served, SendOp::Send, ep.sge(SERVE_RSP, s.rsp_len)),
            ])?;
            served += 1;
        }
    }
}
