//! Shared helpers for the integration tests: temp dirs, LUs, CDB builders, sense checks,
//! and the SRP_CMD / SRP_TSK_MGMT IUs the test initiators send.
#![allow(dead_code, unreachable_pub)]

pub mod writers;

use hca::Qpn;
use hca::driver::Hca;
use hca::engine::{CqId, QpId};
use hca::mr::PdId;
use hca::qp::QpInit;
use scsi::{Lun, SenseCode, Status};
use srp::wire::cmd::{Cmd, TaskAttr};
use srp::wire::desc::DataDesc;
use srp::wire::tsk_mgmt::{TaskMgmtFunction, TskMgmt};
use srp::wire::{SolicitFlags, Tag};
use srp_target::{
    BlockSize, CmdOutput, FileBackend, LogicalUnit, LuConfig, LunIdentity, Oui, PortIdentity,
    RamBackend, TargetPortGroup,
};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use wirekit::WireRepr;

/// A directory under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("srp-target-{tag}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub const OUI: u32 = 0x00_1405;

pub fn identity(name: &str) -> LunIdentity {
    LunIdentity::derive(name, Oui::new(OUI).expect("24 bits"))
}

pub fn ram_lu(blocks: u64, bs: BlockSize) -> LogicalUnit {
    let b = RamBackend::new(blocks, bs).expect("ram");
    LogicalUnit::new(Box::new(b), LuConfig::new(identity("ram-lu")))
}

pub fn file_lu(dir: &TempDir, name: &str, blocks: u64, bs: BlockSize) -> LogicalUnit {
    let path = dir.path().join(name);
    let b = FileBackend::create(&path, blocks * u64::from(bs.bytes()), bs).expect("file");
    LogicalUnit::new(Box::new(b), LuConfig::new(identity(name)))
}

pub fn read_only_lu(blocks: u64) -> LogicalUnit {
    let b = RamBackend::new(blocks, BlockSize::B512).expect("ram");
    let cfg = LuConfig {
        read_only: true,
        ..LuConfig::new(identity("ro"))
    };
    LogicalUnit::new(Box::new(b), cfg)
}

/// The initiator port identifier [`nexus_data`] uses.
pub const INITIATOR_A: srp::wire::PortId = srp::wire::PortId([0xa0; 16]);

/// Owns what a [`Nexus`] borrows (the library's own type, as the channel data path uses).
pub type NexusData = srp_target::io::NexusInfo;

/// Initiator [`INITIATOR_A`], LUNs 0 and 1, IOC `ioc` of two.
pub fn nexus_data(ioc: u16) -> NexusData {
    nexus_data_of(INITIATOR_A, ioc)
}

/// Initiator `initiator`, LUNs 0 and 1, IOC `ioc` of two.
pub fn nexus_data_of(initiator: srp::wire::PortId, ioc: u16) -> NexusData {
    NexusData {
        initiator,
        luns: vec![Lun::ZERO, Lun::from_number(1).expect("lun")],
        port: PortIdentity::for_ioc(ioc).expect("port"),
        groups: TargetPortGroup::one_per_ioc(2),
    }
}

/// Runs `cdb` on IOC 0 and returns the output and the data-in.
pub fn run(lu: &LogicalUnit, cdb: &[u8], dout: &[u8]) -> (CmdOutput, Vec<u8>) {
    let nd = nexus_data(0);
    let mut din = Vec::new();
    let out = lu
        .execute(&nd.nexus(), cdb, dout, &mut din)
        .expect("no transport error");
    assert_eq!(out.data_in_len, din.len());
    (out, din)
}

/// Asserts GOOD and returns the data-in.
pub fn good(lu: &LogicalUnit, cdb: &[u8], dout: &[u8]) -> Vec<u8> {
    let (out, din) = run(lu, cdb, dout);
    assert_eq!(out.status, Status::Good, "sense {:?}", out.sense);
    assert_eq!(out.sense, None);
    din
}

/// Asserts CHECK CONDITION with `code` (key, ASC, ASCQ) and returns the sense.
pub fn check(lu: &LogicalUnit, cdb: &[u8], dout: &[u8], code: SenseCode) -> scsi::Sense {
    let (out, din) = run(lu, cdb, dout);
    assert_eq!(out.status, Status::CheckCondition);
    assert!(din.is_empty());
    let sense = out.sense.expect("sense");
    assert_eq!(sense.code(), code, "{sense:?}");
    sense
}

pub fn read10(lba: u32, blocks: u16) -> [u8; 10] {
    let l = lba.to_be_bytes();
    let n = blocks.to_be_bytes();
    [0x28, 0, l[0], l[1], l[2], l[3], 0, n[0], n[1], 0]
}

pub fn write10(lba: u32, blocks: u16, fua: bool) -> [u8; 10] {
    let mut c = read10(lba, blocks);
    c[0] = 0x2a;
    if fua {
        c[1] = 0x08;
    }
    c
}

/// A 16-byte CDB with a 64-bit LBA and 32-bit length (READ/WRITE/VERIFY/WRITE SAME(16)).
pub fn cdb16(op: u8, flags: u8, lba: u64, blocks: u32) -> [u8; 16] {
    let mut c = [0u8; 16];
    c[0] = op;
    c[1] = flags;
    c[2..10].copy_from_slice(&lba.to_be_bytes());
    c[10..14].copy_from_slice(&blocks.to_be_bytes());
    c
}

pub fn compare_and_write(lba: u64, blocks: u8) -> [u8; 16] {
    let mut c = [0u8; 16];
    c[0] = 0x89;
    c[2..10].copy_from_slice(&lba.to_be_bytes());
    c[13] = blocks;
    c
}

/// Field pointer (byte, bit) of an ILLEGAL REQUEST sense.
pub fn field_pointer(s: &scsi::Sense) -> Option<(u16, Option<u8>, bool)> {
    match s.sense_key_specific()? {
        scsi::sense::SenseKeySpecific::FieldPointer(p) => Some((p.byte, p.bit, p.in_cdb)),
        _ => None,
    }
}

/// `n` bytes of a recognisable pattern seeded by `seed`.
pub fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// INQUIRY: standard data (`page` None) or VPD page `page`, `alloc` bytes.
pub fn inquiry(page: Option<u8>, alloc: u16) -> [u8; 6] {
    let a = alloc.to_be_bytes();
    match page {
        None => [0x12, 0, 0, a[0], a[1], 0],
        Some(p) => [0x12, 1, p, a[0], a[1], 0],
    }
}

/// The designators of VPD 83h as (code set byte, association/type byte, value).
pub fn designators(page: &[u8]) -> Vec<(u8, u8, Vec<u8>)> {
    let mut out = Vec::new();
    let mut at = 4;
    while at + 4 <= page.len() {
        let len = usize::from(page[at + 3]);
        out.push((page[at], page[at + 1], page[at + 4..at + 4 + len].to_vec()));
        at += 4 + len;
    }
    out
}

/// A big-endian u32 at the start of `b`.
pub fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b[..4].try_into().expect("4 bytes"))
}

/// An UNMAP parameter list of (LBA, blocks) extents.
pub fn unmap_list(extents: &[(u64, u32)]) -> Vec<u8> {
    let mut l = vec![0u8; 8];
    for &(lba, n) in extents {
        l.extend(lba.to_be_bytes());
        l.extend(n.to_be_bytes());
        l.extend([0; 4]);
    }
    let desc = (l.len() - 8) as u16;
    l[0..2].copy_from_slice(&(desc + 6).to_be_bytes());
    l[2..4].copy_from_slice(&desc.to_be_bytes());
    l
}

/// PERSISTENT RESERVE OUT service actions, and the reservation type the tests use (SPC-4).
pub mod pr {
    pub const REGISTER: u8 = 0x00;
    pub const RESERVE: u8 = 0x01;
    pub const RELEASE: u8 = 0x02;
    pub const CLEAR: u8 = 0x03;
    pub const PREEMPT: u8 = 0x04;
    pub const PREEMPT_AND_ABORT: u8 = 0x05;
    pub const REGISTER_IGNORE: u8 = 0x06;
    /// TYPE 1h.
    pub const WRITE_EXCLUSIVE: u8 = 0x1;
}

/// PERSISTENT RESERVE OUT: service action `sa`, TYPE `ty`, and its 24-byte parameter list
/// (RESERVATION KEY `key`, SERVICE ACTION RESERVATION KEY `sa_key`, byte 20 `flags`).
pub fn pr_out(sa: u8, ty: u8, key: u64, sa_key: u64, flags: u8) -> ([u8; 10], [u8; 24]) {
    let cdb = [0x5f, sa, ty, 0, 0, 0, 0, 0, 24, 0];
    let mut list = [0u8; 24];
    list[..8].copy_from_slice(&key.to_be_bytes());
    list[8..16].copy_from_slice(&sa_key.to_be_bytes());
    list[20] = flags;
    (cdb, list)
}

/// A CQ of `cqe` entries and an RC QP in RESET on it (`wrs` deep each way, one SGE): the
/// test initiators' endpoint.
pub fn rc_qp(hca: &Hca, pd: PdId, cqe: usize, wrs: usize) -> (QpId, Qpn, CqId) {
    hca.with(|e, _| {
        let cq = e.create_cq(cqe);
        let qp = e
            .create_qp(QpInit::rc(pd, cq, wrs, wrs))
            .expect("create_qp");
        (qp, e.qp_num(qp).expect("qpn"), cq)
    })
}

/// The immediate-data offset the test initiators ask for: Linux ib_srp's 68.
pub const IMM_OFFSET: u16 = 68;

/// An SRP_CMD of `cdb` (zero-padded to 16 bytes) to `lun`: SIMPLE, no additional CDB, no
/// immediate data, no invalidation; a caller sets those by struct update.
pub fn srp_cmd<'a>(
    tag: u64,
    lun: Lun,
    cdb: &[u8],
    data_out: DataDesc<'a>,
    data_in: DataDesc<'a>,
) -> Cmd<'a> {
    let mut c = [0u8; 16];
    c[..cdb.len()].copy_from_slice(cdb);
    Cmd {
        flags: SolicitFlags::empty(),
        tag: Tag(tag),
        lun,
        task_attr: TaskAttr::Simple,
        cdb: c,
        add_cdb: &[],
        data_out,
        data_in,
        imm_data: &[],
        remote_invalidate: false,
    }
}

/// `cmd`'s IU, immediate data at [`IMM_OFFSET`].
pub fn cmd_bytes(cmd: &Cmd<'_>) -> Vec<u8> {
    let mut buf = vec![0u8; cmd.buffer_len_with(IMM_OFFSET)];
    cmd.emit_with(&mut buf, IMM_OFFSET).expect("fits");
    buf
}

/// An SRP_TSK_MGMT IU: `function` on `lun` (ABORT TASK: of `task_tag`).
pub fn tmf_iu(tag: u64, lun: Lun, function: TaskMgmtFunction, task_tag: u64) -> Vec<u8> {
    let t = TskMgmt {
        flags: SolicitFlags::empty(),
        tag: Tag(tag),
        lun,
        function,
        task_tag: Tag(task_tag),
    };
    let mut buf = vec![0u8; t.buffer_len()];
    t.emit(&mut buf).expect("fits");
    buf
}

/// A RAM disk through the byte interface only: it says nothing of `never_blocks` (so its
/// jobs go to the workers) and takes the default `read_into`/`write_from` (a stack buffer
/// between its bytes and registered memory).
#[derive(Debug)]
pub struct ByteRam(pub srp_target::RamBackend);

impl ByteRam {
    /// `blocks` blocks of `bs`.
    pub fn new(blocks: u64, bs: srp_target::BlockSize) -> ByteRam {
        ByteRam(srp_target::RamBackend::new(blocks, bs).expect("ram"))
    }
}

impl srp_target::Backend for ByteRam {
    fn block_size(&self) -> srp_target::BlockSize {
        self.0.block_size()
    }
    fn blocks(&self) -> u64 {
        self.0.blocks()
    }
    fn read_at(&self, lba: scsi::Lba, buf: &mut [u8]) -> Result<(), srp_target::BackendError> {
        self.0.read_at(lba, buf)
    }
    fn write_at(&self, lba: scsi::Lba, buf: &[u8]) -> Result<(), srp_target::BackendError> {
        self.0.write_at(lba, buf)
    }
    fn flush(&self) -> Result<(), srp_target::BackendError> {
        self.0.flush()
    }
    fn unmap(
        &self,
        lba: scsi::Lba,
        blocks: scsi::BlockCount,
    ) -> Result<(), srp_target::BackendError> {
        self.0.unmap(lba, blocks)
    }
}

/// An Identification CSCD descriptor (E4h) naming a LU by its NAA designator, written out
/// byte by byte (independent of the target's own encoder).
pub fn cscd(naa: &[u8; 16], block_len: u32) -> Vec<u8> {
    let mut d = vec![0u8; 32];
    d[0] = 0xe4;
    d[4] = 0x01; // binary
    d[5] = 0x03; // LU association, NAA
    d[7] = 16;
    d[8..24].copy_from_slice(naa);
    d[29..32].copy_from_slice(&block_len.to_be_bytes()[1..]);
    d
}

/// The daemon options of the daemon tests: a window of 16, 256 KiB transfers, a 300 ms
/// shutdown step.
pub fn daemon_options() -> srp_target::daemon::DaemonOptions {
    let mut options = srp_target::daemon::DaemonOptions::new(providers::system());
    options.limits.window = 16;
    options.limits.max_transfer = 256 << 10;
    options.shutdown_step = std::time::Duration::from_millis(300);
    options
}

/// `blocks` 512-byte blocks of generation `g`: every 4-byte word is `g`.
pub fn generation(g: u32, blocks: u32) -> Vec<u8> {
    g.to_be_bytes().repeat(blocks as usize * 512 / 4)
}

/// The generations in `data` (512-byte blocks, each starting with its generation), in
/// order of first appearance.
pub fn generations(data: &[u8]) -> Vec<u32> {
    let mut out = Vec::new();
    for w in data.chunks(512) {
        let g = u32::from_be_bytes([w[0], w[1], w[2], w[3]]);
        if out.last() != Some(&g) {
            out.push(g);
        }
    }
    out
}

/// A block to block segment descriptor (02h): CSCD `src` at LBA `sl` to CSCD `dst` at LBA
/// `dl`, `blocks` blocks.
pub fn segment(src: u16, dst: u16, blocks: u16, sl: u64, dl: u64) -> Vec<u8> {
    let mut s = vec![0u8; 28];
    s[0] = 0x02;
    s[3] = 0x18;
    s[4..6].copy_from_slice(&src.to_be_bytes());
    s[6..8].copy_from_slice(&dst.to_be_bytes());
    s[10..12].copy_from_slice(&blocks.to_be_bytes());
    s[12..20].copy_from_slice(&sl.to_be_bytes());
    s[20..28].copy_from_slice(&dl.to_be_bytes());
    s
}

/// Two RAM LUs of `blocks` blocks named `names` sharing one copy manager, exported as LUNs
/// 0 and 1 through the port [`nexus_data`]`(0)` comes in on.
pub fn copy_lus(
    names: [&str; 2],
    blocks: u64,
) -> (std::sync::Arc<LogicalUnit>, std::sync::Arc<LogicalUnit>) {
    let cm = srp_target::exec::copy::CopyManager::new();
    let lu = |name: &str| {
        let backend = RamBackend::new(blocks, BlockSize::B512).expect("ram");
        let config = LuConfig {
            copy_manager: Some(cm.clone()),
            ..LuConfig::new(identity(name))
        };
        LogicalUnit::new(Box::new(backend), config).into_shared()
    };
    let (a, b) = (lu(names[0]), lu(names[1]));
    let port = nexus_data(0).port.relative_port;
    cm.export(port, Lun::ZERO, &a);
    cm.export(port, Lun::from_number(1).expect("lun"), &b);
    (a, b)
}

/// A THIRD-PARTY COPY OUT CDB: service action `sa`, LIST IDENTIFIER `list_id` (bytes 6..=9),
/// PARAMETER LIST LENGTH `len`.
pub fn copy_out_cdb(sa: u8, list_id: u32, len: usize) -> [u8; 16] {
    let mut c = [0u8; 16];
    c[0] = 0x83;
    c[1] = sa;
    c[6..10].copy_from_slice(&list_id.to_be_bytes());
    c[10..14].copy_from_slice(&(len as u32).to_be_bytes());
    c
}

/// A token parameter list: `head` (the header, its lengths filled in here), then block
/// device range descriptors of (LBA, blocks).
fn token_list(mut head: Vec<u8>, ranges: &[(u64, u32)]) -> Vec<u8> {
    let at = head.len() - 2;
    head[at..].copy_from_slice(&((ranges.len() * 16) as u16).to_be_bytes());
    for &(lba, blocks) in ranges {
        head.extend(lba.to_be_bytes());
        head.extend(blocks.to_be_bytes());
        head.extend([0; 4]);
    }
    let len = (head.len() - 2) as u16;
    head[..2].copy_from_slice(&len.to_be_bytes());
    head
}

/// A POPULATE TOKEN parameter list with INACTIVITY TIMEOUT `timeout` seconds.
pub fn populate_token_list(timeout: u32, ranges: &[(u64, u32)]) -> Vec<u8> {
    let mut p = vec![0u8; 16];
    p[4..8].copy_from_slice(&timeout.to_be_bytes());
    token_list(p, ranges)
}

/// A WRITE USING TOKEN parameter list: `token` from `offset` blocks on, DEL_TKN `del`.
pub fn write_using_token_list(
    del: bool,
    offset: u64,
    token: &[u8],
    ranges: &[(u64, u32)],
) -> Vec<u8> {
    let mut p = vec![0u8; 16];
    p[2] = if del { 0x02 } else { 0 };
    p[8..16].copy_from_slice(&offset.to_be_bytes());
    p.extend_from_slice(token);
    p.extend([0; 8]);
    token_list(p, ranges)
}

/// splitmix64: the seeded workloads' generator.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
