//! What every channel of the appliance offers at login and accepts per command.

use crate::exec::io::MAX_TRANSFER_BYTES;
use srp::wire::login::BufFormats;

/// Channel limits, the same for every IOC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChannelLimits {
    /// Receive buffer size: the largest IU an initiator may send. 8260 admits Linux ib_srp's
    /// default with immediate data (68-byte offset + 8 KiB).
    pub max_it_iu_len: u32,
    /// The largest IU we send (SRP_RSP with sense and response data fits in 292).
    pub max_ti_iu_len: u32,
    /// Credits (receive buffers) per channel; ib_srpt's default `rq_size`.
    pub window: u32,
    /// Channels per I_T nexus (ib_srp opens one per CPU or completion vector).
    pub max_channels_per_nexus: usize,
    /// Largest transfer per command and direction, as VPD B0h reports.
    pub max_transfer: u64,
    /// Largest external descriptor table fetched (a page per entry at the maximum transfer).
    pub max_table_entries: usize,
    /// Descriptor formats offered.
    pub formats: BufFormats,
    /// Whether immediate data is accepted.
    pub immediate: bool,
}

impl Default for ChannelLimits {
    fn default() -> ChannelLimits {
        ChannelLimits {
            max_it_iu_len: 8260,
            max_ti_iu_len: 512,
            window: 128,
            max_channels_per_nexus: 32,
            max_transfer: u64::from(MAX_TRANSFER_BYTES),
            max_table_entries: (MAX_TRANSFER_BYTES / 4096) as usize,
            formats: BufFormats::DIRECT | BufFormats::INDIRECT,
            immediate: true,
        }
    }
}
