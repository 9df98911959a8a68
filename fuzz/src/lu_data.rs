//! `lu_data`: the commands whose data-out is a structure, through
//! [`srp_target::LogicalUnit::execute`] against a shadow: UNMAP parameter lists (good,
//! bad headers, descriptors out of range or too long, trailing partial descriptors, short
//! data-out), WRITE SAME(10/16) (UNMAP and ANCHOR bits, zero and pattern blocks), MODE
//! SELECT(6/10) parameter lists (the current pages with WCE flipped or another byte
//! changed, block descriptors, junk) and MODE SENSE(6/10), EXTENDED COPY parameter lists
//! (one or two segments within the LU, by NAA or FFFFh, overlapping or not; bad indices,
//! ranges past the medium, a mutated descriptor, short lists), ODX token copies (POPULATE
//! TOKEN of one or two ranges, RECEIVE ROD TOKEN INFORMATION, perhaps a write to the source,
//! WRITE USING TOKEN with an offset, a mutated token, bad ranges), ORWRITE, WRITE AND VERIFY
//! and WRITE ATOMIC, with READ and WRITE between.
//!
//! The shadow is the medium's bytes and the mode pages. After every step the whole medium
//! reads back as the shadow says: a completed UNMAP zeroed exactly its descriptors' blocks
//! (LBPRZ=1), a completed WRITE SAME wrote its block over its range, and a refused command
//! changed nothing. A refused MODE SELECT leaves MODE SENSE as it was; a completed one
//! changed WCE at most, to what its caching page said, and another I_T nexus is told
//! (MODE PARAMETERS CHANGED) exactly when WCE changed. A completed EXTENDED COPY moved
//! each segment as `memmove` would; one refused (COPY ABORTED for a segment it cannot
//! reach, or any other error) moved nothing — the target checks the whole list first. A WRITE USING TOKEN after a
//! write to the token's source is TOKEN REVOKED and writes nothing; otherwise it writes the
//! source's blocks from the offset on (where its destination overlaps its own source the
//! result is undefined by SBC-4 and only the answer is checked). Well-formed commands in
//! range must complete. Every outcome passes [`crate::scsi_lu::exec`]'s checks.

use crate::input::Input;
use crate::scsi_lu::{BLOCK, BLOCKS, exec, ram_lu, rw10};
use scsi::{SenseCode, Status};
use srp_target::LogicalUnit;
use srp_target::io::NexusInfo;

/// Steps per input.
const MAX_STEPS: usize = 64;
/// The medium in bytes.
const BYTES: usize = BLOCKS as usize * BLOCK;

/// One input.
pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let wce_changeable = input.bool();
    let nexuses = crate::scsi_lu::nexuses();
    let mut h = Harness {
        // Shared, as a target's LUs are: POPULATE TOKEN's tokens point back to it.
        lu: ram_lu(wce_changeable).into_shared(),
        me: &nexuses[0],
        peer: &nexuses[2],
        disk: vec![0; BYTES],
        peer_told: false,
        wce_changeable,
    };
    // The peer is known to the LU from its first command on.
    assert!(exec(&h.lu, h.peer, &[0; 6], &[]).good());
    let mut steps = 0;
    while !input.is_empty() && steps < MAX_STEPS {
        match input.below(16) {
            0 | 1 => h.write(&mut input),
            2 => h.read(&mut input),
            3..=5 => h.unmap(&mut input),
            6 | 7 => h.write_same(&mut input),
            8 | 9 => h.mode_select(&mut input),
            10 => h.mode_sense(&mut input),
            11 => h.xcopy(&mut input),
            12 => h.token_copy(&mut input),
            13 | 14 => h.other_write(&mut input),
            _ => h.peer_tur(),
        }
        h.verify();
        steps += 1;
    }
}

struct Harness<'a> {
    lu: std::sync::Arc<LogicalUnit>,
    me: &'a NexusInfo,
    peer: &'a NexusInfo,
    /// What the medium must hold.
    disk: Vec<u8>,
    /// The peer has a MODE PARAMETERS CHANGED to hear.
    peer_told: bool,
    wce_changeable: bool,
}

/// An LBA: mostly on the medium, sometimes just past it or anywhere.
fn lba(input: &mut Input<'_>) -> u64 {
    match input.below(8) {
        0 => input.u64(),
        1 => BLOCKS - 2 + u64::from(input.u8() % 4),
        _ => u64::from(input.u8()) % BLOCKS,
    }
}

/// A block count: small, the whole medium, or anything.
fn count(input: &mut Input<'_>) -> u32 {
    match input.below(8) {
        0 => input.u32(),
        1 => BLOCKS as u32,
        _ => u32::from(input.u8() % 8),
    }
}

fn in_range(lba: u64, n: u64) -> bool {
    lba.checked_add(n).is_some_and(|end| end <= BLOCKS)
}

fn range(lba: u64, n: u64) -> core::ops::Range<usize> {
    lba as usize * BLOCK..(lba + n) as usize * BLOCK
}

fn be16(b: &[u8]) -> usize {
    usize::from(u16::from_be_bytes([b[0], b[1]]))
}

impl Harness<'_> {
    /// The whole medium reads back as the shadow.
    fn verify(&self) {
        let o = exec(&self.lu, self.me, &rw10(0x28, 0, BLOCKS as u16), &[]);
        assert!(o.good(), "READ of the whole medium: {:?}", o.result);
        if o.data_in != self.disk {
            let at = o.data_in.iter().zip(&self.disk).position(|(a, b)| a != b);
            panic!("the medium differs from the shadow at byte {at:?}");
        }
    }

    fn write(&mut self, input: &mut Input<'_>) {
        let (lba, n) = (lba(input) as u32, input.below(5) as u16);
        let seed = input.u8();
        let data: Vec<u8> = (0..usize::from(n) * BLOCK)
            .map(|i| (i as u8).wrapping_mul(31) ^ seed)
            .collect();
        let o = exec(&self.lu, self.me, &rw10(0x2a, lba, n), &data);
        if in_range(lba.into(), n.into()) {
            assert!(o.good(), "WRITE {lba}+{n}: {:?}", o.result);
        }
        if o.good() {
            self.disk[range(lba.into(), n.into())].copy_from_slice(&data);
        }
    }

    /// ORWRITE(16), WRITE AND VERIFY(10) or WRITE ATOMIC(16) of a few blocks.
    fn other_write(&mut self, input: &mut Input<'_>) {
        let (lba, n) = (lba(input), input.below(5) as u32);
        let seed = input.u8();
        let data: Vec<u8> = (0..n as usize * BLOCK)
            .map(|i| (i as u8).wrapping_mul(7) ^ seed)
            .collect();
        let kind = input.below(3);
        let cdb: Vec<u8> = match kind {
            0 | 2 => {
                let mut c = vec![if kind == 0 { 0x8b } else { 0x9c }, 0];
                c.extend(lba.to_be_bytes());
                if kind == 0 {
                    c.extend(n.to_be_bytes());
                } else {
                    c.extend([0, 0]);
                    c.extend((n as u16).to_be_bytes());
                }
                c.extend([0, 0]);
                c
            }
            _ => {
                let mut c = rw10(0x2e, lba as u32, n as u16).to_vec();
                c[1] = if input.bool() { 0x02 } else { 0 };
                c
            }
        };
        let lba = if kind == 1 {
            u64::from(lba as u32)
        } else {
            lba
        };
        let o = exec(&self.lu, self.me, &cdb, &data);
        if in_range(lba, n.into()) {
            assert!(o.good(), "{cdb:02x?}: {:?}", o.result);
        }
        if o.good() {
            let at = range(lba, n.into());
            match kind {
                0 => self.disk[at]
                    .iter_mut()
                    .zip(&data)
                    .for_each(|(m, d)| *m |= d),
                _ => self.disk[at].copy_from_slice(&data),
            }
        }
    }

    /// POPULATE TOKEN, RECEIVE ROD TOKEN INFORMATION and WRITE USING TOKEN within the LU,
    /// built (and perhaps broken) from the input.
    fn token_copy(&mut self, input: &mut Input<'_>) {
        let ranges = |input: &mut Input<'_>| -> Vec<(u64, u32)> {
            (0..1 + input.below(2))
                .map(|_| (lba(input), 1 + (count(input) % 16)))
                .collect()
        };
        let list = |head: usize, rs: &[(u64, u32)]| {
            let mut p = vec![0u8; head];
            p.extend(((rs.len() * 16) as u16).to_be_bytes());
            for &(l, n) in rs {
                p.extend(l.to_be_bytes());
                p.extend(n.to_be_bytes());
                p.extend([0; 4]);
            }
            let len = (p.len() - 2) as u16;
            p[..2].copy_from_slice(&len.to_be_bytes());
            p
        };
        let cdb = |sa: u8, id: u8, len: usize| {
            let mut c = [0u8; 16];
            c[0] = if sa == 0x07 { 0x84 } else { 0x83 };
            c[1] = sa;
            let at = if sa == 0x07 { 5 } else { 9 };
            c[at] = id;
            c[10..14].copy_from_slice(&(len as u32).to_be_bytes());
            c
        };
        let src = ranges(input);
        let p = list(14, &src);
        let o = exec(&self.lu, self.me, &cdb(0x10, 1, p.len()), &p);
        let in_medium = |rs: &[(u64, u32)]| rs.iter().all(|&(l, n)| in_range(l, n.into()));
        assert_eq!(
            o.good(),
            in_medium(&src),
            "POPULATE TOKEN of {src:?}: {:?}",
            o.result
        );
        if !o.good() {
            return;
        }
        let info = exec(&self.lu, self.me, &cdb(0x07, 1, 1024), &[]);
        assert!(info.good());
        let m = usize::from(info.data_in[13]);
        let mut token = info.data_in[32 + m + 6..32 + m + 6 + 512].to_vec();
        let mut revoked = false;
        if input.below(4) == 0 {
            // A write to one of the source's blocks revokes the token.
            let (l, _) = src[input.below(src.len())];
            let data = vec![input.u8(); BLOCK];
            assert!(exec(&self.lu, self.me, &rw10(0x2a, l as u32, 1), &data).good());
            self.disk[range(l, 1)].copy_from_slice(&data);
            revoked = true;
        }
        let mut forged = false;
        if input.below(12) == 0 {
            token[8 + input.below(500)] ^= 0x80;
            forged = true;
        }
        let dst = ranges(input);
        let offset = u64::from(input.u8() % 4);
        let mut w = list(534, &dst);
        w[8..16].copy_from_slice(&offset.to_be_bytes());
        w[16..528].copy_from_slice(&token);
        let o = exec(&self.lu, self.me, &cdb(0x11, 2, w.len()), &w);
        if !in_medium(&dst) {
            assert_eq!(
                o.sense().map(|s| s.code()),
                Some(SenseCode::LBA_OUT_OF_RANGE)
            );
            return;
        }
        if forged {
            // A token whose length field is intact but some byte changed is not ours.
            assert!(!o.good(), "a forged token was taken");
            return;
        }
        if revoked {
            assert_eq!(o.sense().map(|s| s.code()), Some(SenseCode::TOKEN_REVOKED));
            return;
        }
        // The source blocks from the offset on, in order, as the shadow holds them.
        let blocks: Vec<u64> = src
            .iter()
            .flat_map(|&(l, n)| l..l + u64::from(n))
            .skip(offset as usize)
            .collect();
        let targets: Vec<u64> = dst.iter().flat_map(|&(l, n)| l..l + u64::from(n)).collect();
        // Any block of the token's source written by the copy itself (before the offset
        // too) revokes the token midway.
        let overlap = targets
            .iter()
            .any(|t| src.iter().any(|&(l, n)| (l..l + u64::from(n)).contains(t)));
        if overlap {
            // SBC-4 leaves it undefined; the answer is GOOD or TOKEN REVOKED (its own
            // writes to the source revoke the token), and the shadow takes the medium.
            assert!(
                o.good() || o.sense().map(|s| s.code()) == Some(SenseCode::TOKEN_REVOKED),
                "{:?}",
                o.result
            );
            let whole = exec(&self.lu, self.me, &rw10(0x28, 0, BLOCKS as u16), &[]);
            self.disk.copy_from_slice(&whole.data_in);
            return;
        }
        assert!(
            o.good(),
            "WRITE USING TOKEN {src:?} -> {dst:?}: {:?}",
            o.result
        );
        let old = self.disk.clone();
        for (t, b) in targets.iter().zip(&blocks) {
            self.disk[range(*t, 1)].copy_from_slice(&old[range(*b, 1)]);
        }
    }

    /// EXTENDED COPY (LID1) within the LU, built (and perhaps broken) from the input.
    fn xcopy(&mut self, input: &mut Input<'_>) {
        let naa = *self.lu.identity().naa();
        let mut well_formed = true;
        let mut cscd = vec![0u8; 32];
        cscd[0] = 0xe4;
        cscd[4] = 0x01;
        cscd[5] = 0x03;
        cscd[7] = 16;
        cscd[8..24].copy_from_slice(&naa);
        if input.below(16) == 0 {
            let at = input.below(32);
            cscd[at] ^= input.u8() | 1;
            well_formed = false;
        }
        // (source id, destination id, blocks, source LBA, destination LBA)
        let mut segs = Vec::new();
        for _ in 0..1 + input.below(2) {
            let id = |input: &mut Input<'_>| match input.below(8) {
                0 => 0xffff,
                1 => 1,
                _ => 0,
            };
            let (src, dst) = (id(input), id(input));
            let n = (count(input) % 0x1_0000) as u16;
            segs.push((src, dst, n, lba(input), lba(input)));
        }
        let mut list = vec![0u8; 16];
        list[1] = 0x18;
        list[3] = 32;
        list[11] = (segs.len() * 28) as u8;
        list.extend(&cscd);
        for &(src, dst, n, sl, dl) in &segs {
            let mut d = vec![0u8; 28];
            d[0] = 0x02;
            d[3] = 0x18;
            d[4..6].copy_from_slice(&u16::to_be_bytes(src));
            d[6..8].copy_from_slice(&u16::to_be_bytes(dst));
            d[10..12].copy_from_slice(&n.to_be_bytes());
            d[12..20].copy_from_slice(&sl.to_be_bytes());
            d[20..28].copy_from_slice(&dl.to_be_bytes());
            list.extend(d);
        }
        let mut param_len = list.len() as u32;
        if input.below(12) == 0 {
            param_len = u32::from(input.u8());
            well_formed = false;
        }
        let keep = if input.below(12) == 0 {
            well_formed = false;
            input.below(list.len() + 1)
        } else {
            list.len()
        };
        let mut cdb = [0u8; 16];
        cdb[0] = 0x83;
        cdb[10..14].copy_from_slice(&param_len.to_be_bytes());
        let o = exec(&self.lu, self.me, &cdb, &list[..keep]);
        // Whether the CSCD names this LU (SPC-4: binary NAA designator of the LU, a block
        // device of its block length or none given).
        let block_len = u32::from_be_bytes([0, cscd[29], cscd[30], cscd[31]]);
        let names_me = cscd[0] == 0xe4
            && cscd[1] & 0x1f == 0
            && cscd[4] & 0x0f == 1
            && cscd[5] & 0x3f == 0x03
            && cscd[7] == 16
            && cscd[8..24] == naa
            && (block_len == 0 || block_len == BLOCK as u32);
        let resolves = |id: u16| id == 0xffff || (id == 0 && names_me);
        // The leading segments that name this LU and stay on the medium (an empty segment
        // moves nothing wherever it points).
        let valid = segs
            .iter()
            .take_while(|&&(src, dst, n, sl, dl)| {
                resolves(src)
                    && resolves(dst)
                    && (n == 0 || (in_range(sl, n.into()) && in_range(dl, n.into())))
            })
            .count();
        if well_formed && valid == segs.len() {
            assert!(o.good(), "EXTENDED COPY of {segs:?}: {:?}", o.result);
        }
        let moved = if param_len == 0 {
            // SPC-4: no parameter list, nothing to do.
            assert!(o.good(), "EXTENDED COPY with no list: {:?}", o.result);
            0
        } else if o.good() {
            segs.len()
        } else if o
            .sense()
            .is_some_and(|s| s.code().key == scsi::SenseKey::CopyAborted)
        {
            // The copy manager resolves and checks every segment before it copies any
            // (srp-target exec/copy/xcopy.rs, as LIO does): a list refused for a segment it
            // cannot reach moved nothing, the valid segments before it included. (A RAM LU
            // has no failing read or write to stop a list part way.)
            0
        } else {
            0
        };
        assert!(
            moved <= valid,
            "a copy past the medium or to an unknown CSCD completed: {segs:?}, CSCD {cscd:02x?}"
        );
        for &(_, _, n, sl, dl) in segs[..moved].iter().filter(|s| s.2 > 0) {
            let r = range(sl, n.into());
            self.disk.copy_within(r, dl as usize * BLOCK);
        }
    }

    fn read(&mut self, input: &mut Input<'_>) {
        let (lba, n) = (lba(input) as u32, input.below(5) as u16);
        let o = exec(&self.lu, self.me, &rw10(0x28, lba, n), &[]);
        if in_range(lba.into(), n.into()) {
            assert!(o.good(), "READ {lba}+{n}: {:?}", o.result);
        }
        if o.good() {
            assert_eq!(o.data_in, self.disk[range(lba.into(), n.into())]);
        }
    }

    /// UNMAP of a parameter list built (and perhaps broken) from the input.
    fn unmap(&mut self, input: &mut Input<'_>) {
        let mut well_formed = true;
        let mut list = vec![0u8; 8];
        let n = input.below(6);
        for _ in 0..n {
            let (lba, blocks) = (lba(input), count(input));
            well_formed &= in_range(lba, blocks.into());
            list.extend(lba.to_be_bytes());
            list.extend(blocks.to_be_bytes());
            list.extend([0; 4]);
        }
        let desc_len = 16 * n;
        list[0..2].copy_from_slice(&((desc_len + 6) as u16).to_be_bytes());
        list[2..4].copy_from_slice(&(desc_len as u16).to_be_bytes());
        match input.below(12) {
            0 => {
                // A header field off.
                let at = input.below(4);
                list[at] = input.u8();
                well_formed = false;
            }
            1 => {
                // A trailing partial descriptor: ignored (SBC-3).
                let extra = input.below(16);
                list.extend(input.bytes(extra));
            }
            2 => {
                list = input.bytes(input.len().min(64)).to_vec();
                well_formed = false;
            }
            _ => {}
        }
        let param_len = match input.below(12) {
            0 => {
                well_formed = false;
                input.u16()
            }
            _ => list.len() as u16,
        };
        let dout = match input.below(12) {
            0 => {
                well_formed = false;
                let keep = input.below(list.len() + 1);
                &list[..keep]
            }
            _ => &list[..],
        };
        let anchor = input.below(16) == 0;
        let p = param_len.to_be_bytes();
        let cdb = [0x42, u8::from(anchor), 0, 0, 0, 0, 0, p[0], p[1], 0];
        let o = exec(&self.lu, self.me, &cdb, dout);
        if well_formed && !anchor {
            assert!(o.good(), "UNMAP of {list:02x?}: {:?}", o.result);
        }
        if !o.good() || param_len == 0 {
            return;
        }
        // Completed: every whole descriptor the list's header counts was deallocated.
        let count = be16(&dout[2..]) / 16;
        for d in dout[8..].chunks_exact(16).take(count) {
            let lba = u64::from_be_bytes(d[..8].try_into().expect("8"));
            let n = u32::from_be_bytes(d[8..12].try_into().expect("4"));
            assert!(in_range(lba, n.into()), "UNMAP past the medium completed");
            self.disk[range(lba, n.into())].fill(0);
        }
    }

    fn write_same(&mut self, input: &mut Input<'_>) {
        let sixteen = input.bool();
        let (lba, n) = (lba(input), count(input));
        let (unmap, anchor) = (input.below(3) == 0, input.below(16) == 0);
        let flags = if unmap { 0x08 } else { 0 } | if anchor { 0x10 } else { 0 };
        let cdb: Vec<u8> = if sixteen {
            let mut c = vec![0x93, flags];
            c.extend(lba.to_be_bytes());
            c.extend(n.to_be_bytes());
            c.extend([0, 0]);
            c
        } else {
            let mut c = vec![0x41, flags];
            c.extend((lba as u32).to_be_bytes());
            c.push(0);
            c.extend((n as u16).to_be_bytes());
            c.push(0);
            c
        };
        let (lba, n) = if sixteen {
            (lba, u64::from(n))
        } else {
            (u64::from(lba as u32), u64::from(n as u16))
        };
        let block: Vec<u8> = match input.below(3) {
            0 => {
                let seed = input.u8();
                (0..BLOCK).map(|i| (i as u8) ^ seed).collect()
            }
            _ => vec![0; BLOCK],
        };
        let short = input.below(16) == 0;
        let dout = if short {
            &block[..input.below(BLOCK)]
        } else {
            &block[..]
        };
        let o = exec(&self.lu, self.me, &cdb, dout);
        if n > 0 && in_range(lba, n) && !anchor && !short {
            assert!(o.good(), "WRITE SAME {cdb:02x?}: {:?}", o.result);
        }
        if o.good() {
            for b in self.disk[range(lba, n)].chunks_exact_mut(BLOCK) {
                b.copy_from_slice(&block);
            }
        }
    }

    /// MODE SENSE(10) of every page, current values: the mode state.
    fn pages(&self) -> Vec<u8> {
        let o = exec(
            &self.lu,
            self.me,
            &[0x5a, 0x08, 0x3f, 0, 0, 0, 0, 0xff, 0xff, 0],
            &[],
        );
        assert!(o.good(), "MODE SENSE: {:?}", o.result);
        o.data_in
    }

    /// WCE in MODE SENSE(10) data with block descriptors off: the caching page comes first.
    fn wce(pages: &[u8]) -> bool {
        assert_eq!(pages[8], 0x08, "the caching page first");
        pages[8 + 2] & 0x04 != 0
    }

    fn mode_select(&mut self, input: &mut Input<'_>) {
        let before = self.pages();
        let ten = input.bool();
        let sp = input.below(4) == 0;
        let hdr = if ten { 8 } else { 4 };
        let mut list = vec![0u8; hdr];
        if input.below(4) == 0 {
            // A block descriptor, which is accepted as it is.
            let bd = input.bytes(8).to_vec();
            if ten {
                list[7] = 8;
            } else {
                list[3] = 8;
            }
            list.extend(bd);
            list.resize(hdr + 8, 0);
        }
        let mut wce: Option<bool> = None;
        let mut changed_other = false;
        for _ in 0..input.below(3) {
            match input.below(4) {
                0 | 1 => {
                    // The caching page as it stands, WCE perhaps flipped.
                    let mut page = before[8..28].to_vec();
                    page[0] &= 0x7f; // PS is reserved in MODE SELECT
                    if input.bool() {
                        page[2] ^= 0x04;
                    }
                    if input.below(6) == 0 {
                        let at = input.below(page.len());
                        page[at] ^= input.u8() | 1;
                        changed_other = true;
                    }
                    wce = Some(page[2] & 0x04 != 0);
                    list.extend(page);
                }
                2 => list.extend(&before[28..40]),
                _ => {
                    let n = input.below(24);
                    list.extend(input.bytes(n));
                    changed_other = true;
                }
            }
        }
        let param_len = match input.below(12) {
            0 => {
                changed_other = true;
                input.u16()
            }
            _ => list.len() as u16,
        };
        let cdb: Vec<u8> = if ten {
            let l = param_len.to_be_bytes();
            vec![0x55, 0x10 | u8::from(sp), 0, 0, 0, 0, 0, l[0], l[1], 0]
        } else {
            vec![0x15, 0x10 | u8::from(sp), 0, 0, param_len as u8, 0]
        };
        let o = exec(&self.lu, self.me, &cdb, &list);
        let after = self.pages();
        let was = Self::wce(&before);
        if !o.good() {
            assert_eq!(
                after, before,
                "a refused MODE SELECT changed the mode pages"
            );
            return;
        }
        if !changed_other && !sp && (self.wce_changeable || wce.is_none_or(|w| w == was)) {
            // Well-formed, nothing but a changeable WCE changed: it completes.
            assert_eq!(o.status(), Some(Status::Good));
        }
        // Completed: the last caching page within the parameter list length decides.
        let now = last_caching_wce(&list, ten, param_len.into()).unwrap_or(was);
        assert_eq!(
            Self::wce(&after),
            now,
            "WCE is what the last caching page said"
        );
        assert_eq!(self.lu.write_cache(), now);
        let mut expect = before.clone();
        expect[8 + 2] = (expect[8 + 2] & !0x04) | if now { 0x04 } else { 0 };
        assert_eq!(after, expect, "only WCE changes");
        if now != was {
            assert!(
                self.wce_changeable,
                "WCE changed where it is not changeable"
            );
            self.peer_told = true;
        }
    }

    /// Any MODE SENSE: the data is the whole answer cut to the allocation length, and the
    /// whole answer's lengths describe it.
    fn mode_sense(&mut self, input: &mut Input<'_>) {
        let ten = input.bool();
        let page = match input.below(5) {
            0 => 0x08,
            1 => 0x0a,
            2 | 3 => 0x3f,
            _ => input.u8() & 0x3f,
        };
        let pc = input.u8() & 0xc0;
        let dbd = if input.bool() { 0x08 } else { 0 };
        let llbaa = if ten && input.bool() { 0x10 } else { 0 };
        let subpage = if input.below(8) == 0 { input.u8() } else { 0 };
        let alloc = input.u16();
        let cdb = |alloc: u16| -> Vec<u8> {
            let a = alloc.to_be_bytes();
            if ten {
                vec![
                    0x5a,
                    dbd | llbaa,
                    pc | page,
                    subpage,
                    0,
                    0,
                    0,
                    a[0],
                    a[1],
                    0,
                ]
            } else {
                vec![0x1a, dbd, pc | page, subpage, a[1], 0]
            }
        };
        let o = exec(&self.lu, self.me, &cdb(alloc), &[]);
        if !o.good() {
            return;
        }
        let whole = exec(&self.lu, self.me, &cdb(0xffff), &[]).data_in;
        let cut = if ten {
            usize::from(alloc)
        } else {
            usize::from(alloc as u8)
        };
        assert_eq!(o.data_in, whole[..whole.len().min(cut)], "MODE SENSE cut");
        let (len, bd) = if ten {
            (be16(&whole) + 2, be16(&whole[6..]) + 8)
        } else {
            (usize::from(whole[0]) + 1, usize::from(whole[3]) + 4)
        };
        assert_eq!(len, whole.len(), "MODE DATA LENGTH");
        assert!(bd <= whole.len(), "BLOCK DESCRIPTOR LENGTH");
    }

    /// The other nexus hears MODE PARAMETERS CHANGED exactly when WCE changed.
    fn peer_tur(&mut self) {
        let o = exec(&self.lu, self.peer, &[0; 6], &[]);
        if self.peer_told {
            let code = o.sense().map(|s| s.code());
            assert_eq!(code, Some(SenseCode::MODE_PARAMETERS_CHANGED));
            self.peer_told = false;
        } else {
            assert!(o.good(), "TEST UNIT READY: {:?}", o.result);
        }
    }
}

/// WCE of the last caching page of a MODE SELECT parameter list the target accepted,
/// walking its pages as far as the parameter list length says.
fn last_caching_wce(list: &[u8], ten: bool, param_len: usize) -> Option<bool> {
    let (hdr, bd) = if ten {
        (8, be16(&list[6..]))
    } else {
        (4, usize::from(list[3]))
    };
    let len = if ten { param_len } else { param_len & 0xff };
    let mut at = hdr + bd;
    let mut wce = None;
    while at < len {
        let (code, plen) = (list[at] & 0x7f, usize::from(list[at + 1]));
        if code == 0x08 {
            wce = Some(list[at + 2] & 0x04 != 0);
        }
        at += 2 + plen;
    }
    wce
}
