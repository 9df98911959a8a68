//! MODE SENSE(6/10) and MODE SELECT(6/10) (SPC-4 6.11-6.14): the caching page (08h) and the
//! control page (0Ah, nothing changeable).
//!
//! WCE is changeable only where the configuration allows it (`[[lun]]
//! write_cache_changeable`); elsewhere it is the configuration's, the changeable mask says
//! so, and a MODE SELECT that changes it is INVALID FIELD IN PARAMETER LIST. Where it is
//! changeable the caching page is also savable (PS=1): MODE SELECT with SP=1 — which Linux
//! sd sends when PS is set — writes the page to the target's state directory atomically
//! (`crate::state`) before changing it, the LU starts from the saved page, and MODE SENSE
//! reports it as the saved values. SP=0 changes the current value only.

use super::ua::To;
use super::{CmdOutput, Exec, LogicalUnit, Nexus, Stop, data_out, good_data};
use scsi::cdb::{ModeCdb, ModeSelect, ModeSense, PageControl};
use scsi::{Sense, SenseCode};

const CACHING: u8 = 0x08;
const CONTROL: u8 = 0x0a;
const ALL_PAGES: u8 = 0x3f;
/// WCE in byte 2 of the caching page.
const WCE: u8 = 0x04;
/// Device-specific parameter: WP, DPOFUA.
const WP: u8 = 0x80;
const DPOFUA: u8 = 0x10;

/// PS in byte 0 of a page: the page is savable.
const PS: u8 = 0x80;

/// The caching page for `pc`.
fn caching_page(lu: &LogicalUnit, pc: PageControl) -> [u8; 20] {
    let mut p = [0u8; 20];
    p[0] = CACHING | if lu.mode.savable() { PS } else { 0 };
    p[1] = 0x12;
    let wce = match pc {
        PageControl::Changeable => lu.mode.wce_changeable,
        PageControl::Default => lu.mode.default_wce,
        PageControl::Current => lu.write_cache(),
        PageControl::Saved => lu.mode.saved_wce().unwrap_or(lu.mode.default_wce),
    };
    p[2] = if wce { WCE } else { 0 };
    p
}

/// How a logical unit's caching page may change, and where it is saved.
#[derive(Debug)]
pub(crate) struct ModeState {
    /// MODE SELECT may change WCE.
    pub(crate) wce_changeable: bool,
    /// WCE as configured (the default values).
    pub(crate) default_wce: bool,
    /// Where the page is saved (changeable LUs with a state directory).
    pub(crate) saved_at: Option<std::path::PathBuf>,
    /// The saved WCE, once a page has been saved (or was found at start).
    pub(crate) saved: std::sync::Mutex<Option<bool>>,
}

impl ModeState {
    fn savable(&self) -> bool {
        self.wce_changeable && self.saved_at.is_some()
    }

    fn saved_wce(&self) -> Option<bool> {
        *self
            .saved
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Saves WCE `on` (atomically and durably), then remembers it as the saved value.
    fn save(&self, on: bool) -> std::io::Result<()> {
        let Some(path) = &self.saved_at else {
            return Ok(());
        };
        crate::state::write_atomically(path, saved_page_text(on).as_bytes())?;
        *self
            .saved
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(on);
        Ok(())
    }
}

/// A saved caching page as its file holds it.
fn saved_page_text(wce: bool) -> String {
    format!("# srp-target saved mode page: caching (08h)\nwce = {wce}\n")
}

/// Reads a saved caching page: its WCE, `None` if none was saved; an error names what is
/// wrong with the file (the LUN does not start on a page it cannot read).
pub fn load_saved_wce(path: &std::path::Path) -> Result<Option<bool>, String> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Saved {
        wce: bool,
    }
    let Some(bytes) = crate::state::read_if_present(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?
    else {
        return Ok(None);
    };
    let text = std::str::from_utf8(&bytes).map_err(|_| format!("{}: not UTF-8", path.display()))?;
    toml::from_str::<Saved>(text)
        .map(|s| Some(s.wce))
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// The control page for `pc`: QUEUE ALGORITHM MODIFIER 1 (unrestricted reordering),
/// nothing changeable.
fn control_page(pc: PageControl) -> [u8; 12] {
    let mut p = [0u8; 12];
    p[0] = CONTROL;
    p[1] = 0x0a;
    if pc != PageControl::Changeable {
        p[3] = 0x10;
    }
    p
}

/// MODE SENSE(6/10).
pub(crate) fn mode_sense(lu: &LogicalUnit, m: &ModeSense, din: &mut Vec<u8>) -> Exec {
    if m.pc == PageControl::Saved && !lu.mode.savable() {
        return Err(SenseCode::SAVING_PARAMETERS_NOT_SUPPORTED.into());
    }
    // Subpages: only 00h, or FFh with all pages.
    if m.subpage != 0 && !(m.page == ALL_PAGES && m.subpage == 0xff) {
        return Err(Sense::invalid_field_in_cdb(3, Some(7)).into());
    }
    let mut pages = Vec::new();
    match m.page {
        CACHING => pages.extend(caching_page(lu, m.pc)),
        CONTROL => pages.extend(control_page(m.pc)),
        ALL_PAGES => {
            pages.extend(caching_page(lu, m.pc));
            pages.extend(control_page(m.pc));
        }
        _ => return Err(Sense::invalid_field_in_cdb(2, Some(5)).into()),
    }
    let mut bd = Vec::new();
    if !m.dbd {
        let blocks = lu.backend().blocks();
        let bs = lu.block_bytes().to_be_bytes();
        if m.llbaa {
            bd.extend(blocks.to_be_bytes());
            bd.extend([0, 0, 0, 0]);
            bd.extend(bs);
        } else {
            bd.extend(u32::try_from(blocks).unwrap_or(u32::MAX).to_be_bytes());
            bd.extend([0, bs[1], bs[2], bs[3]]);
        }
    }
    let dev = if lu.read_only() { WP | DPOFUA } else { DPOFUA };
    match m.cdb {
        ModeCdb::Six => {
            let total = 4 + bd.len() + pages.len();
            // MODE DATA LENGTH excludes itself; at most 4 + 8 + 32 bytes.
            din.extend([(total - 1) as u8, 0, dev, bd.len() as u8]);
        }
        ModeCdb::Ten => {
            let total = 8 + bd.len() + pages.len();
            din.extend(((total - 2) as u16).to_be_bytes());
            din.extend([0, dev, u8::from(m.llbaa), 0]);
            din.extend((bd.len() as u16).to_be_bytes());
        }
    }
    din.extend(bd);
    din.extend(pages);
    good_data(din, m.alloc_len.into())
}

/// MODE SELECT(6/10): WCE is the only changeable field; any other difference from the
/// current page is INVALID FIELD IN PARAMETER LIST at that byte (SPC-4 6.11).
pub(crate) fn mode_select(
    lu: &LogicalUnit,
    nexus: &Nexus<'_>,
    m: &ModeSelect,
    dout: &[u8],
) -> Exec {
    if m.sp && !lu.mode.savable() {
        return Err(SenseCode::SAVING_PARAMETERS_NOT_SUPPORTED.into());
    }
    let len = usize::from(m.param_len);
    if len == 0 {
        return Ok(CmdOutput::good(0));
    }
    let (hdr, bd_len) = match m.cdb {
        ModeCdb::Six if len >= 4 => (4, dout_byte(dout, 3).map(usize::from)),
        ModeCdb::Ten if len >= 8 => (
            8,
            dout_byte(dout, 6)
                .zip(dout_byte(dout, 7))
                .map(|(a, b)| usize::from(u16::from_be_bytes([a, b]))),
        ),
        _ => return Err(SenseCode::PARAMETER_LIST_LENGTH_ERROR.into()),
    };
    let list = data_out(dout, len)?;
    let bd_len = bd_len.unwrap_or(0);
    if hdr + bd_len > len {
        return Err(SenseCode::PARAMETER_LIST_LENGTH_ERROR.into());
    }
    // Block descriptors would change capacity or block size: we accept them only as they
    // are, and do not check them (Linux sends none with MODE SELECT of the caching page).
    let mut at = hdr + bd_len;
    let mut wce = None;
    while at < len {
        let (code, plen) = match (list.get(at), list.get(at + 1)) {
            (Some(&c), Some(&l)) => (c, usize::from(l)),
            _ => return Err(SenseCode::PARAMETER_LIST_LENGTH_ERROR.into()),
        };
        let page = list
            .get(at..at + 2 + plen)
            .ok_or(Stop::from(SenseCode::PARAMETER_LIST_LENGTH_ERROR))?;
        let field = |i: usize| Sense::invalid_field_in_parameter_list((at + i) as u16, None);
        // PS is reserved in MODE SELECT; SPF (subpage format) pages we do not have.
        match code & 0x7f {
            CACHING => {
                let cur = caching_page(lu, PageControl::Current);
                if plen != cur.len() - 2 {
                    return Err(field(1).into());
                }
                let changeable = caching_page(lu, PageControl::Changeable);
                if let Some(i) = (2..cur.len()).find(|&i| (page[i] ^ cur[i]) & !changeable[i] != 0)
                {
                    return Err(field(i).into());
                }
                wce = Some(page[2] & WCE != 0);
            }
            CONTROL => {
                let cur = control_page(PageControl::Current);
                if plen != cur.len() - 2 {
                    return Err(field(1).into());
                }
                if let Some(i) = (2..cur.len()).find(|&i| page[i] != cur[i]) {
                    return Err(field(i).into());
                }
            }
            _ => return Err(field(0).into()),
        }
        at += 2 + plen;
    }
    // Applied only once the whole list is valid; with SP=1 saved first (a page that cannot
    // be saved changes nothing); a change is news to every other I_T nexus (SPC-4: MODE
    // PARAMETERS CHANGED).
    if let (Some(on), true) = (wce, m.sp) {
        lu.mode.save(on).map_err(|e| {
            tracing::error!(
                lun = %lu.identity().unique_name(),
                error = %e,
                "MODE SELECT: the caching page could not be saved; nothing changed"
            );
            Stop::from(SenseCode::INTERNAL_TARGET_FAILURE)
        })?;
    }
    if let Some(on) = wce {
        if on != lu.write_cache() {
            lu.set_write_cache(on);
            let me = nexus.it_nexus();
            lu.unit_attention(To::AllBut(me), SenseCode::MODE_PARAMETERS_CHANGED);
        }
    }
    Ok(CmdOutput {
        data_out_len: len,
        ..CmdOutput::good(0)
    })
}

fn dout_byte(dout: &[u8], i: usize) -> Option<u8> {
    dout.get(i).copied()
}
