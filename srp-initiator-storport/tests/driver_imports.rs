//! Every storport.sys export the kernel image imports (driver/storport/storport.def) has
//! the emulated-port function that stands for it, and the emulated port's tests exercise
//! that function: the image's glue makes no StorPort call the emulated port does not
//! model (issue #31, Deliver 4). An export added to the .def without a counterpart here
//! fails this test; so does a counterpart whose signature drifts (the function pointers
//! below are typed).

use srp_initiator_storport::hw::StorPortCalls;
use srp_initiator_storport::port::{LuAddress, Port, PortServices};
use srp_initiator_storport::srp::{SrbExt, SrpMiniport};
use std::collections::BTreeMap;
use std::time::Duration;
use win_port::Srb;

/// storport.sys export → (the emulated counterpart, where the emulated port's tests use it).
fn counterparts() -> BTreeMap<&'static str, (&'static str, &'static str)> {
    // Typed references: these stop compiling if a counterpart goes or changes shape.
    let _start: fn(_, _) -> _ = Port::<SrpMiniport>::start;
    let _complete: fn(&PortServices<SrpMiniport>, &Srb<SrbExt>) =
        PortServices::<SrpMiniport>::request_complete;
    let _timer: fn(&PortServices<SrpMiniport>, Duration) =
        PortServices::<SrpMiniport>::request_timer_call;
    let _dpc: fn(&PortServices<SrpMiniport>) -> bool = PortServices::<SrpMiniport>::issue_dpc;
    let _depth: fn(&PortServices<SrpMiniport>, LuAddress, u32) -> bool =
        PortServices::<SrpMiniport>::set_device_queue_depth;
    let _pause: fn(&PortServices<SrpMiniport>, u32) = PortServices::<SrpMiniport>::pause;
    let _resume: fn(&PortServices<SrpMiniport>) = PortServices::<SrpMiniport>::resume;
    // The glue's calls and the emulated port's are one trait's two implementations.
    fn calls<T: StorPortCalls>() {}
    calls::<PortServices<SrpMiniport>>();
    BTreeMap::from([
        (
            "StorPortInitialize",
            (
                "Port::start (HwFindAdapter, HwInitialize)",
                "tests/port_*.rs, tests/srp_e2e.rs",
            ),
        ),
        (
            "StorPortNotification",
            (
                "PortServices::request_complete (RequestComplete), ::request_timer_call \
                 (RequestTimerCall), ::issue_dpc (InitializeDpc/IssueDpc: the port's one DPC)",
                "tests/port_manual.rs, tests/port_verifier.rs, tests/srp_e2e.rs",
            ),
        ),
        (
            "StorPortSetDeviceQueueDepth",
            (
                "PortServices::set_device_queue_depth",
                "the SRP miniport's HwInitialize, tests/srp_e2e.rs",
            ),
        ),
        (
            "StorPortPause",
            (
                "PortServices::pause",
                "tests/port_ram.rs, tests/port_verifier.rs",
            ),
        ),
        (
            "StorPortResume",
            (
                "PortServices::resume",
                "tests/port_ram.rs, tests/port_verifier.rs",
            ),
        ),
    ])
}

/// The .def's export names, without x86 stdcall decorations.
fn def_exports() -> Vec<String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../driver/storport/storport.def"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut in_exports = false;
    let mut names = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with(';') {
            continue;
        }
        if line == "EXPORTS" {
            in_exports = true;
            continue;
        }
        if in_exports {
            let name = line.split('@').next().unwrap_or(line).trim();
            names.push(name.to_string());
        }
    }
    names
}

#[test]
fn every_storport_import_of_the_image_has_its_emulated_counterpart() {
    let exports = def_exports();
    assert!(
        exports.len() >= 5,
        "the .def lists the image's imports: {exports:?}"
    );
    let table = counterparts();
    let unmapped: Vec<&String> = exports
        .iter()
        .filter(|e| !table.contains_key(e.as_str()))
        .collect();
    assert!(
        unmapped.is_empty(),
        "storport.sys imports with no emulated-port counterpart named here: {unmapped:?}"
    );
    let unused: Vec<&&str> = table
        .keys()
        .filter(|k| !exports.iter().any(|e| e == *k))
        .collect();
    assert!(
        unused.is_empty(),
        "counterparts of imports the image no longer makes: {unused:?}"
    );
    for (import, (counterpart, tests)) in &table {
        eprintln!("{import:<28} → {counterpart} [{tests}]");
    }
}
