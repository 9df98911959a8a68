//! The passive side of `srpctl bench hca`, run as a separate process (`srpctl bench-peer`)
//! and driven over stdin/stdout: it answers RDMA WRITE and READ as any responder does, and
//! echoes SENDs in ping-pong mode.

use super::endpoint::Endpoint;
use anyhow::{Context, Result, bail};
use hca::ids::Qpn;
use hca::verbs::{SendOp, WcOpcode, WcStatus};
use hca::wire::PathMtu;
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
                pong(&ep, n.parse()?, size.parse()?)?;
                say("PONGED".into())?;
            }
            ["QUIT"] => break,
            other => bail!("unknown command {other:?}"),
        }
    }
    Ok(())
}

/// Answers `n` SENDs of `size` bytes with a SEND of the same size.
fn pong(ep: &Endpoint, n: u64, size: u32) -> Result<()> {
    for i in 0..8 {
        ep.post_recv(i, ep.sge(0, size))?;
    }
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
