//! `srpctl devices`: the RDMA devices rdma-core sees, their ports and GID tables — what a
//! target port or host portal names with `provider = "rdma-core"` (`device`,
//! `device_port`, `gid_index`; by default the device whose RoCEv2 GID holds the address).

use crate::table::table;
use access_layer::verbs::PortInfo;
use anyhow::Result;
use serde_json::{Value, json};

/// Prints every port of every RDMA device, or why none can be listed.
pub(crate) fn run(as_json: bool) -> Result<()> {
    let ports = providers::rdma_devices()?;
    if as_json {
        let v: Vec<Value> = ports.iter().map(port_json).collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    if ports.is_empty() {
        println!(
            "no RDMA device: load a driver (a NIC's, or `rdma link add rxe0 type rxe netdev eth0` for the kernel's soft RoCE)"
        );
        return Ok(());
    }
    print!("{}", render(&ports));
    Ok(())
}

fn render(ports: &[PortInfo]) -> String {
    let mtu = |m: Option<usize>| m.map_or("-".into(), |v| v.to_string());
    let rows = ports
        .iter()
        .flat_map(|p| {
            let fencing = if p.fast_reg {
                "fast registration"
            } else if p.mem_windows {
                "memory windows"
            } else {
                "none (trust-target only)"
            };
            let head = vec![
                p.device.clone(),
                p.port.to_string(),
                p.state.to_owned(),
                p.link_layer.to_owned(),
                format!("{}/{}", mtu(p.active_mtu), mtu(p.max_mtu)),
                fencing.to_owned(),
            ];
            let mut rows = Vec::new();
            if p.gids.is_empty() {
                rows.push([head.clone(), vec!["-".into(), String::new()]].concat());
            }
            for (i, (index, gid, kind)) in p.gids.iter().enumerate() {
                let lead = if i == 0 {
                    head.clone()
                } else {
                    vec![String::new(); head.len()]
                };
                rows.push([lead, vec![index.to_string(), format!("{gid} ({kind})")]].concat());
            }
            rows
        })
        .collect();
    table(
        &[
            "DEVICE",
            "PORT",
            "STATE",
            "LINK",
            "MTU",
            "HOST FENCING",
            "GID",
            "ADDRESS",
        ],
        rows,
    )
}

fn port_json(p: &PortInfo) -> Value {
    json!({
        "device": p.device, "node_guid": format!("{:#018x}", p.node_guid.0), "port": p.port,
        "state": p.state, "link_layer": p.link_layer,
        "active_mtu": p.active_mtu, "max_mtu": p.max_mtu,
        "fast_reg": p.fast_reg, "mem_windows": p.mem_windows,
        "gids": p.gids.iter().map(|(i, g, k)| json!({"index": i, "gid": g.to_string(), "type": k})).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ib_verbs::{Gid, Guid};

    #[test]
    fn a_port_lists_each_gid_under_its_device() {
        let p = PortInfo {
            device: "rxe0".into(),
            node_guid: Guid(0x5054_00ff_fe77_0001),
            port: 1,
            state: "ACTIVE",
            link_layer: "Ethernet",
            active_mtu: Some(1024),
            max_mtu: Some(4096),
            gids: vec![
                (
                    0,
                    Gid::from_ip("fe80::5054:ff:fe77:1".parse().expect("ip")),
                    "RoCE v2",
                ),
                (
                    1,
                    Gid::from_ip("192.168.77.1".parse().expect("ip")),
                    "RoCE v2",
                ),
            ],
            fast_reg: false,
            mem_windows: true,
        };
        let t = render(std::slice::from_ref(&p));
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3, "{t}");
        assert!(
            lines[1].starts_with("rxe0    1     ACTIVE  Ethernet  1024/4096  memory windows"),
            "{t}"
        );
        assert!(lines[2].contains("::ffff:192.168.77.1 (RoCE v2)"), "{t}");
        let j = port_json(&p);
        assert_eq!(j["gids"][1]["index"], 1);
        assert_eq!(j["mem_windows"], true);
    }
}
