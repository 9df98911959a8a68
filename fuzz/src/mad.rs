//! Fuzzes the MAD wire formats of `access-layer`: the dispatching parser and every message
//! parser. Whatever parses must emit, and the emitted bytes must parse back to the same value
//! (parse never panics; emit writes a canonical form of every field it kept).
use crate::round_trip::round_trip;

use access_layer::mad::class_port_info::ClassPortInfo;
use access_layer::mad::cm::{CmDrep, CmDreq, CmMra, CmRej, CmRep, CmReq, CmRtu, CmaHeader};
use access_layer::mad::dm::{IocProfile, IouInfo, ServiceEntries};
use access_layer::mad::sa::{PathRecord, SaHeader};
use access_layer::mad::{Mad, MadHeader, RmppHeader, parse_any};
use wirekit::WireRepr;

/// One input.
pub fn run(data: &[u8]) {
    if let Ok(m) = parse_any(data) {
        round_trip(&m, &mut Vec::new());
    }
    crate::check!(
        data,
        Mad<'_>,
        MadHeader,
        RmppHeader,
        ClassPortInfo,
        CmReq,
        CmRep,
        CmRej,
        CmMra,
        CmRtu,
        CmDreq,
        CmDrep,
        CmaHeader,
        SaHeader,
        PathRecord,
        IouInfo,
        IocProfile,
        ServiceEntries,
    );
}
