//! A logical unit over a RAM disk, the I_T nexuses that reach it, and the checks every
//! command's outcome must pass whatever the command: the data-in length agrees, CHECK
//! CONDITION carries valid sense (a known ASC/ASCQ that round-trips, a field pointer inside
//! the CDB or parameter list), RESERVATION CONFLICT carries neither sense nor data, and an
//! underrun is reported only for a short data-out.

use scsi::sense::SenseKeySpecific;
use scsi::{Lun, Sense, SenseKey, Status};
use srp::wire::PortId;
use srp_target::io::NexusInfo;
use srp_target::{
    BlockSize, CmdOutput, LogicalUnit, LuConfig, LunIdentity, Oui, PortIdentity, RamBackend,
    TargetPortGroup, TransportError,
};
use wirekit::WireRepr;

/// Blocks of the RAM disk: small, so whole-disk commands stay cheap.
pub const BLOCKS: u64 = 64;
/// Its block size in bytes.
pub const BLOCK: usize = 512;

/// A writable LU of [`BLOCKS`] blocks (`wce_changeable`: MODE SELECT may change WCE).
pub fn ram_lu(wce_changeable: bool) -> LogicalUnit {
    let backend = RamBackend::new(BLOCKS, BlockSize::B512).expect("a small RAM disk");
    let oui = Oui::new(0x00_1405).expect("24 bits");
    let config = LuConfig {
        wce_changeable,
        ..LuConfig::new(LunIdentity::derive("fuzz-lu", oui))
    };
    LogicalUnit::new(Box::new(backend), config)
}

/// Six I_T nexuses: initiators A, B and C, each through target ports 1 and 2.
pub fn nexuses() -> Vec<NexusInfo> {
    let mut v = Vec::new();
    for initiator in [0xa0u8, 0xb0, 0xc0] {
        for ioc in 0..2 {
            v.push(NexusInfo {
                initiator: PortId([initiator; 16]),
                luns: vec![Lun::ZERO],
                port: PortIdentity::for_ioc(ioc).expect("port"),
                groups: TargetPortGroup::one_per_ioc(2),
            });
        }
    }
    v
}

/// What one command returned.
#[derive(Debug)]
pub struct Outcome {
    /// The engine's answer.
    pub result: Result<CmdOutput, TransportError>,
    /// The data-in.
    pub data_in: Vec<u8>,
}

impl Outcome {
    /// The status, if the command got one.
    pub fn status(&self) -> Option<Status> {
        self.result.as_ref().ok().map(|o| o.status)
    }

    /// Whether the command completed GOOD.
    pub fn good(&self) -> bool {
        self.status() == Some(Status::Good)
    }

    /// The sense of a CHECK CONDITION.
    pub fn sense(&self) -> Option<&Sense> {
        self.result.as_ref().ok().and_then(|o| o.sense.as_ref())
    }
}

/// Runs `cdb` with data-out `dout` on `lu` from `nexus`, and checks the outcome.
pub fn exec(lu: &LogicalUnit, nexus: &NexusInfo, cdb: &[u8], dout: &[u8]) -> Outcome {
    let mut data_in = vec![0xee; 7];
    let result = lu.execute(&nexus.nexus(), cdb, dout, &mut data_in);
    match &result {
        Ok(out) => check_output(out, &data_in, cdb, dout),
        Err(TransportError::DataOutUnderrun {
            need_bytes,
            have_bytes,
        }) => {
            assert_eq!(*have_bytes, dout.len(), "underrun of {cdb:02x?}");
            assert!(have_bytes < need_bytes, "an underrun with enough data-out");
            assert!(data_in.is_empty(), "data-in with a transport error");
        }
        Err(e) => panic!("{cdb:02x?}: {e:?}"),
    }
    Outcome { result, data_in }
}

fn check_output(out: &CmdOutput, data_in: &[u8], cdb: &[u8], dout: &[u8]) {
    assert_eq!(
        out.data_in_len,
        data_in.len(),
        "data-in length of {cdb:02x?}"
    );
    assert!(!out.data_in_staged);
    assert!(
        out.data_out_len <= dout.len(),
        "used more data-out than given"
    );
    match out.status {
        Status::CheckCondition => {
            let sense = out.sense.as_ref().expect("CHECK CONDITION without sense");
            check_sense(sense, cdb, dout);
            assert!(data_in.is_empty(), "data-in with CHECK CONDITION");
        }
        Status::ReservationConflict => {
            // SAM-5: no sense, no data.
            assert_eq!(out.sense, None);
            assert!(data_in.is_empty());
            assert!(out.abort_nexuses.is_empty());
        }
        Status::Good => {}
        // A copy beyond the copy manager's concurrent copies.
        Status::Busy if cdb.first() == Some(&0x83) => assert_eq!(out.sense, None),
        other => panic!("{cdb:02x?}: unexpected status {other:?}"),
    }
}

/// Valid sense: a key other than NO SENSE, an ASC/ASCQ SPC defines, bytes that round-trip,
/// and a field pointer (if any) inside what it points into.
pub fn check_sense(sense: &Sense, cdb: &[u8], dout: &[u8]) {
    let code = sense.code();
    assert_ne!(code.key, SenseKey::NoSense, "{sense:?}");
    assert!(
        code.description().is_some(),
        "an ASC/ASCQ SPC does not define: {sense:?}"
    );
    let mut buf = vec![0xa5; sense.buffer_len()];
    let n = sense.emit(&mut buf).expect("sense emits");
    assert_eq!(
        Sense::parse(&buf[..n]).as_ref(),
        Ok(sense),
        "sense round trip"
    );
    if let Some(SenseKeySpecific::FieldPointer(p)) = sense.sense_key_specific() {
        assert_eq!(code.key, SenseKey::IllegalRequest, "{sense:?}");
        assert!(p.bit.is_none_or(|b| b < 8));
        let len = if p.in_cdb { cdb.len() } else { dout.len() };
        assert!(
            usize::from(p.byte) < len,
            "field pointer {p:?} outside {len} bytes ({cdb:02x?})"
        );
    }
}

/// The bytes of READ(10) / WRITE(10) of `blocks` at `lba`.
pub fn rw10(op: u8, lba: u32, blocks: u16) -> [u8; 10] {
    let l = lba.to_be_bytes();
    let n = blocks.to_be_bytes();
    [op, 0, l[0], l[1], l[2], l[3], 0, n[0], n[1], 0]
}
