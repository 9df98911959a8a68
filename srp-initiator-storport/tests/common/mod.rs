//! Test helpers and the RAM-disk miniport, written as a StorPort miniport would be.
#![allow(dead_code, unreachable_pub)]

pub mod ram;

use access_layer::verbs::Completion;
use srp_initiator_storport::port::{
    DataDirection, LuAddress, Port, PortConfig, SrbRequest, SrbResult,
};
use std::time::{Duration, Instant};

pub use ram::{Probe, RamConfig, RamMiniport};

/// Every wait in the tests is bounded by this.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// LU `lun` on path 0, target 0.
pub fn lu(lun: u8) -> LuAddress {
    LuAddress::new(0, 0, lun)
}

/// A RAM adapter.
pub fn start(cfg: RamConfig) -> (Port<RamMiniport>, std::sync::Arc<Probe>) {
    start_with(cfg, PortConfig::default())
}

/// A RAM adapter with port knobs.
pub fn start_with(
    cfg: RamConfig,
    port_cfg: PortConfig,
) -> (Port<RamMiniport>, std::sync::Arc<Probe>) {
    let probe = Probe::new(cfg);
    let port = Port::<RamMiniport>::start(probe.clone(), port_cfg).expect("adapter starts");
    (port, probe)
}

/// READ(10).
pub fn read10(at: LuAddress, lba: u32, blocks: u16) -> SrbRequest {
    let mut cdb = [0u8; 10];
    cdb[0] = 0x28;
    cdb[2..6].copy_from_slice(&lba.to_be_bytes());
    cdb[7..9].copy_from_slice(&blocks.to_be_bytes());
    SrbRequest::scsi(
        at,
        &cdb,
        DataDirection::In,
        vec![0; usize::from(blocks) * 512],
    )
}

/// WRITE(10).
pub fn write10(at: LuAddress, lba: u32, data: Vec<u8>) -> SrbRequest {
    let mut cdb = [0u8; 10];
    cdb[0] = 0x2a;
    cdb[2..6].copy_from_slice(&lba.to_be_bytes());
    cdb[7..9].copy_from_slice(&((data.len() / 512) as u16).to_be_bytes());
    SrbRequest::scsi(at, &cdb, DataDirection::Out, data)
}

/// TEST UNIT READY.
pub fn tur(at: LuAddress) -> SrbRequest {
    SrbRequest::scsi(at, &[0u8; 6], DataDirection::None, Vec::new())
}

/// A result with its data copied out and its buffer given back at once, so a test that
/// then checks every page of system memory is free need not drop its results first.
#[derive(Debug)]
pub struct Done {
    /// The request.
    pub id: srp_initiator_storport::port::SrbId,
    /// The SRB status.
    pub status: srp_initiator_storport::port::SrbStatus,
    /// The SCSI status byte.
    pub scsi_status: u8,
    /// The sense bytes.
    pub sense: Vec<u8>,
    /// The data buffer's bytes.
    pub data: Vec<u8>,
    /// `DataTransferLength`.
    pub data_transfer_length: usize,
}

impl From<SrbResult> for Done {
    fn from(r: SrbResult) -> Done {
        Done {
            id: r.id,
            status: r.status,
            scsi_status: r.scsi_status,
            sense: r.sense,
            data: r.data.to_vec(),
            data_transfer_length: r.data_transfer_length,
        }
    }
}

/// The result, within [`DEADLINE`].
pub fn wait(c: &Completion<SrbResult>) -> Done {
    c.wait_timeout(DEADLINE)
        .expect("the request completes")
        .into()
}

/// Polls `cond` until it holds, within [`DEADLINE`].
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + DEADLINE;
    while !cond() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}
