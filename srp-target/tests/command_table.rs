//! The supported-command table of docs/target.md is the target's: it equals the table made
//! from the opcode table ([`srp_target::exec::commands::markdown`]), every supported
//! command has a description, and the table's (opcode, service action, CDB length) rows are
//! exactly what REPORT SUPPORTED OPERATION CODES answers. When a command is added, this test
//! fails until docs/target.md is regenerated: `SRP_BLESS=1 cargo test -p srp-target --test
//! command_table` rewrites the table between its markers.

mod common;

use common::*;
use srp_target::BlockSize;
use srp_target::exec::commands::{describe, markdown};
use srp_target::exec::supported_opcodes;

const BEGIN: &str =
    "<!-- supported-commands:begin (generated: see srp-target/tests/command_table.rs) -->\n";
const END: &str = "<!-- supported-commands:end -->";

fn doc_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/target.md")
}

#[test]
fn every_supported_command_is_described() {
    for info in supported_opcodes() {
        assert!(
            describe(info.opcode, info.service_action).is_some(),
            "{} ({:02x}h/{:?}) has no description in exec::commands::describe",
            info.name,
            info.opcode,
            info.service_action
        );
    }
}

#[test]
fn the_documented_table_is_the_generated_one() {
    let path = doc_path();
    let doc = std::fs::read_to_string(&path).expect("docs/target.md");
    let (start, end) = match (doc.find(BEGIN), doc.find(END)) {
        (Some(s), Some(e)) if s < e => (s + BEGIN.len(), e),
        _ => panic!("docs/target.md lacks the supported-commands markers"),
    };
    let want = markdown();
    if doc[start..end] != want {
        if std::env::var_os("SRP_BLESS").is_some() {
            let new = format!("{}{want}{}", &doc[..start], &doc[end..]);
            std::fs::write(&path, new).expect("rewrite docs/target.md");
            return;
        }
        panic!(
            "docs/target.md's supported-command table is stale; regenerate it with \
             `SRP_BLESS=1 cargo test -p srp-target --test command_table`. It should be:\n{want}"
        );
    }
}

/// (opcode, service action, CDB length) of each documented row.
fn documented_rows() -> Vec<(u8, Option<u8>, usize)> {
    let hex = |t: &str| u8::from_str_radix(t.trim().trim_end_matches('h'), 16).ok();
    markdown()
        .lines()
        .skip(2)
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            (
                hex(cells[0]).expect("opcode"),
                hex(cells[1]),
                cells[3].parse().expect("CDB length"),
            )
        })
        .collect()
}

#[test]
fn the_table_is_what_report_supported_operation_codes_answers() {
    let lu = ram_lu(64, BlockSize::B512);
    // All commands, REPORTING OPTIONS 000b: 8-byte descriptors (no timeouts: RCTD=0).
    let d = good(&lu, &[0xa3, 0x0c, 0, 0, 0, 0, 0, 0, 0x40, 0, 0, 0], &[]);
    let len = u32::from_be_bytes(d[..4].try_into().expect("4")) as usize;
    assert_eq!(len, d.len() - 4);
    let answered: Vec<(u8, Option<u8>, usize)> = d[4..]
        .chunks(8)
        .map(|c| {
            let servactv = c[5] & 0x01 != 0;
            let sa = u16::from_be_bytes([c[2], c[3]]);
            (
                c[0],
                servactv.then_some(sa as u8),
                usize::from(u16::from_be_bytes([c[6], c[7]])),
            )
        })
        .collect();
    assert_eq!(answered, documented_rows());
}
