//! Token-based copy, as Windows ODX uses it (SBC-4 5.11, 5.35; SPC-4 6.20): POPULATE
//! TOKEN makes a 512-byte ROD token that stands for ranges of a LU's blocks as they are
//! now; WRITE USING TOKEN, sent to any LU of this target through any of its IOCs, writes
//! those blocks; RECEIVE ROD TOKEN INFORMATION returns the token and how each ended.
//!
//! The token is of the access-upon-reference type: no data is copied when it is made, and a
//! write to any of its source ranges revokes it (watched as in `watch.rs`), so a WRITE USING
//! TOKEN either writes the blocks as they were at POPULATE TOKEN or fails with TOKEN
//! REVOKED — never a mix. Tokens also end by their inactivity timeout (TOKEN EXPIRED), by
//! WRITE USING TOKEN with DEL_TKN, or when [`MAX_TOKENS`] newer ones exist (oldest first:
//! TOKEN UNKNOWN). The token's last 384 bytes are random (from the kernel), so a token
//! cannot be guessed; its bytes are its authority, as ODX intends. The ROD type "block
//! device zero" (FFFF0001h) writes zeros without a token of ours.

use super::super::{CmdOutput, Exec, LogicalUnit, Nexus, Stop, data_out, good_data};
use super::xcopy::{Order, chunks};
use crate::exec::pr::ItNexus;
use scsi::cdb::CopyIn;
use scsi::cdb::CopyOut;
use scsi::cdb::copy::{SA_POPULATE_TOKEN, SA_WRITE_USING_TOKEN};
use scsi::copy::{PopulateToken, Range, WriteUsingToken};
use scsi::{BlockCount, Lba, Sense, SenseCode};
use std::collections::VecDeque;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};
use wirekit::WireRepr;

/// MAXIMUM RANGE DESCRIPTORS (VPD 8Fh 0000h).
pub const MAX_RANGES: usize = 64;
/// DEFAULT INACTIVITY TIMEOUT in seconds.
pub const DEFAULT_INACTIVITY_S: u32 = 60;
/// MAXIMUM INACTIVITY TIMEOUT in seconds.
pub const MAX_INACTIVITY_S: u32 = 600;
/// MAXIMUM TOKEN TRANSFER SIZE in bytes: what one token (and so one WRITE USING TOKEN)
/// covers, bounding one command's work as MAXIMUM SEGMENT LENGTH does EXTENDED COPY's.
pub const MAX_TOKEN_BYTES: u64 = 256 << 20;
/// Tokens alive per copy manager; a newer one retires the oldest.
pub const MAX_TOKENS: usize = 1024;
/// ROD TYPE access upon reference: the only type made here.
pub const ROD_TYPE_AUR: u32 = 0x0001_0000;
/// ROD TYPE block device zero: WRITE USING TOKEN writes zeros.
pub const ROD_TYPE_ZERO: u32 = 0xffff_0001;
/// A ROD token's size.
pub const TOKEN_BYTES: usize = scsi::copy::ROD_TOKEN_LEN;
/// The ROD TOKEN LENGTH field: the bytes after the first 8.
const TOKEN_LENGTH_FIELD: u16 = 0x01f8;
/// Results of token operations kept per copy manager (RECEIVE ROD TOKEN INFORMATION).
const MAX_RESULTS: usize = 256;

/// One live token.
#[derive(Debug)]
struct Token {
    bytes: Box<[u8; TOKEN_BYTES]>,
    source: Weak<LogicalUnit>,
    ranges: Vec<Range>,
    /// Its source ranges' watches: (id, touched).
    watches: Vec<(u64, Arc<AtomicBool>)>,
    inactivity: Duration,
    last_used: Mutex<Instant>,
}

impl Token {
    fn revoked(&self) -> bool {
        self.watches.iter().any(|(_, t)| t.load(Ordering::Acquire))
    }

    fn expired(&self, now: Instant) -> bool {
        let last = *self
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        now.duration_since(last) >= self.inactivity
    }
}

impl Drop for Token {
    fn drop(&mut self) {
        if let Some(lu) = self.source.upgrade() {
            for (id, _) in &self.watches {
                lu.unwatch(*id);
            }
        }
    }
}

/// How a token operation ended, for RECEIVE ROD TOKEN INFORMATION.
#[derive(Clone, Debug)]
struct Outcome {
    nexus: ItNexus,
    list_id: u32,
    action: u8,
    failure: Option<Sense>,
    blocks: u64,
    token: Option<Box<[u8; TOKEN_BYTES]>>,
}

/// The tokens of a copy manager and the results of its token operations.
///
/// A WRITE USING TOKEN holds its token (an `Arc`) while it copies, so the token's watches
/// stay even if the token is deleted or retired meanwhile: a write to the source during the
/// copy is seen.
#[derive(Debug, Default)]
pub(crate) struct Tokens {
    live: Mutex<VecDeque<Arc<Token>>>,
    results: Mutex<VecDeque<Outcome>>,
    next_id: std::sync::atomic::AtomicU64,
}

impl Tokens {
    fn record(&self, o: Outcome) {
        let mut r = self.results.lock().unwrap_or_else(PoisonError::into_inner);
        r.retain(|x| (x.nexus, x.list_id) != (o.nexus, o.list_id));
        if r.len() >= MAX_RESULTS {
            r.pop_front();
        }
        r.push_back(o);
    }

    /// Tokens alive now.
    pub(crate) fn live(&self) -> usize {
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// A token parameter list's header `H` (its DATA LENGTH checked against the list), and
/// its range descriptors, checked against `lu` ([`ranges`]).
fn param_list<'a, H: WireRepr<'a, Error = scsi::copy::CopyParamError>>(
    lu: &LogicalUnit,
    list: &'a [u8],
    data_len: impl Fn(&H) -> u16,
    ranges_len: impl Fn(&H) -> u16,
) -> Result<(H, Vec<Range>), Stop> {
    let h = H::parse(list).map_err(|_| Stop::from(SenseCode::PARAMETER_LIST_LENGTH_ERROR))?;
    if usize::from(data_len(&h)) + 2 > list.len() {
        return Err(SenseCode::PARAMETER_LIST_LENGTH_ERROR.into());
    }
    let rs = ranges(lu, list, h.buffer_len(), ranges_len(&h))?;
    Ok((h, rs))
}

/// The range descriptors at `first` of a token parameter list whose BLOCK DEVICE RANGE
/// DESCRIPTOR LIST LENGTH (the two bytes before `first`) is `len`.
fn ranges(lu: &LogicalUnit, list: &[u8], first: usize, len: u16) -> Result<Vec<Range>, Stop> {
    let count_at = first - 2;
    let len = usize::from(len);
    if first + len > list.len() {
        return Err(SenseCode::PARAMETER_LIST_LENGTH_ERROR.into());
    }
    if len % 16 != 0 || len == 0 || len / 16 > MAX_RANGES {
        return Err(Sense::invalid_field_in_parameter_list(count_at as u16, Some(7)).into());
    }
    let mut out = Vec::with_capacity(len / 16);
    for at in (first..first + len).step_by(16) {
        let r = Range::parse(&list[at..at + 16])
            .map_err(|_| Stop::from(SenseCode::PARAMETER_LIST_LENGTH_ERROR))?;
        lu.check_range(Lba(r.lba), BlockCount(r.blocks))?;
        out.push(r);
    }
    let blocks: u64 = out.iter().map(|r| u64::from(r.blocks)).sum();
    if blocks * u64::from(lu.block_bytes()) > MAX_TOKEN_BYTES {
        return Err(Sense::invalid_field_in_parameter_list(count_at as u16, Some(7)).into());
    }
    Ok(out)
}

/// Random bytes from the kernel.
fn random(buf: &mut [u8]) -> Result<(), Stop> {
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(buf))
        .map_err(|e| {
            tracing::error!(error = %e, "POPULATE TOKEN: no random bytes for the token");
            Stop::from(SenseCode::INTERNAL_TARGET_FAILURE)
        })
}

/// POPULATE TOKEN to `lu`.
pub(crate) fn populate_token(
    lu: &LogicalUnit,
    nexus: &Nexus<'_>,
    c: &CopyOut,
    dout: &[u8],
) -> Exec {
    let len = usize::try_from(c.param_len).unwrap_or(usize::MAX);
    if len < PopulateToken::LEN {
        return Err(SenseCode::PARAMETER_LIST_LENGTH_ERROR.into());
    }
    let list = data_out(dout, len)?;
    let (h, rs) = param_list(lu, list, |h: &PopulateToken| h.data_len, |h| h.ranges_len)?;
    if h.rtv && h.rod_type != ROD_TYPE_AUR {
        return Err(Sense::invalid_field_in_parameter_list(8, Some(7)).into());
    }
    let timeout = match h.inactivity_s {
        0 => DEFAULT_INACTIVITY_S,
        t if t > MAX_INACTIVITY_S => {
            return Err(Sense::invalid_field_in_parameter_list(4, Some(7)).into());
        }
        t => t,
    };
    let me = lu
        .self_arc()
        .ok_or(Stop::from(SenseCode::INTERNAL_TARGET_FAILURE))?;
    let mut bytes = Box::new([0u8; TOKEN_BYTES]);
    random(&mut bytes[128..])?;
    let t = &lu.copy.tokens;
    let id = t.next_id.fetch_add(1, Ordering::Relaxed);
    bytes[..4].copy_from_slice(&ROD_TYPE_AUR.to_be_bytes());
    bytes[6..8].copy_from_slice(&TOKEN_LENGTH_FIELD.to_be_bytes());
    bytes[8..16].copy_from_slice(&id.to_be_bytes());
    // CREATOR LOGICAL UNIT DESCRIPTOR: an Identification CSCD descriptor of this LU.
    scsi::copy::IdCscd::for_naa(lu.identity().naa(), lu.block_bytes())
        .emit(&mut bytes[16..48])
        .map_err(|_| Stop::from(SenseCode::INTERNAL_TARGET_FAILURE))?;
    let blocks: u64 = rs.iter().map(|r| u64::from(r.blocks)).sum();
    let represented = u128::from(blocks) * u128::from(lu.block_bytes());
    bytes[48..64].copy_from_slice(&represented.to_be_bytes());
    // Device type specific data: the block length, as READ CAPACITY(16) bytes 8..=11.
    bytes[96..100].copy_from_slice(&lu.block_bytes().to_be_bytes());
    let token = Token {
        bytes: bytes.clone(),
        source: Arc::downgrade(&me),
        watches: rs
            .iter()
            .filter(|r| r.blocks > 0)
            .map(|r| lu.watch_range(Lba(r.lba), r.blocks.into()))
            .collect(),
        ranges: rs,
        inactivity: Duration::from_secs(timeout.into()),
        last_used: Mutex::new(Instant::now()),
    };
    {
        let mut live = t.live.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        live.retain(|x| !x.expired(now));
        while live.len() >= MAX_TOKENS {
            live.pop_front();
        }
        live.push_back(Arc::new(token));
    }
    t.record(Outcome {
        nexus: nexus.it_nexus(),
        list_id: c.list_id,
        action: SA_POPULATE_TOKEN,
        failure: None,
        blocks,
        token: Some(bytes),
    });
    Ok(CmdOutput {
        data_out_len: len,
        ..CmdOutput::good(0)
    })
}

/// What WRITE USING TOKEN reads from: the live token matching `bytes`, checked, and its
/// source LU. With `delete` it leaves the list (the caller's `Arc` keeps it, and its
/// watches, until the copy is done).
fn take_token(
    lu: &LogicalUnit,
    bytes: &[u8],
    delete: bool,
) -> Result<(Arc<Token>, Arc<LogicalUnit>), Stop> {
    if u16::from_be_bytes([bytes[6], bytes[7]]) != TOKEN_LENGTH_FIELD {
        return Err(SenseCode::INVALID_TOKEN_LENGTH.into());
    }
    let mut live = lu
        .copy
        .tokens
        .live
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let i = live
        .iter()
        .position(|t| t.bytes.as_slice() == bytes)
        .ok_or(Stop::from(SenseCode::TOKEN_UNKNOWN))?;
    let now = Instant::now();
    let t = live[i].clone();
    if t.expired(now) {
        live.remove(i);
        return Err(SenseCode::TOKEN_EXPIRED.into());
    }
    if t.revoked() {
        live.remove(i);
        return Err(SenseCode::TOKEN_REVOKED.into());
    }
    let Some(source) = t.source.upgrade() else {
        live.remove(i);
        return Err(SenseCode::TOKEN_REVOKED.into());
    };
    *t.last_used.lock().unwrap_or_else(PoisonError::into_inner) = now;
    if delete {
        live.remove(i);
    }
    Ok((t, source))
}

/// WRITE USING TOKEN to `lu`.
pub(crate) fn write_using_token(
    lu: &LogicalUnit,
    nexus: &Nexus<'_>,
    c: &CopyOut,
    dout: &[u8],
) -> Exec {
    lu.check_writable()?;
    let len = usize::try_from(c.param_len).unwrap_or(usize::MAX);
    if len < WriteUsingToken::LEN {
        return Err(SenseCode::PARAMETER_LIST_LENGTH_ERROR.into());
    }
    let list = data_out(dout, len)?;
    let (h, dst_ranges) = param_list(lu, list, |h: &WriteUsingToken| h.data_len, |h| h.ranges_len)?;
    let (del, mut offset, token) = (h.del_tkn, h.offset, &h.token[..]);
    let rod_type = u32::from_be_bytes([token[0], token[1], token[2], token[3]]);
    let result = |failure: Option<Sense>, blocks| {
        lu.copy.tokens.record(Outcome {
            nexus: nexus.it_nexus(),
            list_id: c.list_id,
            action: SA_WRITE_USING_TOKEN,
            failure,
            blocks,
            token: None,
        });
    };
    let done = CmdOutput {
        data_out_len: len,
        ..CmdOutput::good(0)
    };
    if rod_type == ROD_TYPE_ZERO {
        let _order = lu.write_order();
        let mut blocks = 0u64;
        for r in dst_ranges.iter().filter(|r| r.blocks > 0) {
            lu.durably(Lba(r.lba), r.blocks.into(), lu.durable(false), || {
                zero(lu, Lba(r.lba), r.blocks)
            })?;
            blocks += u64::from(r.blocks);
        }
        result(None, blocks);
        return Ok(done);
    }
    let (held, source) = match take_token(lu, token, del) {
        Ok(t) => t,
        Err(Stop::Check(s)) => {
            result(Some(s.clone()), 0);
            return Err(Stop::Check(s));
        }
        Err(e) => return Err(e),
    };
    if source.block_bytes() != lu.block_bytes() {
        let s = Sense::new(SenseCode::INCORRECT_COPY_TARGET_DEVICE_TYPE);
        result(Some(s.clone()), 0);
        return Err(Stop::Check(s));
    }
    let Some(_permit) = lu.copy.permit(lu) else {
        tracing::info!(lu = %lu.identity().unique_name(), "WRITE USING TOKEN answered BUSY: {} copies running", super::manager::TOTAL_CONCURRENT_COPIES);
        return Ok(CmdOutput {
            status: scsi::Status::Busy,
            ..done
        });
    };
    // Walk the source ranges from OFFSET INTO ROD alongside the destination ranges.
    let mut copy = || -> Result<u64, Stop> {
        let mut src = held.ranges.iter().flat_map(|r| {
            let skip = offset.min(u64::from(r.blocks));
            offset -= skip;
            (skip < u64::from(r.blocks)).then_some((r.lba + skip, u64::from(r.blocks) - skip))
        });
        let mut copied = 0u64;
        let mut cur: Option<(u64, u64)> = src.next();
        for d in dst_ranges.iter().filter(|r| r.blocks > 0) {
            let (mut dl, mut left) = (d.lba, u64::from(d.blocks));
            while left > 0 {
                let Some((sl, avail)) = cur else {
                    return Ok(copied);
                };
                let n = left.min(avail);
                chunks(&source, Lba(sl), lu, Lba(dl), n, nexus, Order::SHARED)?;
                copied += n;
                dl += n;
                left -= n;
                cur = if n == avail {
                    src.next()
                } else {
                    Some((sl + n, avail - n))
                };
            }
        }
        Ok(copied)
    };
    let copied = match copy() {
        Ok(n) => n,
        Err(Stop::Check(s)) => {
            // How it ended, for RECEIVE ROD TOKEN INFORMATION.
            result(Some(s.clone()), 0);
            return Err(Stop::Check(s));
        }
        Err(e) => return Err(e),
    };
    if held.revoked() {
        // The source was written while it was read: what was written is not the token's.
        let s = Sense::new(SenseCode::TOKEN_REVOKED);
        result(Some(s.clone()), copied);
        return Err(Stop::Check(s));
    }
    result(None, copied);
    Ok(done)
}

/// Zeros `blocks` blocks at `lba`: deallocated where the backend can (they read as zeros),
/// else written.
fn zero(lu: &LogicalUnit, lba: Lba, blocks: u32) -> Result<(), Stop> {
    if lu.backend.supports_unmap() {
        return lu
            .backend
            .unmap(lba, BlockCount(blocks))
            .map_err(|e| super::super::backend_sense(&e, SenseCode::WRITE_ERROR, lba));
    }
    let bs = lu.block_bytes() as u64;
    let per = (super::COPY_CHUNK_BYTES as u64 / bs).max(1);
    let zeros = vec![0u8; (per.min(blocks.into()) * bs) as usize];
    let mut done = 0u64;
    while done < u64::from(blocks) {
        let n = per.min(u64::from(blocks) - done);
        lu.backend
            .write_at(Lba(lba.0 + done), &zeros[..(n * bs) as usize])
            .map_err(|e| super::super::backend_sense(&e, SenseCode::WRITE_ERROR, lba))?;
        done += n;
    }
    Ok(())
}

/// RECEIVE ROD TOKEN INFORMATION: how the token operation with this list identifier of
/// this I_T nexus ended, with the token POPULATE TOKEN made.
pub(crate) fn rod_token_information(
    lu: &LogicalUnit,
    n: ItNexus,
    c: &CopyIn,
    din: &mut Vec<u8>,
) -> Exec {
    let o = {
        let r = lu
            .copy
            .tokens
            .results
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        r.iter()
            .find(|o| (o.nexus, o.list_id) == (n, c.list_id))
            .cloned()
    };
    let Some(o) = o else {
        return Err(Sense::invalid_field_in_cdb(2, Some(7)).into());
    };
    let sense = match &o.failure {
        Some(s) => {
            let mut b = vec![0u8; s.buffer_len()];
            s.emit(&mut b)
                .map_err(|_| Stop::from(SenseCode::INTERNAL_TARGET_FAILURE))?;
            b
        }
        None => Vec::new(),
    };
    din.resize(32, 0);
    din[4] = o.action;
    din[5] = if o.failure.is_some() { 0x02 } else { 0x01 }; // COPY OPERATION STATUS
    din[12] = if o.failure.is_some() { 0x02 } else { 0x00 }; // completion status
    din[13] = sense.len() as u8; // LENGTH OF THE SENSE DATA FIELD
    din[14] = sense.len() as u8; // SENSE DATA LENGTH
    din[15] = 0xf1; // TRANSFER COUNT UNITS: logical blocks
    din[16..24].copy_from_slice(&o.blocks.to_be_bytes());
    din.extend_from_slice(&sense);
    match &o.token {
        Some(t) => {
            din.extend_from_slice(&((TOKEN_BYTES + 2) as u32).to_be_bytes());
            din.extend_from_slice(&[0, 0]);
            din.extend_from_slice(t.as_slice());
        }
        None => din.extend_from_slice(&[0; 4]),
    }
    let len = (din.len() - 4) as u32;
    din[..4].copy_from_slice(&len.to_be_bytes());
    good_data(din, usize::try_from(c.alloc_len).unwrap_or(usize::MAX))
}
