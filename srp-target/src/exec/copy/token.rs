//! Token-based copy, as Windows ODX uses it (SBC-4 5.11, 5.35; SPC-4 6.20): POPULATE
//! TOKEN makes a 512-byte ROD token that stands for ranges of a LU's blocks as they are
//! now; WRITE USING TOKEN, sent to any LU of this target through any of its IOCs, writes
//! those blocks; RECEIVE ROD TOKEN INFORMATION returns the token and how each ended.
//!
//! The token is of the access-upon-reference type: no data is copied when it is made, and a
//! write to any of its source ranges revokes it (watched as in `watch.rs`), so a WRITE USING
//! TOKEN either writes the blocks as they were at POPULATE TOKEN or fails with TOKEN
//! REVOKED — never a mix. Tokens also end by their inactivity timeout or [`MAX_LIFETIME_S`]
//! after they were made (TOKEN EXPIRED), when a WRITE USING TOKEN with DEL_TKN completes
//! (TOKEN DELETED), or when [`MAX_TOKENS`] newer ones exist (oldest first: TOKEN
//! CANCELLED); the store (`token/store.rs`) remembers why for its last
//! [`store::MAX_TOMBSTONES`] tokens, older ones are TOKEN UNKNOWN. The token's last 384
//! bytes are random (from the kernel), so a token cannot be guessed; its bytes are its
//! authority, as ODX intends. The ROD type "block device zero" (FFFF0001h) writes zeros
//! without a token of ours; any other type is UNSUPPORTED TOKEN TYPE.
//!
//! Results are kept per LU, I_T nexus and list identifier; a second command with the key
//! of one still running is OPERATION IN PROGRESS, and a command answered BUSY leaves no
//! result (its list identifier is unused).

use super::super::{CmdOutput, Exec, LogicalUnit, Nexus, Stop, data_out, good_data};
use super::xcopy::{Order, chunks};
use crate::exec::pr::ItNexus;
use crate::exec::store::MediumWrites;
use scsi::cdb::CopyIn;
use scsi::cdb::CopyOut;
use scsi::cdb::copy::{SA_POPULATE_TOKEN, SA_WRITE_USING_TOKEN};
use scsi::copy::{PopulateToken, Range, WriteUsingToken};
use scsi::{BlockCount, Lba, Sense, SenseCode};
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

mod store;

pub use store::MAX_TOMBSTONES;
pub(crate) use store::Tokens;
use store::{Ended, Gone, Key};

/// MAXIMUM TOKEN LIFETIME in seconds (VPD 8Fh 0106h): a token expires this long after
/// POPULATE TOKEN made it, however often it is used.
pub const MAX_LIFETIME_S: u32 = 600;

/// One live token.
#[derive(Debug)]
pub(crate) struct Token {
    bytes: Box<[u8; TOKEN_BYTES]>,
    source: Weak<LogicalUnit>,
    ranges: Vec<Range>,
    /// Its source ranges' watches: (id, touched).
    watches: Vec<(u64, Arc<AtomicBool>)>,
    inactivity: Duration,
    /// When it was made, and how long from then it lives.
    created: Instant,
    lifetime: Duration,
    last_used: Mutex<Instant>,
}

impl Token {
    fn revoked(&self) -> bool {
        self.watches.iter().any(|(_, t)| t.load(Ordering::Acquire))
    }

    /// Whether, at `now`, it was unused for its inactivity timeout or lived its lifetime.
    fn expired(&self, now: Instant) -> bool {
        let last = *self
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        now.saturating_duration_since(last) >= self.inactivity
            || now.saturating_duration_since(self.created) >= self.lifetime
    }

    /// Why the token is dead at `now`, if it is: its source written or its LU gone, or
    /// expired.
    fn dead(&self, now: Instant) -> Option<Gone> {
        if self.revoked() || self.source.strong_count() == 0 {
            return Some(Gone::Revoked);
        }
        self.expired(now).then_some(Gone::Expired)
    }

    /// Used at `now`: its inactivity timer restarts.
    fn touch(&self, now: Instant) {
        *self
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = now;
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

/// The result key of command `c` sent to `lu` through `nexus`.
fn key(lu: &LogicalUnit, nexus: &Nexus<'_>, list_id: u32) -> Key {
    Key {
        lu: *lu.identity().naa(),
        nexus: nexus.it_nexus(),
        list_id,
    }
}

/// Whether `r` failed, and its sense if it has one (RESERVATION CONFLICT has none).
fn failure_of(r: &Exec) -> (bool, Option<Sense>) {
    match r {
        Ok(o) => (o.status != scsi::Status::Good, o.sense.clone()),
        Err(stop) => (true, super::results::Failure::of(stop).sense),
    }
}

/// Runs token command `action` with result key `k`: OPERATION IN PROGRESS while another
/// with that key runs; the result `body` leaves (blocks, token) is recorded, or nothing
/// when it answered BUSY (it did not run).
fn tracked(lu: &LogicalUnit, k: Key, action: u8, body: impl FnOnce(&mut Ended) -> Exec) -> Exec {
    let run = lu.copy.tokens.begin(k, action)?;
    let mut ended = Ended {
        failed: false,
        sense: None,
        blocks: 0,
        token: None,
    };
    let r = body(&mut ended);
    if matches!(&r, Ok(o) if o.status == scsi::Status::Busy) {
        run.forget();
    } else {
        (ended.failed, ended.sense) = failure_of(&r);
        run.finish(ended);
    }
    r
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
    let k = key(lu, nexus, c.list_id);
    tracked(lu, k, SA_POPULATE_TOKEN, |ended| {
        populate(lu, c, dout, ended, Instant::now())
    })
}

fn populate(lu: &LogicalUnit, c: &CopyOut, dout: &[u8], ended: &mut Ended, now: Instant) -> Exec {
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
        created: now,
        lifetime: Duration::from_secs(MAX_LIFETIME_S.into()),
        last_used: Mutex::new(now),
    };
    t.insert(token, now);
    ended.blocks = blocks;
    ended.token = Some(bytes);
    Ok(CmdOutput {
        data_out_len: len,
        ..CmdOutput::good(0)
    })
}

/// WRITE USING TOKEN to `lu`.
pub(crate) fn write_using_token(
    lu: &LogicalUnit,
    nexus: &Nexus<'_>,
    c: &CopyOut,
    dout: &[u8],
    writes: &MediumWrites<'_>,
) -> Exec {
    let k = key(lu, nexus, c.list_id);
    tracked(lu, k, SA_WRITE_USING_TOKEN, |ended| {
        write_with_token(lu, nexus, c, dout, writes, ended)
    })
}

fn write_with_token(
    lu: &LogicalUnit,
    nexus: &Nexus<'_>,
    c: &CopyOut,
    dout: &[u8],
    writes: &MediumWrites<'_>,
    ended: &mut Ended,
) -> Exec {
    lu.check_writable()?;
    let len = usize::try_from(c.param_len).unwrap_or(usize::MAX);
    if len < WriteUsingToken::LEN {
        return Err(SenseCode::PARAMETER_LIST_LENGTH_ERROR.into());
    }
    let list = data_out(dout, len)?;
    let (h, dst_ranges) = param_list(lu, list, |h: &WriteUsingToken| h.data_len, |h| h.ranges_len)?;
    let token = &h.token[..];
    let rod_type = u32::from_be_bytes([token[0], token[1], token[2], token[3]]);
    let done = CmdOutput {
        data_out_len: len,
        ..CmdOutput::good(0)
    };
    if rod_type == ROD_TYPE_ZERO {
        // The LU's own write, holding nothing: it waits for a copy holding a range (as
        // WRITE SAME does) rather than spoil that copy.
        let ranges: Vec<(u64, u64)> = dst_ranges
            .iter()
            .map(|r| (r.lba, u64::from(r.blocks)))
            .collect();
        let _order = lu.write_order_over(nexus, &ranges)?;
        for r in dst_ranges.iter().filter(|r| r.blocks > 0) {
            zero(writes, Lba(r.lba), r.blocks)?;
            ended.blocks += u64::from(r.blocks);
        }
        return Ok(done);
    }
    if rod_type != ROD_TYPE_AUR {
        // Not a type this copy manager makes or takes (VPD 8Fh 0108h).
        return Err(SenseCode::UNSUPPORTED_TOKEN_TYPE.into());
    }
    if u16::from_be_bytes([token[6], token[7]]) != TOKEN_LENGTH_FIELD {
        return Err(SenseCode::INVALID_TOKEN_LENGTH.into());
    }
    // The permit first: a command answered BUSY did not run, and leaves its token as it was
    // (DEL_TKN included) for the retry.
    let Some(_permit) = lu.copy.permit(lu) else {
        tracing::info!(lu = %lu.identity().unique_name(), "WRITE USING TOKEN answered BUSY: {} copies running", super::manager::TOTAL_CONCURRENT_COPIES);
        return Ok(CmdOutput {
            status: scsi::Status::Busy,
            ..done
        });
    };
    let tokens = &lu.copy.tokens;
    let held = tokens.find(token, Instant::now())?;
    let Some(source) = held.source.upgrade() else {
        tokens.retire(&held, Gone::Revoked);
        return Err(SenseCode::TOKEN_REVOKED.into());
    };
    let r = if source.block_bytes() != lu.block_bytes() {
        Err(SenseCode::INCORRECT_COPY_TARGET_DEVICE_TYPE.into())
    } else {
        copy_ranges(&held, &source, writes, &dst_ranges, h.offset, nexus, ended)
    };
    // DEL_TKN (SBC-4 5.35): the token is deleted when the command completes, failed or
    // not; an aborted command (task management) did not complete, so it keeps its token.
    let aborted = nexus.aborted();
    if h.del_tkn && !aborted {
        tokens.retire(&held, Gone::Deleted);
    }
    r?;
    if held.revoked() {
        // The source was written while it was read: what was written is not the token's.
        tokens.retire(&held, Gone::Revoked);
        return Err(SenseCode::TOKEN_REVOKED.into());
    }
    Ok(done)
}

/// Writes `dst` from the token's source ranges, from OFFSET INTO ROD `offset` on, one
/// contiguous piece at a time (durable, with the write cache off, when the command ends:
/// its rule), the
/// copy loop counting in `ended.blocks` the blocks written (so a failure reports how far
/// it got, for RECEIVE ROD TOKEN INFORMATION).
fn copy_ranges(
    held: &Token,
    source: &LogicalUnit,
    writes: &MediumWrites<'_>,
    dst: &[Range],
    mut offset: u64,
    nexus: &Nexus<'_>,
    ended: &mut Ended,
) -> Result<(), Stop> {
    let mut src = held.ranges.iter().flat_map(|r| {
        let skip = offset.min(u64::from(r.blocks));
        offset -= skip;
        (skip < u64::from(r.blocks)).then_some((r.lba + skip, u64::from(r.blocks) - skip))
    });
    let mut cur: Option<(u64, u64)> = src.next();
    for d in dst.iter().filter(|r| r.blocks > 0) {
        let (mut dl, mut left) = (d.lba, u64::from(d.blocks));
        while left > 0 {
            let Some((sl, avail)) = cur else {
                return Ok(());
            };
            let n = left.min(avail);
            chunks(
                source,
                Lba(sl),
                writes,
                Lba(dl),
                n,
                nexus,
                Order::SHARED,
                &mut ended.blocks,
            )?;
            dl += n;
            left -= n;
            cur = if n == avail {
                src.next()
            } else {
                Some((sl + n, avail - n))
            };
        }
    }
    Ok(())
}

/// Zeros `blocks` blocks at `lba`: deallocated where the backend can (they read as zeros),
/// else written.
fn zero(writes: &MediumWrites<'_>, lba: Lba, blocks: u32) -> Result<(), Stop> {
    let lu = writes.lu();
    if lu.backend.supports_unmap() {
        return writes.unmap(lba, BlockCount(blocks));
    }
    let bs = lu.block_bytes() as u64;
    let per = (super::COPY_CHUNK_BYTES as u64 / bs).max(1);
    let zeros = vec![0u8; (per.min(blocks.into()) * bs) as usize];
    let mut done = 0u64;
    while done < u64::from(blocks) {
        let n = per.min(u64::from(blocks) - done);
        writes.write_at(Lba(lba.0 + done), &zeros[..(n * bs) as usize])?;
        done += n;
    }
    Ok(())
}

/// RECEIVE ROD TOKEN INFORMATION: how the token operation with this list identifier,
/// sent to this LU by this I_T nexus, stands, with the token POPULATE TOKEN made.
pub(crate) fn rod_token_information(
    lu: &LogicalUnit,
    n: ItNexus,
    c: &CopyIn,
    din: &mut Vec<u8>,
) -> Exec {
    let k = Key {
        lu: *lu.identity().naa(),
        nexus: n,
        list_id: c.list_id,
    };
    let Some(o) = lu.copy.tokens.result(k) else {
        return Err(Sense::invalid_field_in_cdb(2, Some(7)).into());
    };
    let (status, completion, blocks, token, sense) = match &o.ended {
        // 11h: in progress, in the foreground (the command has not completed).
        None => (0x11, 0x00, 0, None, Vec::new()),
        Some(e) => {
            let sense = match &e.sense {
                Some(s) => {
                    let mut b = vec![0u8; s.buffer_len()];
                    s.emit(&mut b)
                        .map_err(|_| Stop::from(SenseCode::INTERNAL_TARGET_FAILURE))?;
                    b
                }
                None => Vec::new(),
            };
            let (status, completion) = if e.failed { (0x02, 0x02) } else { (0x01, 0x00) };
            (status, completion, e.blocks, e.token.as_ref(), sense)
        }
    };
    din.resize(32, 0);
    din[4] = o.action;
    din[5] = status; // COPY OPERATION STATUS
    din[12] = completion; // COMPLETION STATUS: the command's status
    din[13] = sense.len() as u8; // LENGTH OF THE SENSE DATA FIELD
    din[14] = sense.len() as u8; // SENSE DATA LENGTH
    din[15] = 0xf1; // TRANSFER COUNT UNITS: logical blocks
    din[16..24].copy_from_slice(&blocks.to_be_bytes());
    din.extend_from_slice(&sense);
    match token {
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
