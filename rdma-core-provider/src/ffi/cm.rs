//! Owned handles over librdmacm: an event channel and its connection identifiers. An id
//! is destroyed once, by `Drop`, after its events are acked (each event is copied out and
//! acked before it is returned, so none is held).

use super::lib::lib;
use super::types::*;
use super::verbs::Context;
use core::ffi::{c_int, c_void};
use core::ptr::NonNull;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

fn errno() -> io::Error {
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(0) | None => io::Error::from_raw_os_error(libc::EIO),
        _ => e,
    }
}

fn check(rc: c_int) -> io::Result<()> {
    if rc == 0 { Ok(()) } else { Err(errno()) }
}

/// `addr` as a `sockaddr_storage` (IPv4 or IPv6, network byte order).
fn sockaddr(addr: SocketAddr) -> sockaddr_storage {
    let mut s = sockaddr_storage {
        family: 0,
        data: [0; 126],
    };
    match addr {
        SocketAddr::V4(a) => {
            s.family = libc::AF_INET as u16;
            s.data[..2].copy_from_slice(&a.port().to_be_bytes());
            s.data[2..6].copy_from_slice(&a.ip().octets());
        }
        SocketAddr::V6(a) => {
            s.family = libc::AF_INET6 as u16;
            s.data[..2].copy_from_slice(&a.port().to_be_bytes());
            s.data[2..6].copy_from_slice(&a.flowinfo().to_be_bytes());
            s.data[6..22].copy_from_slice(&a.ip().octets());
            s.data[22..26].copy_from_slice(&a.scope_id().to_ne_bytes());
        }
    }
    s
}

/// A `sockaddr_storage` as an address, if it is IPv4 or IPv6.
fn socket_addr(s: &sockaddr_storage) -> Option<SocketAddr> {
    let port = u16::from_be_bytes([s.data[0], s.data[1]]);
    match i32::from(s.family) {
        libc::AF_INET => {
            let ip = Ipv4Addr::new(s.data[2], s.data[3], s.data[4], s.data[5]);
            Some(SocketAddr::new(IpAddr::V4(ip), port))
        }
        libc::AF_INET6 => {
            let mut o = [0u8; 16];
            o.copy_from_slice(&s.data[6..22]);
            Some(SocketAddr::new(IpAddr::V6(Ipv6Addr::from(o)), port))
        }
        _ => None,
    }
}

/// An RDMA-CM event channel: the fd that connection events make readable.
#[derive(Debug)]
pub(crate) struct EventChannel {
    ptr: NonNull<rdma_event_channel>,
}

// SAFETY: librdmacm's channels and ids are used from several threads (its calls lock
// internally); destroyed once, by Drop, after every id on it (each id holds an Arc).
unsafe impl Send for EventChannel {}
// SAFETY: as above.
unsafe impl Sync for EventChannel {}

impl EventChannel {
    /// `rdma_create_event_channel` (ENODEV where the kernel has no `rdma_ucm`).
    pub(crate) fn create() -> io::Result<Arc<EventChannel>> {
        let lib = lib().map_err(io::Error::other)?;
        // SAFETY: no preconditions.
        let p = unsafe { (lib.rdma_create_event_channel)() };
        NonNull::new(p)
            .map(|ptr| Arc::new(EventChannel { ptr }))
            .ok_or_else(errno)
    }

    /// Its fd.
    pub(crate) fn fd(&self) -> c_int {
        // SAFETY: a plain field of a live channel.
        unsafe { (*self.ptr.as_ptr()).fd }
    }

    /// The next event, copied out and acked, if one is waiting (the fd is non-blocking).
    pub(crate) fn next_event(&self) -> Option<CmEventRec> {
        let lib = lib().ok()?;
        let mut ev: *mut rdma_cm_event = core::ptr::null_mut();
        // SAFETY: a valid out-parameter; the fd is non-blocking, so this returns at once.
        if unsafe { (lib.rdma_get_cm_event)(self.ptr.as_ptr(), &mut ev) } != 0 || ev.is_null() {
            return None;
        }
        // SAFETY: `ev` is a valid event until acked below; its private data (if any) is
        // `private_data_len` readable bytes inside the event.
        let rec = unsafe {
            let e = &*ev;
            let p = e.param;
            let private_data = if p.private_data.is_null() {
                Vec::new()
            } else {
                core::slice::from_raw_parts(
                    p.private_data.cast::<u8>(),
                    usize::from(p.private_data_len),
                )
                .to_vec()
            };
            CmEventRec {
                id: e.id as usize,
                listen_id: e.listen_id as usize,
                event: e.event,
                status: e.status,
                private_data,
                responder_resources: p.responder_resources,
                initiator_depth: p.initiator_depth,
                retry_count: p.retry_count,
                rnr_retry_count: p.rnr_retry_count,
                qp_num: p.qp_num,
            }
        };
        // SAFETY: acked exactly once; nothing of it is used after.
        unsafe { (lib.rdma_ack_cm_event)(ev) };
        Some(rec)
    }
}

impl Drop for EventChannel {
    fn drop(&mut self) {
        if let Ok(lib) = lib() {
            // SAFETY: the channel's last handle.
            unsafe { (lib.rdma_destroy_event_channel)(self.ptr.as_ptr()) };
        }
    }
}

/// An event, copied out of librdmacm's (ids as addresses: compared with [`CmId::addr`],
/// never dereferenced).
#[derive(Clone, Debug)]
pub(crate) struct CmEventRec {
    /// The id the event is for (a new one for a connection request).
    pub(crate) id: usize,
    /// The listening id a connection request came to.
    pub(crate) listen_id: usize,
    /// `RDMA_CM_EVENT_*`.
    pub(crate) event: u32,
    /// The status (a REJ's reason for REJECTED; an errno otherwise).
    pub(crate) status: i32,
    /// The private data (a copy).
    pub(crate) private_data: Vec<u8>,
    pub(crate) responder_resources: u8,
    pub(crate) initiator_depth: u8,
    pub(crate) retry_count: u8,
    pub(crate) rnr_retry_count: u8,
    /// The peer's QP.
    pub(crate) qp_num: u32,
}

/// A connection identifier.
#[derive(Debug)]
pub(crate) struct CmId {
    ptr: NonNull<rdma_cm_id>,
    _channel: Arc<EventChannel>,
}

// SAFETY: as for EventChannel.
unsafe impl Send for CmId {}
// SAFETY: as above.
unsafe impl Sync for CmId {}

impl CmId {
    /// `rdma_create_id(channel, RDMA_PS_TCP)`.
    pub(crate) fn create(channel: &Arc<EventChannel>) -> io::Result<CmId> {
        let lib = lib().map_err(io::Error::other)?;
        let mut id: *mut rdma_cm_id = core::ptr::null_mut();
        // SAFETY: valid out-parameter; a live channel.
        check(unsafe {
            (lib.rdma_create_id)(
                channel.ptr.as_ptr(),
                &mut id,
                core::ptr::null_mut(),
                RDMA_PS_TCP,
            )
        })?;
        NonNull::new(id)
            .map(|ptr| CmId {
                ptr,
                _channel: channel.clone(),
            })
            .ok_or_else(errno)
    }

    /// Takes ownership of an id librdmacm created for a connection request (`addr` as the
    /// event named it). The caller makes sure it is taken once.
    pub(crate) fn adopt(addr: usize, channel: &Arc<EventChannel>) -> Option<CmId> {
        NonNull::new(addr as *mut rdma_cm_id).map(|ptr| CmId {
            ptr,
            _channel: channel.clone(),
        })
    }

    /// The id's address, as events name it.
    pub(crate) fn addr(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    /// Whether the id is bound to `ctx`'s device (a request on another device is not
    /// this provider's).
    /// librdmacm opens devices itself, so the id's context is librdmacm's own, not ours:
    /// the device is compared by name (and the id's port with `port`).
    pub(crate) fn is_on(&self, ctx: &Context, port: u8) -> bool {
        // SAFETY: plain fields of a live id (`verbs` NULL until bound to a device).
        let (verbs, id_port) = unsafe {
            let id = &*self.ptr.as_ptr();
            (id.verbs, id.port_num)
        };
        if verbs.is_null() || id_port != port {
            return false;
        }
        if verbs == ctx_raw(ctx) {
            return true;
        }
        // SAFETY: a bound id's context is open for the id's life, its `device` valid and
        // its name NUL-terminated within the 64-byte array (libibverbs' sysfs name).
        unsafe {
            let dev = (*verbs).device;
            !dev.is_null() && {
                let n = &(*dev).name;
                let len = n.iter().position(|&b| b == 0).unwrap_or(n.len());
                &n[..len] == ctx.name().as_bytes()
            }
        }
    }

    /// The local and peer addresses (`rdma_get_local_addr` / `rdma_get_peer_addr`, inlines
    /// of the library).
    pub(crate) fn addrs(&self) -> (Option<SocketAddr>, Option<SocketAddr>) {
        // SAFETY: plain fields of a live id.
        let (src, dst) = unsafe {
            let id = &*self.ptr.as_ptr();
            (id.src_addr, id.dst_addr)
        };
        (socket_addr(&src), socket_addr(&dst))
    }

    /// The route's P_Key (0xFFFF on RoCE).
    pub(crate) fn pkey(&self) -> u16 {
        // SAFETY: a plain field of a live id (network order).
        u16::from_be(unsafe { (*self.ptr.as_ptr()).pkey })
    }

    /// `rdma_bind_addr`.
    pub(crate) fn bind(&self, addr: SocketAddr) -> io::Result<()> {
        let lib = lib().map_err(io::Error::other)?;
        let mut s = sockaddr(addr);
        // SAFETY: a live id and a valid address.
        check(unsafe { (lib.rdma_bind_addr)(self.ptr.as_ptr(), &mut s) })
    }

    /// `rdma_listen`.
    pub(crate) fn listen(&self, backlog: i32) -> io::Result<()> {
        let lib = lib().map_err(io::Error::other)?;
        // SAFETY: a live, bound id.
        check(unsafe { (lib.rdma_listen)(self.ptr.as_ptr(), backlog) })
    }

    /// `rdma_resolve_addr(src, dst)`.
    pub(crate) fn resolve_addr(
        &self,
        src: SocketAddr,
        dst: SocketAddr,
        timeout_ms: i32,
    ) -> io::Result<()> {
        let lib = lib().map_err(io::Error::other)?;
        let (mut s, mut d) = (sockaddr(src), sockaddr(dst));
        // SAFETY: a live id and valid addresses.
        check(unsafe { (lib.rdma_resolve_addr)(self.ptr.as_ptr(), &mut s, &mut d, timeout_ms) })
    }

    /// `rdma_resolve_route`.
    pub(crate) fn resolve_route(&self, timeout_ms: i32) -> io::Result<()> {
        let lib = lib().map_err(io::Error::other)?;
        // SAFETY: a live id with its address resolved.
        check(unsafe { (lib.rdma_resolve_route)(self.ptr.as_ptr(), timeout_ms) })
    }

    fn params(p: &ConnParams<'_>) -> rdma_conn_param {
        rdma_conn_param {
            private_data: if p.private_data.is_empty() {
                core::ptr::null()
            } else {
                p.private_data.as_ptr().cast::<c_void>()
            },
            private_data_len: u8::try_from(p.private_data.len()).unwrap_or(u8::MAX),
            responder_resources: p.responder_resources,
            initiator_depth: p.initiator_depth,
            flow_control: 1,
            retry_count: p.retry_count,
            rnr_retry_count: p.rnr_retry_count,
            srq: 0,
            qp_num: p.qp_num,
        }
    }

    /// `rdma_connect` with our own QP `p.qp_num`.
    pub(crate) fn connect(&self, p: &ConnParams<'_>) -> io::Result<()> {
        let lib = lib().map_err(io::Error::other)?;
        let mut c = Self::params(p);
        // SAFETY: a live id with its route resolved; `c` points at `p.private_data`, which
        // outlives the call (the library copies it).
        check(unsafe { (lib.rdma_connect)(self.ptr.as_ptr(), &mut c) })
    }

    /// `rdma_accept` with our own QP `p.qp_num`.
    pub(crate) fn accept(&self, p: &ConnParams<'_>) -> io::Result<()> {
        let lib = lib().map_err(io::Error::other)?;
        let mut c = Self::params(p);
        // SAFETY: as for connect.
        check(unsafe { (lib.rdma_accept)(self.ptr.as_ptr(), &mut c) })
    }

    /// `rdma_reject` with private data (at most 148 bytes).
    pub(crate) fn reject(&self, private_data: &[u8]) -> io::Result<()> {
        let lib = lib().map_err(io::Error::other)?;
        let len = u8::try_from(private_data.len())
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        let p = if private_data.is_empty() {
            core::ptr::null()
        } else {
            private_data.as_ptr().cast::<c_void>()
        };
        // SAFETY: a live id; `p` points at `len` readable bytes (copied by the library).
        check(unsafe { (lib.rdma_reject)(self.ptr.as_ptr(), p, len) })
    }

    /// `rdma_establish`: the RTU, once our QP is connected (active side, own QP).
    pub(crate) fn establish(&self) -> io::Result<()> {
        let lib = lib().map_err(io::Error::other)?;
        // SAFETY: a live id that received a connect response.
        check(unsafe { (lib.rdma_establish)(self.ptr.as_ptr()) })
    }

    /// `rdma_disconnect`.
    pub(crate) fn disconnect(&self) -> io::Result<()> {
        let lib = lib().map_err(io::Error::other)?;
        // SAFETY: a live id.
        check(unsafe { (lib.rdma_disconnect)(self.ptr.as_ptr()) })
    }

    /// `rdma_init_qp_attr` for `state`: the attributes and mask the kernel's CM computed.
    pub(crate) fn init_qp_attr(&self, state: u32) -> io::Result<(ibv_qp_attr, c_int)> {
        let lib = lib().map_err(io::Error::other)?;
        let mut attr = ibv_qp_attr {
            qp_state: state,
            ..ibv_qp_attr::default()
        };
        let mut mask: c_int = 0;
        // SAFETY: a live id; valid out-parameters.
        check(unsafe { (lib.rdma_init_qp_attr)(self.ptr.as_ptr(), &mut attr, &mut mask) })?;
        Ok((attr, mask))
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        if let Ok(lib) = lib() {
            // SAFETY: the id's last handle; its events are all acked (copied out).
            unsafe { (lib.rdma_destroy_id)(self.ptr.as_ptr()) };
        }
    }
}

/// What `rdma_connect` and `rdma_accept` are given.
pub(crate) struct ConnParams<'a> {
    pub(crate) private_data: &'a [u8],
    pub(crate) responder_resources: u8,
    pub(crate) initiator_depth: u8,
    pub(crate) retry_count: u8,
    pub(crate) rnr_retry_count: u8,
    pub(crate) qp_num: u32,
}

/// The raw context pointer of `ctx`, for comparison.
fn ctx_raw(ctx: &Context) -> *mut ibv_context {
    ctx.raw_ptr()
}
