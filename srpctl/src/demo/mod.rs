//! `srpctl demo`: the live demo (target + host on loopback, I/O verified, [`live`]) and,
//! with `--wire`, the wire-level walk-through of every message ([`wire`]).

mod live;
mod wire;

use anyhow::Result;

/// Runs the live demo, or the wire walk-through.
pub(crate) fn run(wire: bool, dump: bool) -> Result<()> {
    if wire { wire::run(dump) } else { live::run() }
}
