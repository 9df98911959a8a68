//! Fuzzes the MAD wire formats of `access-layer`: the dispatching parser and every message
//! parser. Whatever parses must emit, and the emitted bytes must parse back to the same value
//! (parse never panics; emit writes a canonical form of every field it kept).
#![no_main]

use access_layer::mad::class_port_info::ClassPortInfo;
use access_layer::mad::cm::{CmDrep, CmDreq, CmMra, CmRej, CmRep, CmReq, CmRtu, CmaHeader};
use access_layer::mad::dm::{IocProfile, IouInfo, ServiceEntries};
use access_layer::mad::sa::{PathRecord, SaHeader};
use access_layer::mad::{Mad, MadHeader, RmppHeader, parse_any};
use libfuzzer_sys::fuzz_target;
use wirekit::WireRepr;

/// Emits `v` and checks the bytes parse back to `v`.
fn round_trip<'a, T: WireRepr<'a> + PartialEq + core::fmt::Debug>(v: &T, buf: &'a mut Vec<u8>) {
    buf.resize(v.buffer_len(), 0xa5);
    let n = v.emit(buf).expect("a parsed value must emit");
    assert_eq!(n, v.buffer_len());
    let buf: &'a Vec<u8> = buf;
    let back = T::parse(&buf[..n]).expect("emitted bytes must parse");
    assert_eq!(&back, v);
}

/// If `T` parses `data`, it must round-trip.
macro_rules! check {
    ($data:expr, $($t:ty),+ $(,)?) => {
        $( if let Ok(v) = <$t>::parse($data) { round_trip(&v, &mut Vec::new()); } )+
    };
}

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = parse_any(data) {
        round_trip(&m, &mut Vec::new());
    }
    check!(
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
});
