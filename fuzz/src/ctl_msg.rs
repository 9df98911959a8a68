//! Fuzzes the access layer's fixed-layout control-socket formats: the header and the
//! protocol's own bodies (Hello, ListCas, OpenCa, Redirect, QueryCa, QueryPort, errors).
//! Whatever parses must emit, and the emitted bytes must parse back to the same value.
//! The daemons' service bodies are JSON: [`crate::ctl_target`] and [`crate::ctl_host`]
//! fuzz them behind the socket framing.
use access_layer::ctl::wire::{
    CaEntry, CtlHeader, ErrorReply, Hello, HelloReply, ListCasReply, OpenCa, PortInfo, QueryPort,
    Redirect,
};
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
    );
}
