//! Finding and opening the RDMA device, port and GID a [`DeviceSpec`] names: by device
//! name, or by the address whose RoCEv2 (or InfiniBand) GID a port carries. Every failure
//! says what exists and what to install or configure.

use crate::ffi::types::{
    IBV_DEVICE_MEM_WINDOW_TYPE_2A, IBV_DEVICE_MEM_WINDOW_TYPE_2B, IBV_GID_TYPE_ROCE_V1,
    IBV_LINK_LAYER_ETHERNET, ibv_port_attr,
};
use crate::ffi::verbs::{CompChannel, Context, OpenFailure, device_names};
use access_layer::verbs::{CaCaps, DeviceSpec, OpenError, PortInfo, ProviderKind};
use ib_verbs::{Gid, Guid, PathMtu};
use std::sync::Arc;

/// GID table entries looked at when searching for an address (RoCE puts an interface's
/// addresses in the first entries; rxe's table is 1024 long).
const GID_SCAN: u32 = 128;

/// The opened device and the port the consumer's port 1 stands for.
#[derive(Debug)]
pub(crate) struct DeviceCore {
    pub(crate) ctx: Arc<Context>,
    /// The device's port number the consumer's port 1 maps to.
    pub(crate) port: u8,
    /// The GID index the port's traffic uses.
    pub(crate) gid_index: u8,
    /// That GID.
    pub(crate) gid: Gid,
    /// The device's node GUID.
    pub(crate) node_guid: Guid,
    /// What the device can do.
    pub(crate) caps: CaCaps,
    /// RDMA READs the device serves per QP (responder) and issues (initiator).
    pub(crate) max_rd_atom: (u8, u8),
    /// Where CQ notifications arrive.
    pub(crate) channel: Arc<CompChannel>,
    /// Linux's rxe, which replays memory-window binds on a retry: they are fenced
    /// (`bind_fence.rs`).
    pub(crate) fence_binds: bool,
    /// The deepest work queue and CQ the device makes.
    pub(crate) max_qp_wr: u32,
    pub(crate) max_cqe: u32,
}

fn no_provider(e: impl std::fmt::Display) -> OpenError {
    OpenError::NoProvider {
        provider: ProviderKind::RdmaCore,
        reason: e.to_string(),
    }
}

fn no_device(reason: String) -> OpenError {
    OpenError::NoDevice {
        provider: ProviderKind::RdmaCore,
        reason,
    }
}

fn failed(device: &str, reason: String) -> OpenError {
    OpenError::Device {
        provider: ProviderKind::RdmaCore,
        device: device.to_owned(),
        reason,
    }
}

/// What to do when the kernel lists no RDMA device.
const NO_DEVICES: &str = "the kernel lists no RDMA devices: load the NIC's RDMA driver and \
     ib_uverbs and rdma_ucm (for a soft RoCE device: modprobe rdma_rxe; rdma link add rxe0 \
     type rxe netdev <interface>)";

impl DeviceCore {
    /// Opens the device `spec` names (see the module doc).
    pub(crate) fn open(spec: &DeviceSpec) -> Result<DeviceCore, OpenError> {
        let names = device_names().map_err(no_provider)?;
        if names.is_empty() {
            return Err(no_device(NO_DEVICES.into()));
        }
        let want = Gid::from_ip(spec.address.ip());
        let candidates: Vec<String> = match &spec.device {
            Some(d) if names.contains(d) => vec![d.clone()],
            Some(d) => {
                return Err(no_device(format!(
                    "no RDMA device {d:?} (devices: {})",
                    names.join(", ")
                )));
            }
            None => names.clone(),
        };
        let mut seen = Vec::new();
        for name in &candidates {
            let ctx = Context::open(name).map_err(|e| match e {
                OpenFailure::Load(l) => no_provider(l),
                OpenFailure::NoDevices(e) => no_device(format!("{NO_DEVICES} ({e})")),
                OpenFailure::NoSuchDevice => no_device(format!("RDMA device {name:?} is gone")),
                OpenFailure::Open(io) => failed(name, format!("cannot open: {io}")),
            })?;
            let attr = ctx
                .query_device()
                .map_err(|e| failed(name, format!("query device: {e}")))?;
            let ports: Vec<u8> = match spec.port {
                Some(p) if p >= 1 && p <= attr.phys_port_cnt => vec![p],
                Some(p) => {
                    return Err(no_device(format!(
                        "{name} has no port {p} (ports 1..={})",
                        attr.phys_port_cnt
                    )));
                }
                None => (1..=attr.phys_port_cnt).collect(),
            };
            for port in ports {
                let pa = ctx
                    .query_port(port)
                    .map_err(|e| failed(name, format!("query port {port}: {e}")))?;
                let found = match spec.gid_index {
                    Some(i) => {
                        let (g, _) = ctx
                            .gid(port, u32::from(i))
                            .map_err(|e| failed(name, format!("port {port} GID {i}: {e}")))?;
                        Some((i, Gid(g.raw)))
                    }
                    None => find_gid(&ctx, port, &pa, want),
                };
                if let Some((index, gid)) = found {
                    return Self::finish(ctx, &attr, port, &pa, index, gid);
                }
                seen.push(format!("{name} port {port}"));
            }
        }
        Err(no_device(format!(
            "no RDMA port carries {} (looked at {}): give the port's address, or name the \
             device, port and GID index",
            spec.address.ip(),
            seen.join(", ")
        )))
    }

    fn finish(
        ctx: Arc<Context>,
        attr: &crate::ffi::types::ibv_device_attr,
        port: u8,
        _pa: &ibv_port_attr,
        gid_index: u8,
        gid: Gid,
    ) -> Result<DeviceCore, OpenError> {
        let channel = CompChannel::create(&ctx)
            .map_err(|e| failed(ctx.name(), format!("completion channel: {e}")))?;
        let windows = attr.device_cap_flags
            & (IBV_DEVICE_MEM_WINDOW_TYPE_2A | IBV_DEVICE_MEM_WINDOW_TYPE_2B)
            != 0;
        let rd = |n: i32| u8::try_from(n.clamp(0, 255)).unwrap_or(u8::MAX);
        let mem_windows = windows && attr.max_mw > 0;
        let fence_binds = mem_windows && attr.vendor_id == crate::bind_fence::RXE_VENDOR_ID;
        if fence_binds {
            tracing::info!(
                device = ctx.name(),
                "rxe replays local operations on a retry: memory-window binds are fenced \
                 behind a sentinel LOCAL_INV (see the provider's bind_fence.rs)"
            );
        }
        let max = |n: i32| u32::try_from(n).unwrap_or(0);
        Ok(DeviceCore {
            port,
            gid_index,
            gid,
            node_guid: Guid(u64::from_be(attr.node_guid)),
            caps: CaCaps {
                // User space has no fast-registration work request.
                fast_reg: false,
                mem_windows,
            },
            max_rd_atom: (rd(attr.max_qp_rd_atom), rd(attr.max_qp_init_rd_atom)),
            channel,
            fence_binds,
            max_qp_wr: max(attr.max_qp_wr),
            max_cqe: max(attr.max_cqe),
            ctx,
        })
    }

    /// The port's attributes now.
    pub(crate) fn port_attr(&self) -> std::io::Result<ibv_port_attr> {
        self.ctx.query_port(self.port)
    }

    /// The port's active MTU as a path MTU.
    pub(crate) fn active_mtu(pa: &ibv_port_attr) -> Option<PathMtu> {
        u8::try_from(pa.active_mtu).ok().map(PathMtu::from)
    }
}

/// The index and GID of `want` in `port`'s table (a RoCEv2 entry before a RoCEv1 one of
/// the same address).
fn find_gid(ctx: &Context, port: u8, pa: &ibv_port_attr, want: Gid) -> Option<(u8, Gid)> {
    let len = u32::try_from(pa.gid_tbl_len).unwrap_or(0).min(GID_SCAN);
    let mut v1 = None;
    let mut empty = 0;
    for i in 0..len {
        let Ok((g, kind)) = ctx.gid(port, i) else {
            continue;
        };
        if g.raw == [0; 16] {
            empty += 1;
            if empty >= 8 {
                break;
            }
            continue;
        }
        empty = 0;
        if g.raw == want.0 {
            let i8 = u8::try_from(i).ok()?;
            if kind == Some(IBV_GID_TYPE_ROCE_V1) {
                v1.get_or_insert((i8, want));
            } else {
                return Some((i8, want));
            }
        }
    }
    v1
}

/// Every port of every RDMA device, as `ibv_devinfo` shows them.
pub fn devices() -> Result<Vec<PortInfo>, OpenError> {
    let names = device_names().map_err(no_provider)?;
    let mut out = Vec::new();
    for name in names {
        let ctx = match Context::open(&name) {
            Ok(c) => c,
            Err(OpenFailure::Load(l)) => return Err(no_provider(l)),
            Err(e) => {
                tracing::warn!(device = %name, error = ?e, "RDMA device not listed: it does not open");
                continue;
            }
        };
        let attr = match ctx.query_device() {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(device = %name, error = ?e, "RDMA device not listed: ibv_query_device failed");
                continue;
            }
        };
        for port in 1..=attr.phys_port_cnt {
            let pa = match ctx.query_port(port) {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!(device = %name, port, error = ?e, "RDMA port not listed: ibv_query_port failed");
                    continue;
                }
            };
            let mut gids = Vec::new();
            let len = u32::try_from(pa.gid_tbl_len).unwrap_or(0).min(GID_SCAN);
            let mut empty = 0;
            for i in 0..len {
                let Ok((g, kind)) = ctx.gid(port, i) else {
                    continue;
                };
                if g.raw == [0; 16] {
                    empty += 1;
                    if empty >= 8 {
                        break;
                    }
                    continue;
                }
                empty = 0;
                let kind = match kind {
                    Some(crate::ffi::types::IBV_GID_TYPE_ROCE_V2) => "RoCE v2",
                    Some(IBV_GID_TYPE_ROCE_V1) => "RoCE v1",
                    Some(_) => "IB",
                    None => "?",
                };
                if let Ok(i) = u8::try_from(i) {
                    gids.push((i, Gid(g.raw), kind));
                }
            }
            out.push(PortInfo {
                device: name.clone(),
                node_guid: Guid(u64::from_be(attr.node_guid)),
                port,
                state: port_state(pa.state),
                link_layer: if pa.link_layer == IBV_LINK_LAYER_ETHERNET {
                    "Ethernet"
                } else {
                    "InfiniBand"
                },
                active_mtu: DeviceCore::active_mtu(&pa).and_then(PathMtu::bytes),
                max_mtu: u8::try_from(pa.max_mtu)
                    .ok()
                    .and_then(|m| PathMtu::from(m).bytes()),
                gids,
                // User space has no fast registration, whatever the device can do.
                fast_reg: false,
                mem_windows: attr.device_cap_flags
                    & (IBV_DEVICE_MEM_WINDOW_TYPE_2A | IBV_DEVICE_MEM_WINDOW_TYPE_2B)
                    != 0,
            });
        }
    }
    Ok(out)
}

/// `enum ibv_port_state` as `ibv_devinfo` names it.
pub(crate) fn port_state(s: u32) -> &'static str {
    match s {
        1 => "DOWN",
        2 => "INIT",
        3 => "ARMED",
        4 => "ACTIVE",
        5 => "ACTIVE_DEFER",
        _ => "NOP",
    }
}
