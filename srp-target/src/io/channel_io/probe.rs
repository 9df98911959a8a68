//! Idle probing: a channel whose initiator has been silent for a while sends it an
//! SRP_CRED_REQ (granting whatever credits are owed, or none). The initiator's RC QP must
//! acknowledge the SEND; an initiator that vanished without a DREQ (its host powered off,
//! its cable cut, a forged login whose address never answered) fails the SEND's retries
//! and the channel closes with the reason, releasing its memory. A live initiator answers
//! SRP_CRED_RSP, which the channel expects.
//!
//! The retries are bounded because the QP's ACK timeout is ([`crate::daemon`] caps what the
//! REQ asks), so a channel whose peer is gone closes within the probe interval plus about
//! half a minute, idle or not.

use super::{ChannelIo, IoState, SendFlags, SendOp, SendWr, WrKind, sge};
use std::time::{Duration, Instant};

impl ChannelIo {
    /// Reads the time from `clock` from now on (a simulated run's virtual clock); the
    /// initiator counts as heard from now.
    pub fn set_clock(&mut self, clock: std::sync::Arc<dyn ib_verbs::time::Clock>) {
        self.last_heard = clock.now();
        self.clock = clock;
    }

    /// Probes the initiator if it has been silent for `idle` or longer at `now` and nothing
    /// else is outstanding that would show it gone (commands in flight have their own
    /// transfers and responses, a credit request its own SEND). Returns whether a probe was
    /// sent.
    pub fn probe_if_idle(&mut self, now: Instant, idle: Duration) -> bool {
        if self.state != IoState::Live
            || self.cred_in_flight
            || self.in_flight() > 0
            || now.saturating_duration_since(self.last_heard) < idle
            || self.layout.send_len < 16
        {
            return false;
        }
        let mut buf = [0u8; 16];
        let Some(len) = self.channel.probe_req(&mut buf) else {
            return false;
        };
        let off = self.layout.cred();
        if self.mem.write(off as usize, &buf[..len]).is_err() {
            self.teardown(Some("credit request buffer out of range".into()));
            return false;
        }
        self.wrs.push(SendWr {
            wr_id: WrKind::Cred.encode(),
            op: SendOp::Send,
            sg_list: [sge(self.lkey(), off, len as u32)].into(),
            flags: SendFlags::SIGNALED,
            ud: None,
        });
        self.cred_in_flight = true;
        self.probing = true;
        self.probes += 1;
        self.post_or_die();
        true
    }

    /// Idle probes sent since login.
    pub fn probes(&self) -> u64 {
        self.probes
    }
}
