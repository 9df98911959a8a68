//! What the kernel glue reads of a SCSI_REQUEST_BLOCK ([`OsSrb`]) into the miniport's SRB
//! ([`request_of`]), and the HwAdapterControl codes ([`AdapterControlType`]). Safe and
//! host-tested: the image's `kernel` module only copies fields in and out.

use win_port::{DataDirection, LuAddress, SrbData, SrbFunction, SrbRequest, SrbStatus};

/// `SRB_FLAGS_DATA_IN` (srb.h).
pub const SRB_FLAGS_DATA_IN: u32 = 0x0000_0040;
/// `SRB_FLAGS_DATA_OUT` (srb.h).
pub const SRB_FLAGS_DATA_OUT: u32 = 0x0000_0080;

/// The fields of a SCSI_REQUEST_BLOCK the miniport reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OsSrb {
    /// `Function`.
    pub function: u8,
    /// `PathId`.
    pub path_id: u8,
    /// `TargetId`.
    pub target_id: u8,
    /// `Lun`.
    pub lun: u8,
    /// `CdbLength`.
    pub cdb_length: u8,
    /// `SenseInfoBufferLength`.
    pub sense_info_buffer_length: u8,
    /// `SrbFlags`.
    pub srb_flags: u32,
    /// `DataTransferLength`.
    pub data_transfer_length: u32,
    /// `TimeOutValue`, seconds.
    pub time_out_value: u32,
    /// `Cdb`.
    pub cdb: [u8; 16],
}

/// The miniport's SRB request for `srb`, or the status it completes with at once:
/// `INVALID_REQUEST` for a function the miniport does not serve, a CDB length outside
/// 1..=16, or data to move — the kernel's buffers (an MDL's pages, StorPort's
/// scatter-gather list) are not yet mapped into the transport's memory model
/// (docs/windows-driver.md), and a request is never run without its data.
pub fn request_of(srb: &OsSrb) -> Result<SrbRequest, SrbStatus> {
    let function = match srb.function {
        0x00 => SrbFunction::ExecuteScsi,
        0x07 => SrbFunction::Shutdown,
        0x08 => SrbFunction::Flush,
        0x10 => SrbFunction::AbortCommand,
        0x13 => SrbFunction::ResetDevice,
        0x20 => SrbFunction::ResetLogicalUnit,
        _ => return Err(SrbStatus::INVALID_REQUEST),
    };
    let address = LuAddress::new(srb.path_id, srb.target_id, srb.lun);
    if function != SrbFunction::ExecuteScsi {
        return Ok(SrbRequest::management(function, address));
    }
    let len = usize::from(srb.cdb_length);
    if !(1..=16).contains(&len) || srb.data_transfer_length != 0 {
        return Err(SrbStatus::INVALID_REQUEST);
    }
    let direction = match srb.srb_flags & (SRB_FLAGS_DATA_IN | SRB_FLAGS_DATA_OUT) {
        SRB_FLAGS_DATA_IN => DataDirection::In,
        SRB_FLAGS_DATA_OUT => DataDirection::Out,
        _ => DataDirection::None,
    };
    let mut r = SrbRequest::scsi(
        address,
        &srb.cdb[..len],
        direction,
        SrbData::Bytes(alloc::vec::Vec::new()),
    );
    r.sense_len = srb.sense_info_buffer_length;
    r.timeout = core::time::Duration::from_secs(u64::from(srb.time_out_value.max(1)));
    Ok(r)
}

/// `SCSI_ADAPTER_CONTROL_TYPE` (srb.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdapterControlType {
    /// `ScsiQuerySupportedControlTypes` (0).
    QuerySupportedControlTypes,
    /// `ScsiStopAdapter` (1).
    StopAdapter,
    /// `ScsiRestartAdapter` (2).
    RestartAdapter,
    /// `ScsiSetBootConfig` (3), `ScsiSetRunningConfig` (4) and anything later: not
    /// supported (`ScsiAdapterControlUnsuccessful`).
    Other(u32),
}

impl AdapterControlType {
    /// From the code StorPort passes.
    pub fn from_code(code: u32) -> AdapterControlType {
        match code {
            0 => AdapterControlType::QuerySupportedControlTypes,
            1 => AdapterControlType::StopAdapter,
            2 => AdapterControlType::RestartAdapter,
            other => AdapterControlType::Other(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read10() -> OsSrb {
        let mut cdb = [0u8; 16];
        cdb[0] = 0x28;
        OsSrb {
            function: 0,
            path_id: 0,
            target_id: 0,
            lun: 3,
            cdb_length: 10,
            sense_info_buffer_length: 18,
            srb_flags: SRB_FLAGS_DATA_IN,
            data_transfer_length: 0,
            time_out_value: 10,
            cdb,
        }
    }

    #[test]
    fn a_command_without_data_becomes_the_miniports_request() {
        let mut os = read10();
        os.cdb[0] = 0x00; // TEST UNIT READY
        os.cdb_length = 6;
        os.srb_flags = 0;
        let r = request_of(&os).expect("request");
        assert_eq!(r.function, SrbFunction::ExecuteScsi);
        assert_eq!(r.address, LuAddress::new(0, 0, 3));
        assert_eq!(&r.cdb[..], &[0u8; 6][..]);
        assert_eq!(r.direction, DataDirection::None);
        assert_eq!(r.sense_len, 18);
        assert_eq!(r.timeout, core::time::Duration::from_secs(10));
    }

    #[test]
    fn management_functions_map_and_others_are_invalid() {
        for (code, f) in [
            (0x07, SrbFunction::Shutdown),
            (0x08, SrbFunction::Flush),
            (0x10, SrbFunction::AbortCommand),
            (0x13, SrbFunction::ResetDevice),
            (0x20, SrbFunction::ResetLogicalUnit),
        ] {
            let os = OsSrb {
                function: code,
                lun: 1,
                ..OsSrb::default()
            };
            let r = request_of(&os).expect("management");
            assert_eq!((r.function, r.address.lun), (f, 1), "{code:#x}");
        }
        for code in [0x01, 0x02, 0x0f, 0x21, 0xff] {
            let os = OsSrb {
                function: code,
                ..OsSrb::default()
            };
            assert_eq!(request_of(&os).err(), Some(SrbStatus::INVALID_REQUEST));
        }
    }

    #[test]
    fn data_and_bad_cdb_lengths_are_refused_not_run_without_their_data() {
        let mut os = read10();
        os.data_transfer_length = 4096;
        assert_eq!(request_of(&os).err(), Some(SrbStatus::INVALID_REQUEST));
        for bad in [0u8, 17] {
            let mut os = read10();
            os.cdb_length = bad;
            assert_eq!(request_of(&os).err(), Some(SrbStatus::INVALID_REQUEST));
        }
    }

    #[test]
    fn adapter_control_codes() {
        assert_eq!(
            AdapterControlType::from_code(0),
            AdapterControlType::QuerySupportedControlTypes
        );
        assert_eq!(
            AdapterControlType::from_code(1),
            AdapterControlType::StopAdapter
        );
        assert_eq!(
            AdapterControlType::from_code(2),
            AdapterControlType::RestartAdapter
        );
        assert_eq!(
            AdapterControlType::from_code(4),
            AdapterControlType::Other(4)
        );
    }
}
