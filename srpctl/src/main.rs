//! `srpctl`: the operator's command line for the SRP storage stack.
//!
//! Today: `decode` (any SRP IU, RDMA-CM login, CDB, sense data or MAD, field by field) and
//! `demo` (the discovery, login and I/O messages of a host and a target on embedded defaults,
//! encoded, decoded and checked). Running targets and hosts, discovery, login, paths, drills
//! and benchmarks join as their layers land.

mod decode;
mod demo;
mod hex;

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// Command line for the SRP (SCSI RDMA Protocol) target, initiator and multipath stack.
#[derive(Parser, Debug)]
#[command(name = "srpctl", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Decode wire bytes field by field (SRP IU, RDMA-CM login, CDB, sense data, MAD).
    Decode {
        /// What the bytes are.
        #[arg(value_enum)]
        kind: decode::Kind,
        /// A file of raw bytes, or `-` to read hex text from stdin.
        file: Option<PathBuf>,
        /// The bytes as hex text (spaces, colons, `0x` and `#` comments allowed).
        #[arg(long)]
        hex: Option<String>,
        /// Immediate-data offset negotiated at login, for SRP_CMD.
        #[arg(long, default_value_t = srp::wire::cmd::DEFAULT_IMM_DATA_OFFSET)]
        imm_offset: u16,
    },
    /// Build the discovery, login and I/O messages of a host and a target on embedded
    /// defaults; encode, decode and re-encode each one and check every byte.
    Demo {
        /// Also print every message as a hex dump.
        #[arg(long)]
        dump: bool,
    },
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Decode {
            kind,
            file,
            hex,
            imm_offset,
        } => {
            let bytes = hex::read_input(hex.as_deref(), file.as_deref())?;
            let text = decode::decode(kind, &bytes, imm_offset)?;
            print!("{text}");
            Ok(())
        }
        Command::Demo { dump } => demo::run(dump),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
