//! `srpctl discover <portal>`: asks a portal's Device Management agent what it serves, as
//! `ibsrpdm` does — IOUnitInfo, each IOC's IOControllerProfile and its service entries —
//! through a soft HCA port of our own on the local address that routes to the portal
//! (`srp_hostd::discover::sweep`, the host daemon's sweep).
//!
//! Output: one block per IOC (GUID, IDString, IO class, queue depth, message and transfer
//! sizes, each SRP service's id_ext and service ID); `--login-strings` prints the lines
//! Linux `ib_srp`'s `add_target` takes, in the RDMA-CM form that works over RoCE or (with
//! `--ib-cm`) the IB CM form `ibsrpdm -c` prints; `--json` the same as JSON.

use crate::hex::to_hex;
use access_layer::dm::IocRecord;
use anyhow::Result;
use ib_verbs::{Gid, Guid};
use serde_json::{Value, json};
use srp_hostd::discover;
use std::net::IpAddr;
use std::time::Duration;

/// What the sweep found: the portal's IOCs.
struct Found {
    local: IpAddr,
    iocs: Vec<IocRecord>,
}

/// Sweeps `portal` once from `local` (or the routed source address), within `timeout`.
fn sweep(
    portal: IpAddr,
    local: Option<IpAddr>,
    pkey: ib_verbs::PKey,
    timeout: Duration,
) -> Result<Found> {
    let local = match local {
        Some(l) => l,
        None => discover::route_source(portal)?,
    };
    let guid = Guid(0x5352_5044_0000_0000 | u64::from(std::process::id()));
    let spec = access_layer::verbs::DeviceSpec::soft(std::net::SocketAddr::new(local, 4791), guid);
    let iocs = discover::sweep(&providers::system(), &spec, portal, pkey, timeout).map_err(
        |e| match e {
            discover::DiscoverError::Port { .. } => anyhow::anyhow!("{e} (pass --local)"),
            e => e.into(),
        },
    )?;
    Ok(Found { local, iocs })
}

fn ioc_json(portal: IpAddr, r: &IocRecord) -> Value {
    let p = &r.profile;
    let services: Vec<Value> = r
        .entries
        .iter()
        .map(|e| {
            json!({
                "name": e.name_str().unwrap_or_default(),
                "service_id": format!("{:#018x}", e.service_id.0),
                "id_ext": e.srp_id_ext().map(|x| format!("{x:016x}")),
            })
        })
        .collect();
    json!({
        "portal": portal.to_string(),
        "slot": r.slot,
        "ioc_guid": format!("{:016x}", p.guid.0),
        "id_string": p.id_string_str().unwrap_or_default(),
        "io_class": format!("{:#06x}", u16::from(p.io_class)),
        "send_queue_depth": p.send_queue_depth,
        "send_size": p.send_size,
        "rdma_size": p.rdma_size,
        "services": services,
    })
}

/// Which form of `add_target` string to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LoginStrings {
    /// `dest=<portal>:<port>`: RDMA-CM, what Linux ib_srp over RoCE logs in with.
    RdmaCm(u16),
    /// `dgid=…,pkey=…,service_id=…`, as `ibsrpdm -c` (IB CM; needs a subnet manager); the
    /// P_Key is the partition asked on.
    IbCm,
}

/// `ib_srp` `add_target` strings, one per SRP service.
fn login_strings(
    portal: IpAddr,
    pkey: ib_verbs::PKey,
    r: &IocRecord,
    form: LoginStrings,
) -> Vec<String> {
    let dgid = to_hex(&Gid::from_ip(portal).0);
    let dest = match portal {
        IpAddr::V4(a) => a.to_string(),
        IpAddr::V6(a) => format!("[{a}]"),
    };
    r.entries
        .iter()
        .filter_map(|e| {
            e.srp_id_ext().map(|id_ext| {
                let ids = format!("id_ext={id_ext:016x},ioc_guid={:016x}", r.profile.guid.0);
                match form {
                    LoginStrings::RdmaCm(port) => format!("{ids},dest={dest}:{port}"),
                    LoginStrings::IbCm => format!(
                        "{ids},dgid={dgid},pkey={:04x},service_id={:016x}",
                        pkey.0, e.service_id.0
                    ),
                }
            })
        })
        .collect()
}

/// Runs the command.
pub(crate) fn run(
    portal: IpAddr,
    local: Option<IpAddr>,
    pkey: ib_verbs::PKey,
    timeout: Duration,
    as_json: bool,
    strings: Option<LoginStrings>,
) -> Result<()> {
    let found = sweep(portal, local, pkey, timeout)?;
    if as_json {
        let v: Vec<Value> = found.iocs.iter().map(|r| ioc_json(portal, r)).collect();
        println!("{}", serde_json::to_string_pretty(&Value::Array(v))?);
        return Ok(());
    }
    if let Some(form) = strings {
        for r in &found.iocs {
            for s in login_strings(portal, pkey, r, form) {
                println!("{s}");
            }
        }
        return Ok(());
    }
    println!(
        "portal {portal} (asked from {}): {} IOC(s)",
        found.local,
        found.iocs.len()
    );
    for r in &found.iocs {
        let p = &r.profile;
        println!(
            "  slot {}: IOC {:016x} \"{}\", IO class {:#06x}, queue depth {}, send size {}, RDMA size {}",
            r.slot,
            p.guid.0,
            p.id_string_str().unwrap_or_default(),
            u16::from(p.io_class),
            p.send_queue_depth,
            p.send_size,
            p.rdma_size
        );
        for e in &r.entries {
            println!(
                "    service \"{}\": service ID {:#018x}",
                e.name_str().unwrap_or_default(),
                e.service_id.0
            );
        }
    }
    Ok(())
}
