//! Persist through power loss (APTPL, SPC-4 5.13.5): when the last successful REGISTER (or
//! REGISTER AND IGNORE EXISTING KEY) had APTPL=1, the reservation state — every
//! registration, the reservation, PRGENERATION — is written to the LU's file in the target's
//! state directory before each service action that changes it answers GOOD, atomically and
//! durably (`crate::state`): a target killed at any moment restarts with the state of the
//! last acknowledged action. A REGISTER with APTPL=0 deactivates it and removes the file. A
//! state that cannot be written is not acknowledged: the action is undone and answered
//! INTERNAL TARGET FAILURE. At start the file, if present, is the LU's state ([`load`]); a
//! damaged one stops the LU with a clear error rather than dropping reservations a cluster
//! depends on.

use super::{ItNexus, PrState, Registration, ResType, Reservation};
use crate::lu::RelativePortId;
use scsi::cdb::PrType;
use serde::{Deserialize, Serialize};
use srp::wire::PortId;
use std::path::Path;

/// A saved reservation state, to start a LU from ([`load`]).
#[derive(Clone, Debug)]
pub struct SavedPr(pub(crate) PrState);

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    generation: u32,
    #[serde(default, rename = "registration")]
    registrations: Vec<FileReg>,
    reservation: Option<FileRes>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileReg {
    /// The initiator port identifier, `0x` and 32 hex digits.
    initiator: String,
    /// The relative target port.
    port: u16,
    /// The key, "0x" and 16 hex digits (a u64 does not fit TOML's integers).
    key: String,
    all_tg_pt: bool,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRes {
    initiator: String,
    port: u16,
    /// The TYPE code (SPC-4 table 47).
    r#type: u8,
}

/// An identifier as the file holds it: its `Display` form, `0x` and 32 hex digits.
fn port_id(text: &str) -> Result<PortId, String> {
    text.parse().map_err(|e| format!("initiator {text:?}: {e}"))
}

/// A TYPE code this target supports.
fn res_type(code: u8) -> Result<ResType, String> {
    ResType::from_pr(PrType::from(code))
        .ok_or_else(|| format!("reservation type {code:#x} is not one this target uses"))
}

/// The file's text for `st`.
pub(crate) fn to_text(st: &PrState) -> String {
    let file = File {
        generation: st.generation,
        registrations: st
            .regs
            .iter()
            .map(|r| FileReg {
                initiator: r.nexus.initiator.to_string(),
                port: r.nexus.port.0,
                key: format!("{:#018x}", r.key),
                all_tg_pt: r.all_tg_pt,
            })
            .collect(),
        reservation: st.res.map(|r| FileRes {
            initiator: r.holder.initiator.to_string(),
            port: r.holder.port.0,
            r#type: r.kind as u8,
        }),
    };
    let body = toml::to_string(&file).unwrap_or_default();
    format!("# srp-target persistent reservations (APTPL): restored at start\n{body}")
}

/// The state saved at `path`, or `None` if there is none; an error names what is wrong.
pub fn load(path: &Path) -> Result<Option<SavedPr>, String> {
    let Some(bytes) = crate::state::read_if_present(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?
    else {
        return Ok(None);
    };
    let bad = |e: String| format!("{}: {e}", path.display());
    let text = std::str::from_utf8(&bytes).map_err(|_| bad("not UTF-8".into()))?;
    let f: File = toml::from_str(text).map_err(|e| bad(e.to_string()))?;
    let mut regs = Vec::new();
    for r in &f.registrations {
        let key = r
            .key
            .strip_prefix("0x")
            .and_then(|k| u64::from_str_radix(k, 16).ok())
            .ok_or_else(|| bad(format!("key {:?}: not 0x and hex", r.key)))?;
        regs.push(Registration {
            nexus: ItNexus {
                initiator: port_id(&r.initiator).map_err(bad)?,
                port: RelativePortId(r.port),
            },
            key,
            all_tg_pt: r.all_tg_pt,
        });
    }
    let res = match &f.reservation {
        Some(r) => Some(Reservation {
            holder: ItNexus {
                initiator: port_id(&r.initiator).map_err(bad)?,
                port: RelativePortId(r.port),
            },
            kind: res_type(r.r#type).map_err(bad)?,
        }),
        None => None,
    };
    if let Some(r) = res {
        if !r.kind.all_registrants() && !regs.iter().any(|g| g.nexus == r.holder) {
            return Err(bad("the reservation's holder is not registered".into()));
        }
    }
    Ok(Some(SavedPr(PrState {
        generation: f.generation,
        regs,
        res,
        ptpl: true,
        // SCSI-2 reservations do not survive a restart.
        scsi2: None,
    })))
}

/// Makes the file at `path` agree with `st`: written when persistence is active, removed
/// when it was just deactivated.
pub(crate) fn store(path: &Path, before: &PrState, st: &PrState) -> std::io::Result<()> {
    if st.ptpl {
        return crate::state::write_atomically(path, to_text(st).as_bytes());
    }
    if before.ptpl {
        crate::state::remove_durably(path)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_survives_its_file() {
        let (a, b) = (ItNexus::test(0xa0, 1), ItNexus::test(0xb0, 2));
        let st = PrState {
            generation: 7,
            regs: vec![
                Registration {
                    nexus: a,
                    key: u64::MAX - 1,
                    all_tg_pt: false,
                },
                Registration {
                    nexus: b,
                    key: 0xb2,
                    all_tg_pt: true,
                },
            ],
            res: Some(Reservation {
                holder: a,
                kind: ResType::WriteExclusiveRegistrantsOnly,
            }),
            ptpl: true,
            // A SCSI-2 reservation is not saved: it does not come back.
            scsi2: Some(b),
        };
        let dir = std::env::temp_dir().join(format!("srpt-pr-{}", std::process::id()));
        let path = dir.join("lun-x.pr");
        store(&path, &PrState::default(), &st).expect("store");
        let back = load(&path).expect("load").expect("present").0;
        assert_eq!(back.generation, 7);
        assert_eq!(back.regs, st.regs);
        assert_eq!(back.res, st.res);
        assert!(back.ptpl);
        assert_eq!(back.scsi2, None);
        // Deactivated: the file goes.
        let off = PrState {
            ptpl: false,
            ..st.clone()
        };
        store(&path, &st, &off).expect("remove");
        assert!(load(&path).expect("load").is_none());
        // Damage is named.
        std::fs::write(
            &path,
            "generation = 1\n[reservation]\ninitiator = \"zz\"\nport = 1\ntype = 5\n",
        )
        .expect("write");
        let e = load(&path).expect_err("damaged");
        assert!(e.contains("hexadecimal"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
