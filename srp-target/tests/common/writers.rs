//! Every command of the supported table that writes, built by hand from SBC-4/SPC-4 (not
//! from the target's encoders), with what it leaves on the medium and when SBC says it
//! must be durable: the command mix of the reservation and durability tests
//! (`write_rules.rs`) and of the crash-consistency workload (`crash_consistency.rs`).
//!
//! [`writing_commands`] takes the list from the target's own opcode table and rules; a
//! writing command without a builder here fails [`build`], so a new one cannot go
//! untested, and `write_rules.rs` checks that the rules call writing exactly the commands
//! built here.

use scsi::OpcodeInfo;
use srp_target::exec::rules;

/// (OPERATION CODE, SERVICE ACTION).
pub type Key = (u8, Option<u8>);

/// When SBC says a command's data must be durable before its status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DurableWhen {
    /// With the write cache off only (no FUA bit: WRITE SAME, UNMAP, the copies; WRITE(6)).
    CacheOff,
    /// With FUA set, or the write cache off.
    Fua,
    /// Always (WRITE AND VERIFY verifies the medium).
    Always,
}

impl DurableWhen {
    /// Whether a command sent with `fua` to a LU with write cache `wce` is durable at GOOD.
    pub fn durable(self, fua: bool, wce: bool) -> bool {
        match self {
            DurableWhen::CacheOff => !wce,
            DurableWhen::Fua => fua || !wce,
            DurableWhen::Always => true,
        }
    }
}

/// What a writing command is here.
#[derive(Clone, Copy, Debug)]
pub struct Writer {
    pub key: Key,
    pub name: &'static str,
    pub durable: DurableWhen,
    /// Most blocks one command may write in these tests (WRITE ATOMIC: one physical block
    /// of a 512-byte file LU; COMPARE AND WRITE: 255).
    pub max_blocks: u64,
}

/// The writers this module builds, by hand.
pub const WRITERS: &[Writer] = &[
    w((0x0a, None), "WRITE(6)", DurableWhen::CacheOff, 255),
    w((0x2a, None), "WRITE(10)", DurableWhen::Fua, 1 << 16),
    w((0xaa, None), "WRITE(12)", DurableWhen::Fua, 1 << 16),
    w((0x8a, None), "WRITE(16)", DurableWhen::Fua, 1 << 16),
    w(
        (0x2e, None),
        "WRITE AND VERIFY(10)",
        DurableWhen::Always,
        1 << 16,
    ),
    w(
        (0xae, None),
        "WRITE AND VERIFY(12)",
        DurableWhen::Always,
        1 << 16,
    ),
    w(
        (0x8e, None),
        "WRITE AND VERIFY(16)",
        DurableWhen::Always,
        1 << 16,
    ),
    w((0x8b, None), "ORWRITE(16)", DurableWhen::Fua, 1 << 16),
    w((0x89, None), "COMPARE AND WRITE", DurableWhen::Fua, 255),
    w((0x9c, None), "WRITE ATOMIC(16)", DurableWhen::Fua, 1),
    w(
        (0x41, None),
        "WRITE SAME(10)",
        DurableWhen::CacheOff,
        1 << 16,
    ),
    w(
        (0x93, None),
        "WRITE SAME(16)",
        DurableWhen::CacheOff,
        1 << 16,
    ),
    w((0x42, None), "UNMAP", DurableWhen::CacheOff, 1 << 16),
    w(
        (0x83, Some(0x00)),
        "EXTENDED COPY(LID1)",
        DurableWhen::CacheOff,
        1 << 16,
    ),
    w(
        (0x83, Some(0x11)),
        "WRITE USING TOKEN",
        DurableWhen::CacheOff,
        1 << 16,
    ),
];

const fn w(key: Key, name: &'static str, durable: DurableWhen, max_blocks: u64) -> Writer {
    Writer {
        key,
        name,
        durable,
        max_blocks,
    }
}

/// The writer built here for `key`.
pub fn writer(key: Key) -> Option<&'static Writer> {
    WRITERS.iter().find(|w| w.key == key)
}

/// A CDB of `info` with every field zero but the operation code and service action.
pub fn bare_cdb(info: &OpcodeInfo) -> Vec<u8> {
    let mut c = vec![0u8; info.cdb_len()];
    c[0] = info.opcode;
    if let Some(sa) = info.service_action {
        c[1] = sa;
    }
    c
}

/// The commands of the target's supported table whose rule says they write a medium.
pub fn writing_commands() -> Vec<Key> {
    srp_target::exec::supported_opcodes()
        .iter()
        .filter(|info| {
            let rule = rules::rule_of_cdb(&bare_cdb(info))
                .unwrap_or_else(|| panic!("{} does not parse bare", info.name));
            rule.writes_medium()
        })
        .map(|info| (info.opcode, info.service_action))
        .collect()
}

/// One writing command, ready to send.
#[derive(Clone, Debug)]
pub struct WriteOp {
    pub cdb: Vec<u8>,
    pub dout: Vec<u8>,
    /// The `n` blocks at `at` after it.
    pub after: Vec<u8>,
}

/// Where and what a command writes: `n` blocks at `at` (512-byte blocks), whose contents
/// are `old` now; `data` is `n` blocks of new data; `src`, `n` blocks at `src_lba`, is
/// what a copy copies; `naa` names the LU (a copy's CSCD).
pub struct Place<'a> {
    pub at: u64,
    pub n: u64,
    pub old: &'a [u8],
    pub data: &'a [u8],
    pub src_lba: u64,
    pub src: &'a [u8],
    pub naa: &'a [u8; 16],
    pub fua: bool,
    /// LIST IDENTIFIER of a token operation (unique per nexus among those running).
    pub list_id: u32,
}

const BS: usize = 512;
const FUA: u8 = 0x08;
/// ROD TYPE of the block device zero token (SBC-4 Table 112).
const ROD_TYPE_ZERO: u32 = 0xffff_0001;

fn be32(v: u64) -> [u8; 4] {
    u32::try_from(v).expect("fits 32 bits").to_be_bytes()
}

fn be16(v: u64) -> [u8; 2] {
    u16::try_from(v).expect("fits 16 bits").to_be_bytes()
}

/// Builds `key` at `p`; `None` for a command this module does not know (a test failure).
pub fn build(key: Key, p: &Place<'_>) -> Option<WriteOp> {
    let n = p.n;
    assert_eq!(p.data.len(), n as usize * BS);
    assert_eq!(p.old.len(), n as usize * BS);
    let fua = if p.fua { FUA } else { 0 };
    let plain = |cdb: Vec<u8>| WriteOp {
        cdb,
        dout: p.data.to_vec(),
        after: p.data.to_vec(),
    };
    let cdb10 = |op: u8, flags: u8| {
        let mut c = vec![op, flags, 0, 0, 0, 0, 0, 0, 0, 0];
        c[2..6].copy_from_slice(&be32(p.at));
        c[7..9].copy_from_slice(&be16(n));
        c
    };
    let cdb12 = |op: u8, flags: u8| {
        let mut c = vec![op, flags, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        c[2..6].copy_from_slice(&be32(p.at));
        c[6..10].copy_from_slice(&be32(n));
        c
    };
    let cdb16 = |op: u8, flags: u8| {
        let mut c = vec![0u8; 16];
        c[0] = op;
        c[1] = flags;
        c[2..10].copy_from_slice(&p.at.to_be_bytes());
        c[10..14].copy_from_slice(&be32(n));
        c
    };
    Some(match key {
        (0x0a, None) => {
            assert!(p.at < 1 << 21 && n < 256);
            let a = be32(p.at);
            plain(vec![0x0a, a[1] & 0x1f, a[2], a[3], n as u8, 0])
        }
        (0x2a, None) => plain(cdb10(0x2a, fua)),
        (0xaa, None) => plain(cdb12(0xaa, fua)),
        (0x8a, None) => plain(cdb16(0x8a, fua)),
        // BYTCHK=01b: the data-out is compared with what was written.
        (0x2e, None) => plain(cdb10(0x2e, 0x02)),
        (0xae, None) => plain(cdb12(0xae, 0x02)),
        (0x8e, None) => plain(cdb16(0x8e, 0x02)),
        (0x8b, None) => WriteOp {
            cdb: cdb16(0x8b, fua),
            dout: p.data.to_vec(),
            after: p.old.iter().zip(p.data).map(|(o, d)| o | d).collect(),
        },
        (0x89, None) => {
            let mut c = vec![0u8; 16];
            c[0] = 0x89;
            c[1] = fua;
            c[2..10].copy_from_slice(&p.at.to_be_bytes());
            c[13] = u8::try_from(n).expect("at most 255 blocks");
            WriteOp {
                cdb: c,
                dout: [p.old, p.data].concat(),
                after: p.data.to_vec(),
            }
        }
        (0x9c, None) => {
            // WRITE ATOMIC(16): ATOMIC BOUNDARY 0, TRANSFER LENGTH in bytes 12..14.
            let mut c = vec![0u8; 16];
            c[0] = 0x9c;
            c[1] = fua;
            c[2..10].copy_from_slice(&p.at.to_be_bytes());
            c[12..14].copy_from_slice(&be16(n));
            plain(c)
        }
        (0x41 | 0x93, None) => {
            let block = &p.data[..BS];
            let cdb = if key.0 == 0x41 {
                cdb10(0x41, 0)
            } else {
                cdb16(0x93, 0)
            };
            WriteOp {
                cdb,
                dout: block.to_vec(),
                after: block.repeat(n as usize),
            }
        }
        (0x42, None) => {
            let mut list = vec![0u8; 8];
            list.extend(p.at.to_be_bytes());
            list.extend(be32(n));
            list.extend([0; 4]);
            let len = list.len() as u16 - 2;
            list[0..2].copy_from_slice(&len.to_be_bytes());
            list[2..4].copy_from_slice(&16u16.to_be_bytes());
            let mut c = vec![0x42, 0, 0, 0, 0, 0, 0, 0, 0, 0];
            c[7..9].copy_from_slice(&(list.len() as u16).to_be_bytes());
            WriteOp {
                cdb: c,
                dout: list,
                after: vec![0u8; n as usize * BS],
            }
        }
        (0x83, Some(0x00)) => {
            // EXTENDED COPY(LID1): LIST IDENTIFIER, one identification CSCD (E4h) naming the
            // LU by its NAA, one block to block segment (02h) from CSCD 0 to CSCD 0.
            let mut list = vec![0u8; 16];
            list[1] = 0x18; // LIST ID USAGE 11b: no list identifier, nothing held
            list[2..4].copy_from_slice(&32u16.to_be_bytes());
            list[8..12].copy_from_slice(&28u32.to_be_bytes());
            let mut cscd = vec![0u8; 32];
            cscd[0] = 0xe4;
            cscd[4] = 0x01; // binary
            cscd[5] = 0x03; // LU association, NAA
            cscd[7] = 16;
            cscd[8..24].copy_from_slice(p.naa);
            list.extend(cscd);
            let mut s = vec![0u8; 28];
            s[0] = 0x02;
            s[2..4].copy_from_slice(&0x18u16.to_be_bytes());
            s[10..12].copy_from_slice(&be16(n));
            s[12..20].copy_from_slice(&p.src_lba.to_be_bytes());
            s[20..28].copy_from_slice(&p.at.to_be_bytes());
            list.extend(s);
            let mut c = vec![0u8; 16];
            c[0] = 0x83;
            c[10..14].copy_from_slice(&be32(list.len() as u64));
            WriteOp {
                cdb: c,
                dout: list,
                after: p.src.to_vec(),
            }
        }
        (0x83, Some(0x11)) => {
            // WRITE USING TOKEN with the block device zero ROD token: zeros.
            let mut token = vec![0u8; 512];
            token[..4].copy_from_slice(&ROD_TYPE_ZERO.to_be_bytes());
            token[6..8].copy_from_slice(&0x01f8u16.to_be_bytes());
            let mut list = vec![0u8; 16];
            list.extend(&token);
            list.extend([0u8; 6]);
            list.extend(16u16.to_be_bytes());
            list.extend(p.at.to_be_bytes());
            list.extend(be32(n));
            list.extend([0; 4]);
            let len = list.len() as u16 - 2;
            list[0..2].copy_from_slice(&len.to_be_bytes());
            let mut c = vec![0u8; 16];
            c[0] = 0x83;
            c[1] = 0x11;
            c[6..10].copy_from_slice(&p.list_id.to_be_bytes());
            c[10..14].copy_from_slice(&be32(list.len() as u64));
            WriteOp {
                cdb: c,
                dout: list,
                after: vec![0u8; n as usize * BS],
            }
        }
        _ => return None,
    })
}
