//! Fuzzes the control-socket formats: the access layer's header and bodies, and the
//! target's service messages (list pages of IOCs, ports, LUNs and sessions; switches).
//! Whatever parses must emit, and the emitted bytes must parse back to the same value.
use access_layer::ctl::wire::{
    CaEntry, CtlHeader, ErrorReply, Hello, HelloReply, ListCasReply, OpenCa, PortInfo, QueryPort,
    Redirect,
};
use srp_target::control::wire::{Done, ListPage, Page, SetIoc, SetPort};
use srp_target::control::{IocStatus, LunStatus, PortStatus, SessionStatus};
use wirekit::WireRepr;

/// One input.
pub fn run(data: &[u8]) {
    crate::check!(
        data,
        CtlHeader,
        Hello,
        HelloReply,
        CaEntry,
        ListCasReply,
        OpenCa,
        Redirect,
        QueryPort,
        PortInfo,
        ErrorReply,
        ListPage,
        Page<IocStatus>,
        Page<PortStatus>,
        Page<LunStatus>,
        Page<SessionStatus>,
        SetIoc,
        SetPort,
        Done,
    );
}
