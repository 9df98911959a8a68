//! [`PathDevice`]: one path's device as the multipath disk calls it (the trait lives apart
//! from the `std`-only disk so the core's default device type names it in every build).

use crate::core::Transport;
use crate::outcome::Outcome;
use scsi::Lba;

/// One path's device: the LU through one I_T nexus. Calls block until the command
/// completed on this path (bounded by the transport's timers).
pub trait PathDevice: Send + Sync {
    /// READ of whole blocks into `buf`.
    fn read(&self, lba: Lba, buf: &mut [u8]) -> Outcome;
    /// WRITE of whole blocks.
    fn write(&self, lba: Lba, data: &[u8], fua: bool) -> Outcome;
    /// SYNCHRONIZE CACHE of the whole LU.
    fn flush(&self) -> Outcome;
    /// Any command without data-out, with `data_in` bytes of data-in (path verify, RTPG).
    fn execute(&self, cdb: &[u8], data_in: usize) -> Outcome;
    /// The transport's state.
    fn transport(&self) -> Transport;
    /// Fail the I/O the transport holds for a reconnect now, as if fast I/O fail expired
    /// (another path will carry it). Never resent on this path afterwards.
    fn fail_fast(&self);
}
