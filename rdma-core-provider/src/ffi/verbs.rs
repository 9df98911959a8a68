//! Owned handles over libibverbs objects, each with the one set of calls the provider makes
//! on it. A handle is created by a successful call and destroyed once, by `Drop`, after
//! which nothing reaches the object: the provider shares handles through `Arc`s, so the
//! last user's drop destroys (no verb can run on a destroyed object). Errors carry `errno`.

use super::lib::{LoadError, lib};
use super::types::*;
use core::ffi::{CStr, c_int, c_void};
use core::ptr::NonNull;
use ib_verbs::MemBlock;
use std::io;
use std::sync::Arc;

/// The last OS error as an `io::Error` (what every failed verb leaves in `errno`), or
/// `EIO` when a call reported failure without setting it.
fn errno() -> io::Error {
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(0) | None => io::Error::from_raw_os_error(libc::EIO),
        _ => e,
    }
}

/// A negative-errno or non-zero return as an `io::Error`.
fn check(rc: c_int) -> io::Result<()> {
    match rc {
        0 => Ok(()),
        // Most verbs return the errno itself; some return -1 and set errno.
        r if r > 0 => Err(io::Error::from_raw_os_error(r)),
        _ => Err(errno()),
    }
}

/// Makes `fd` (a library object's: a completion or event channel, a context's async fd)
/// non-blocking.
pub(crate) fn set_nonblocking(fd: c_int) -> io::Result<()> {
    // SAFETY: fcntl on an fd the library keeps open for as long as its object lives (the
    // caller holds the object); F_GETFL/F_SETFL touch only its flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(errno());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(errno());
    }
    Ok(())
}

/// The RDMA devices the kernel has (an empty list where it has none: no `ib_uverbs`).
pub(crate) fn device_names() -> Result<Vec<String>, LoadError> {
    let lib = lib()?;
    let mut n: c_int = 0;
    // SAFETY: `n` is a valid out-parameter; the list is freed below and not used after.
    let list = unsafe { (lib.ibv_get_device_list)(&mut n) };
    if list.is_null() {
        return Ok(Vec::new());
    }
    let mut names = Vec::new();
    for i in 0..usize::try_from(n).unwrap_or(0) {
        // SAFETY: the list holds `n` valid device pointers (then NULL) until freed; a
        // device's `name` is a NUL-terminated array inside it.
        let name = unsafe {
            let dev = *list.add(i);
            CStr::from_ptr((*dev).name.as_ptr().cast())
                .to_string_lossy()
                .into_owned()
        };
        names.push(name);
    }
    // SAFETY: `list` came from ibv_get_device_list and is freed once.
    unsafe { (lib.ibv_free_device_list)(list) };
    Ok(names)
}

/// An open device (`struct ibv_context`), closed when the last handle drops.
#[derive(Debug)]
pub(crate) struct Context {
    ptr: NonNull<ibv_context>,
    name: String,
}

// SAFETY: libibverbs contexts are used from several threads (verbs on one context are
// thread-safe, rdma-core's documentation); the pointer is only dereferenced while the
// context is open, and it is closed once, by Drop, when no handle refers to it.
unsafe impl Send for Context {}
// SAFETY: as above.
unsafe impl Sync for Context {}

impl Context {
    /// Opens the device named `name`.
    pub(crate) fn open(name: &str) -> Result<Arc<Context>, OpenFailure> {
        let lib = lib().map_err(OpenFailure::Load)?;
        let mut n: c_int = 0;
        // SAFETY: `n` is a valid out-parameter; the list is freed before returning.
        let list = unsafe { (lib.ibv_get_device_list)(&mut n) };
        if list.is_null() {
            return Err(OpenFailure::NoDevices(errno()));
        }
        let mut found = None;
        for i in 0..usize::try_from(n).unwrap_or(0) {
            // SAFETY: as in `device_names`.
            let dev = unsafe { *list.add(i) };
            // SAFETY: `dev` is a valid device; `name` is NUL-terminated.
            let this = unsafe { CStr::from_ptr((*dev).name.as_ptr().cast()) };
            if this.to_bytes() == name.as_bytes() {
                // SAFETY: `dev` is valid until the list is freed; the context it opens
                // stays valid after that (libibverbs keeps a reference to the device).
                found = Some(unsafe { (lib.ibv_open_device)(dev) });
                break;
            }
        }
        // SAFETY: freed once, after its last use.
        unsafe { (lib.ibv_free_device_list)(list) };
        match found {
            None => Err(OpenFailure::NoSuchDevice),
            Some(p) => NonNull::new(p)
                .map(|ptr| {
                    Arc::new(Context {
                        ptr,
                        name: name.to_owned(),
                    })
                })
                .ok_or_else(|| OpenFailure::Open(errno())),
        }
    }

    /// The device's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    fn raw(&self) -> *mut ibv_context {
        self.ptr.as_ptr()
    }

    /// The context's address, for comparing with an RDMA-CM id's device.
    pub(crate) fn raw_ptr(&self) -> *mut ibv_context {
        self.ptr.as_ptr()
    }

    /// `ibv_query_device`.
    pub(crate) fn query_device(&self) -> io::Result<ibv_device_attr> {
        let lib = lib().map_err(io::Error::other)?;
        // SAFETY: all-zero is a valid value of this plain C struct.
        let mut attr: ibv_device_attr = unsafe { core::mem::zeroed() };
        // SAFETY: the context is open; `attr` is a valid out-parameter of the right type.
        check(unsafe { (lib.ibv_query_device)(self.raw(), &mut attr) })?;
        Ok(attr)
    }

    /// `ibv_query_port` (zeroed first: the exported version fills all but the last
    /// field).
    pub(crate) fn query_port(&self, port: u8) -> io::Result<ibv_port_attr> {
        let lib = lib().map_err(io::Error::other)?;
        // SAFETY: all-zero is a valid value of this plain C struct.
        let mut attr: ibv_port_attr = unsafe { core::mem::zeroed() };
        // SAFETY: as for query_device.
        check(unsafe { (lib.ibv_query_port)(self.raw(), port, &mut attr) })?;
        Ok(attr)
    }

    /// GID `index` of `port` and, where the library can say, its type (RoCE v1 or v2).
    pub(crate) fn gid(&self, port: u8, index: u32) -> io::Result<(ibv_gid, Option<u32>)> {
        let lib = lib().map_err(io::Error::other)?;
        if let Some(ex) = lib.query_gid_ex {
            let mut e = ibv_gid_entry::default();
            // SAFETY: `e` is a valid out-parameter of the size passed (rdma-core's
            // inline ibv_query_gid_ex passes sizeof(struct ibv_gid_entry)).
            let rc = unsafe {
                ex(
                    self.raw(),
                    u32::from(port),
                    index,
                    &mut e,
                    0,
                    core::mem::size_of::<ibv_gid_entry>(),
                )
            };
            if rc == 0 {
                return Ok((e.gid, Some(e.gid_type)));
            }
        }
        let mut gid = ibv_gid::default();
        let i = c_int::try_from(index).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: `gid` is a valid out-parameter.
        check(unsafe { (lib.ibv_query_gid)(self.raw(), port, i, &mut gid) })?;
        Ok((gid, None))
    }

    /// P_Key `index` of `port` (host order).
    pub(crate) fn pkey(&self, port: u8, index: u16) -> io::Result<u16> {
        let lib = lib().map_err(io::Error::other)?;
        let mut k: u16 = 0;
        // SAFETY: `k` is a valid out-parameter.
        check(unsafe { (lib.ibv_query_pkey)(self.raw(), port, c_int::from(index), &mut k) })?;
        Ok(u16::from_be(k))
    }

    /// The context's asynchronous event fd.
    pub(crate) fn async_fd(&self) -> c_int {
        // SAFETY: the context is open; `async_fd` is a plain field of it.
        unsafe { (*self.raw()).async_fd }
    }

    /// The next asynchronous event, if one is waiting (the fd is non-blocking); acked
    /// before returning. `element` is the raw union (a CQ or QP pointer, or a port number)
    /// — compared against our handles, never dereferenced.
    pub(crate) fn async_event(&self) -> Option<(u32, usize)> {
        let lib = lib().ok()?;
        let mut e = ibv_async_event {
            element: core::ptr::null_mut(),
            event_type: 0,
        };
        // SAFETY: `e` is a valid out-parameter; the fd is non-blocking, so this returns
        // at once; an event read is acked once below.
        if unsafe { (lib.ibv_get_async_event)(self.raw(), &mut e) } != 0 {
            return None;
        }
        let out = (e.event_type, e.element as usize);
        // SAFETY: `e` was filled by ibv_get_async_event and is acked exactly once.
        unsafe { (lib.ibv_ack_async_event)(&mut e) };
        Some(out)
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        if let Ok(lib) = lib() {
            // SAFETY: the last handle of an open context: every object created on it holds
            // an Arc of it, so none is left.
            unsafe { (lib.ibv_close_device)(self.raw()) };
        }
    }
}

/// Why a device could not be opened.
#[derive(Debug)]
pub(crate) enum OpenFailure {
    /// The libraries are missing.
    Load(LoadError),
    /// The kernel lists no devices (ib_uverbs not loaded).
    NoDevices(io::Error),
    /// No device of that name.
    NoSuchDevice,
    /// `ibv_open_device` failed.
    Open(io::Error),
}

/// A protection domain.
#[derive(Debug)]
pub(crate) struct Pd {
    ptr: NonNull<ibv_pd>,
    _ctx: Arc<Context>,
}

// SAFETY: as for Context: verbs on a PD are thread-safe; freed once, by Drop.
unsafe impl Send for Pd {}
// SAFETY: as above.
unsafe impl Sync for Pd {}

impl Pd {
    /// `ibv_alloc_pd`.
    pub(crate) fn alloc(ctx: &Arc<Context>) -> io::Result<Arc<Pd>> {
        let lib = lib().map_err(io::Error::other)?;
        // SAFETY: the context is open.
        let p = unsafe { (lib.ibv_alloc_pd)(ctx.raw()) };
        NonNull::new(p)
            .map(|ptr| {
                Arc::new(Pd {
                    ptr,
                    _ctx: ctx.clone(),
                })
            })
            .ok_or_else(errno)
    }

    fn raw(&self) -> *mut ibv_pd {
        self.ptr.as_ptr()
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        if let Ok(lib) = lib() {
            // SAFETY: the PD's last handle; every MR, MW and QP in it holds an Arc of it.
            unsafe { (lib.ibv_dealloc_pd)(self.raw()) };
        }
    }
}

/// A registered memory region over (part of) a [`MemBlock`], which it keeps alive: the
/// device may reach the block until the region is deregistered (by Drop), and the block
/// outlives that.
#[derive(Debug)]
pub(crate) struct Mr {
    ptr: NonNull<ibv_mr>,
    _block: Arc<MemBlock>,
    _pd: Arc<Pd>,
}

// SAFETY: a registered region is plain data to the library; deregistered once, by Drop.
unsafe impl Send for Mr {}
// SAFETY: as above.
unsafe impl Sync for Mr {}

impl Mr {
    /// Registers `len` bytes of `block` from `offset` at I/O address `iova` with `access`
    /// (`IBV_ACCESS_*`). The range is checked against the block.
    pub(crate) fn reg(
        pd: &Arc<Pd>,
        block: &Arc<MemBlock>,
        offset: u64,
        len: u64,
        iova: u64,
        access: u32,
    ) -> io::Result<Mr> {
        let lib = lib().map_err(io::Error::other)?;
        let start = usize::try_from(offset).map_err(|_| einval())?;
        let n = usize::try_from(len).map_err(|_| einval())?;
        block.check_range(start, n).map_err(|_| einval())?;
        if cfg!(target_endian = "big") {
            // Byte i of a block is byte i in memory on little-endian hosts only.
            return Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP));
        }
        // `start + n <= block.len()`: the pointer stays inside the block's allocation.
        let addr = block.dma_base().as_ptr().wrapping_add(start);
        // The kernel refuses a region whose start and I/O address differ within a page
        // (`ib_uverbs_reg_mr`); said here in words rather than as a bare EINVAL.
        if (addr as u64 ^ iova) & 0xfff != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "region start {addr:p} and I/O address {iova:#x} differ within a page \
                     (the kernel needs them to share the page offset)"
                ),
            ));
        }
        let access = c_int::try_from(access).map_err(|_| einval())?;
        // SAFETY: `addr .. addr + n` lies inside the block (checked above), which this
        // region keeps alive until it is deregistered; the block's words are atomics, so
        // the device writing them while threads read them is no data race in Rust's sense
        // (see `ib_verbs::mem`). The PD is allocated.
        let p = unsafe { (lib.ibv_reg_mr_iova)(pd.raw(), addr.cast(), n, iova, access) };
        NonNull::new(p)
            .map(|ptr| Mr {
                ptr,
                _block: block.clone(),
                _pd: pd.clone(),
            })
            .ok_or_else(errno)
    }

    /// The local key.
    pub(crate) fn lkey(&self) -> u32 {
        // SAFETY: a registered region's fields are plain values set at registration.
        unsafe { (*self.ptr.as_ptr()).lkey }
    }

    /// The remote key (0 without remote access on some devices).
    pub(crate) fn rkey(&self) -> u32 {
        // SAFETY: as for lkey.
        unsafe { (*self.ptr.as_ptr()).rkey }
    }

    fn raw(&self) -> *mut ibv_mr {
        self.ptr.as_ptr()
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        if let Ok(lib) = lib() {
            // SAFETY: the region's last handle; after ibv_dereg_mr returns the device no
            // longer reaches the block, which is released only after this.
            unsafe { (lib.ibv_dereg_mr)(self.raw()) };
        }
    }
}

fn einval() -> io::Error {
    io::Error::from_raw_os_error(libc::EINVAL)
}

/// A type-2 memory window.
#[derive(Debug)]
pub(crate) struct Mw {
    ptr: NonNull<ibv_mw>,
    _pd: Arc<Pd>,
}

// SAFETY: as for Mr: freed once, by Drop; its key is only written by the binder.
unsafe impl Send for Mw {}
// SAFETY: as above.
unsafe impl Sync for Mw {}

impl Mw {
    /// `ibv_alloc_mw(pd, IBV_MW_TYPE_2)` (an inline of the library: the context's op).
    pub(crate) fn alloc(pd: &Arc<Pd>) -> io::Result<Mw> {
        // SAFETY: the PD is allocated and its context open; the op table is the
        // context's.
        let op = unsafe { (*(*pd.raw()).context).ops.alloc_mw };
        let Some(alloc) = op else {
            return Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP));
        };
        // SAFETY: the provider's alloc_mw with a valid PD.
        let p = unsafe { alloc(pd.raw(), IBV_MW_TYPE_2) };
        NonNull::new(p)
            .map(|ptr| Mw {
                ptr,
                _pd: pd.clone(),
            })
            .ok_or_else(errno)
    }

    /// The window's current key.
    pub(crate) fn rkey(&self) -> u32 {
        // SAFETY: a plain field of an allocated window.
        unsafe { (*self.ptr.as_ptr()).rkey }
    }

    /// Records the key a type-2 bind gave the window: the library passes `mw->rkey` as the
    /// current key of the next bind, and the kernel (rxe) refuses a stale one.
    pub(crate) fn set_rkey(&self, rkey: u32) {
        // SAFETY: the window's key field is ours to keep current (rdma-core leaves it to
        // the consumer for type-2 binds); only the thread posting on the window's QP
        // writes it, under the provider's lock.
        unsafe { (*self.ptr.as_ptr()).rkey = rkey };
    }

    fn raw(&self) -> *mut ibv_mw {
        self.ptr.as_ptr()
    }
}

impl Drop for Mw {
    fn drop(&mut self) {
        // SAFETY: the window's context is open (its PD is held).
        let op = unsafe { (*(*self.raw()).context).ops.dealloc_mw };
        if let Some(dealloc) = op {
            // SAFETY: the window's last handle.
            unsafe { dealloc(self.raw()) };
        }
    }
}

/// A completion channel: the fd that CQ notifications make readable.
#[derive(Debug)]
pub(crate) struct CompChannel {
    ptr: NonNull<ibv_comp_channel>,
    _ctx: Arc<Context>,
}

// SAFETY: as for Context.
unsafe impl Send for CompChannel {}
// SAFETY: as above.
unsafe impl Sync for CompChannel {}

impl CompChannel {
    /// `ibv_create_comp_channel`.
    pub(crate) fn create(ctx: &Arc<Context>) -> io::Result<Arc<CompChannel>> {
        let lib = lib().map_err(io::Error::other)?;
        // SAFETY: the context is open.
        let p = unsafe { (lib.ibv_create_comp_channel)(ctx.raw()) };
        NonNull::new(p)
            .map(|ptr| {
                Arc::new(CompChannel {
                    ptr,
                    _ctx: ctx.clone(),
                })
            })
            .ok_or_else(errno)
    }

    /// Its fd.
    pub(crate) fn fd(&self) -> c_int {
        // SAFETY: a plain field of a live channel.
        unsafe { (*self.ptr.as_ptr()).fd }
    }

    /// The next CQ notification, if one is waiting (the fd is non-blocking). Each must be
    /// acked on its CQ ([`Cq::note_event`]) or, when its CQ has left the provider's table,
    /// with [`CqEvent::ack_orphan`]: `ibv_destroy_cq` waits for every notification read.
    pub(crate) fn next_event(&self) -> Option<CqEvent> {
        let lib = lib().ok()?;
        let mut cq: *mut ibv_cq = core::ptr::null_mut();
        let mut context: *mut c_void = core::ptr::null_mut();
        // SAFETY: valid out-parameters; the fd is non-blocking.
        let rc = unsafe { (lib.ibv_get_cq_event)(self.ptr.as_ptr(), &mut cq, &mut context) };
        (rc == 0).then_some(CqEvent {
            cq,
            context: context as u64,
        })
    }
}

/// A CQ notification read from a completion channel and not acked yet.
#[derive(Debug)]
#[must_use = "a notification read must be acked, or its CQ can never be destroyed"]
pub(crate) struct CqEvent {
    cq: *mut ibv_cq,
    /// The CQ's context (what [`Cq::create`] was given).
    pub(crate) context: u64,
}

impl CqEvent {
    /// The CQ's address, to find it in the provider's table.
    pub(crate) fn cq_addr(&self) -> usize {
        self.cq as usize
    }

    /// Acks a notification whose CQ is no longer in the provider's table: it is being
    /// destroyed by another thread, whose `ibv_destroy_cq` cannot return before this ack
    /// (it waits until every notification read is acked). Left unacked, that destroy waits
    /// for ever, and with it every verb queued behind it.
    pub(crate) fn ack_orphan(self) {
        if let Ok(lib) = lib() {
            // SAFETY: the CQ is alive: the kernel reported this notification as read, so
            // ibv_destroy_cq (running or to come) waits for this ack before freeing it.
            unsafe { (lib.ibv_ack_cq_events)(self.cq, 1) };
        }
    }
}

impl Drop for CompChannel {
    fn drop(&mut self) {
        if let Ok(lib) = lib() {
            // SAFETY: the channel's last handle; every CQ on it holds an Arc of it.
            unsafe { (lib.ibv_destroy_comp_channel)(self.ptr.as_ptr()) };
        }
    }
}

/// A completion queue.
#[derive(Debug)]
pub(crate) struct Cq {
    ptr: NonNull<ibv_cq>,
    /// Notifications read from the channel and not yet acked (acked in batches).
    unacked: std::sync::atomic::AtomicU32,
    _channel: Arc<CompChannel>,
    _ctx: Arc<Context>,
}

// SAFETY: polling and arming a CQ from several threads is allowed by the library (the
// provider serializes per CQ internally); destroyed once, by Drop.
unsafe impl Send for Cq {}
// SAFETY: as above.
unsafe impl Sync for Cq {}

impl Cq {
    /// `ibv_create_cq` for `cqe` entries on `channel`, its notifications carrying
    /// `context`.
    pub(crate) fn create(
        ctx: &Arc<Context>,
        cqe: u32,
        context: u64,
        channel: &Arc<CompChannel>,
    ) -> io::Result<Cq> {
        let lib = lib().map_err(io::Error::other)?;
        let cqe = c_int::try_from(cqe).map_err(|_| einval())?;
        // SAFETY: the context and channel are live; `context` is an opaque value the
        // library hands back, never dereferenced.
        let p = unsafe {
            (lib.ibv_create_cq)(
                ctx.raw(),
                cqe,
                context as usize as *mut c_void,
                channel.ptr.as_ptr(),
                0,
            )
        };
        NonNull::new(p)
            .map(|ptr| Cq {
                ptr,
                unacked: Default::default(),
                _channel: channel.clone(),
                _ctx: ctx.clone(),
            })
            .ok_or_else(errno)
    }

    /// The CQ's address, as a completion event names it.
    pub(crate) fn addr(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    /// Moves up to `out.len()` completions into `out`; how many.
    pub(crate) fn poll(&self, out: &mut [ibv_wc]) -> io::Result<usize> {
        // SAFETY: the CQ is live; its context's op table is the provider's.
        let op = unsafe { (*(*self.ptr.as_ptr()).context).ops.poll_cq };
        let poll = op.ok_or_else(|| io::Error::from_raw_os_error(libc::EOPNOTSUPP))?;
        let n = c_int::try_from(out.len()).unwrap_or(c_int::MAX);
        // SAFETY: `out` holds `n` writable entries.
        let rc = unsafe { poll(self.ptr.as_ptr(), n, out.as_mut_ptr()) };
        usize::try_from(rc).map_err(|_| io::Error::from_raw_os_error(-rc))
    }

    /// Arms the next notification (`solicited`: solicited or error completions only).
    pub(crate) fn req_notify(&self, solicited: bool) -> io::Result<()> {
        // SAFETY: as for poll.
        let op = unsafe { (*(*self.ptr.as_ptr()).context).ops.req_notify_cq };
        let arm = op.ok_or_else(|| io::Error::from_raw_os_error(libc::EOPNOTSUPP))?;
        // SAFETY: a live CQ.
        check(unsafe { arm(self.ptr.as_ptr(), c_int::from(solicited)) })
    }

    /// Counts one notification read from the channel; acks them in batches of 64 (each
    /// ack takes the CQ's mutex).
    pub(crate) fn note_event(&self) {
        use std::sync::atomic::Ordering;
        let n = self.unacked.fetch_add(1, Ordering::AcqRel) + 1;
        if n >= 64 {
            self.ack(self.unacked.swap(0, Ordering::AcqRel));
        }
    }

    fn ack(&self, n: u32) {
        if n == 0 {
            return;
        }
        if let Ok(lib) = lib() {
            // SAFETY: `n` notifications of this CQ were read and not acked.
            unsafe { (lib.ibv_ack_cq_events)(self.ptr.as_ptr(), n) };
        }
    }

    pub(crate) fn raw(&self) -> *mut ibv_cq {
        self.ptr.as_ptr()
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        use std::sync::atomic::Ordering;
        // ibv_destroy_cq waits until every notification read is acked.
        self.ack(self.unacked.swap(0, Ordering::AcqRel));
        if let Ok(lib) = lib() {
            // SAFETY: the CQ's last handle; every QP on it holds an Arc of it.
            unsafe { (lib.ibv_destroy_cq)(self.ptr.as_ptr()) };
        }
    }
}

/// A queue pair.
#[derive(Debug)]
pub(crate) struct Qp {
    ptr: NonNull<ibv_qp>,
    _cqs: (Arc<Cq>, Arc<Cq>),
    _pd: Arc<Pd>,
}

// SAFETY: posting to a QP from several threads is allowed by the library (its providers
// lock the queues); destroyed once, by Drop.
unsafe impl Send for Qp {}
// SAFETY: as above.
unsafe impl Sync for Qp {}

impl Qp {
    /// `ibv_create_qp` in `pd` on `send_cq` and `recv_cq`.
    pub(crate) fn create(
        pd: &Arc<Pd>,
        send_cq: &Arc<Cq>,
        recv_cq: &Arc<Cq>,
        qp_type: u32,
        cap: ibv_qp_cap,
        sq_sig_all: bool,
    ) -> io::Result<Qp> {
        let lib = lib().map_err(io::Error::other)?;
        let mut init = ibv_qp_init_attr {
            qp_context: core::ptr::null_mut(),
            send_cq: send_cq.raw(),
            recv_cq: recv_cq.raw(),
            srq: core::ptr::null_mut(),
            cap,
            qp_type,
            sq_sig_all: c_int::from(sq_sig_all),
        };
        // SAFETY: the PD and CQs are live; `init` is a valid attribute block.
        let p = unsafe { (lib.ibv_create_qp)(pd.raw(), &mut init) };
        NonNull::new(p)
            .map(|ptr| Qp {
                ptr,
                _cqs: (send_cq.clone(), recv_cq.clone()),
                _pd: pd.clone(),
            })
            .ok_or_else(errno)
    }

    /// The QP number.
    pub(crate) fn num(&self) -> u32 {
        // SAFETY: a plain field of a live QP.
        unsafe { (*self.ptr.as_ptr()).qp_num }
    }

    /// The QP's address, as an asynchronous event names it.
    pub(crate) fn addr(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    /// `ibv_modify_qp`.
    pub(crate) fn modify(&self, attr: &mut ibv_qp_attr, mask: c_int) -> io::Result<()> {
        let lib = lib().map_err(io::Error::other)?;
        // SAFETY: a live QP and a valid attribute block.
        check(unsafe { (lib.ibv_modify_qp)(self.ptr.as_ptr(), attr, mask) })
    }

    /// The QP's state as the library last set it.
    pub(crate) fn state(&self) -> u32 {
        // SAFETY: a plain field of a live QP (ibv_modify_qp keeps it).
        unsafe { (*self.ptr.as_ptr()).state }
    }

    /// Posts `chain` to the send queue; on a refusal, the index of the refused request
    /// (those before it are posted) and the error.
    pub(crate) fn post_send(&self, chain: &mut SendChain) -> Result<(), (usize, io::Error)> {
        if chain.wrs.is_empty() {
            return Ok(());
        }
        chain.link();
        // SAFETY: a live QP; its context's op table is the provider's.
        let op = unsafe { (*(*self.ptr.as_ptr()).context).ops.post_send };
        let post = op.ok_or((0, io::Error::from_raw_os_error(libc::EOPNOTSUPP)))?;
        let mut bad: *mut ibv_send_wr = core::ptr::null_mut();
        // SAFETY: `chain.link()` made every `next` and `sg_list` point into the chain's
        // own vectors, which are not touched until the call returns; the provider copies
        // the requests before returning.
        let rc = unsafe { post(self.ptr.as_ptr(), chain.wrs.as_mut_ptr(), &mut bad) };
        if rc == 0 {
            return Ok(());
        }
        let index = chain.index_of(bad);
        Err((index, io::Error::from_raw_os_error(rc.abs())))
    }

    /// Posts `chain` to the receive queue; as [`Qp::post_send`].
    pub(crate) fn post_recv(&self, chain: &mut RecvChain) -> Result<(), (usize, io::Error)> {
        if chain.wrs.is_empty() {
            return Ok(());
        }
        chain.link();
        // SAFETY: as for post_send.
        let op = unsafe { (*(*self.ptr.as_ptr()).context).ops.post_recv };
        let post = op.ok_or((0, io::Error::from_raw_os_error(libc::EOPNOTSUPP)))?;
        let mut bad: *mut ibv_recv_wr = core::ptr::null_mut();
        // SAFETY: as for post_send.
        let rc = unsafe { post(self.ptr.as_ptr(), chain.wrs.as_mut_ptr(), &mut bad) };
        if rc == 0 {
            return Ok(());
        }
        let base = chain.wrs.as_ptr() as usize;
        let index = (bad as usize).saturating_sub(base) / core::mem::size_of::<ibv_recv_wr>();
        Err((index, io::Error::from_raw_os_error(rc.abs())))
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        if let Ok(lib) = lib() {
            // SAFETY: the QP's last handle.
            unsafe { (lib.ibv_destroy_qp)(self.ptr.as_ptr()) };
        }
    }
}

/// A memory window bind's target: the window, the region it lies in, the range and rights.
pub(crate) struct BindTarget<'a> {
    pub(crate) mw: &'a Mw,
    pub(crate) new_rkey: u32,
    pub(crate) mr: &'a Mr,
    pub(crate) addr: u64,
    pub(crate) length: u64,
    pub(crate) access: u32,
}

/// A chain of send work requests being built: requests and their scatter/gather entries,
/// linked just before the post. Kept between posts, so posting allocates nothing once the
/// vectors have grown.
#[derive(Default)]
pub(crate) struct SendChain {
    wrs: Vec<ibv_send_wr>,
    /// Each request's first SGE index and count.
    spans: Vec<(usize, usize)>,
    sges: Vec<ibv_sge>,
}

// SAFETY: the chain's raw pointers point only into its own vectors (set by `link` right
// before a post) or at windows and regions whose handles the poster holds for the post.
unsafe impl Send for SendChain {}

impl SendChain {
    /// Requests in the chain.
    pub(crate) fn len(&self) -> usize {
        self.wrs.len()
    }

    /// Empties the chain (keeping its memory).
    pub(crate) fn clear(&mut self) {
        self.wrs.clear();
        self.spans.clear();
        self.sges.clear();
    }

    /// Appends a request. `bind` for `IBV_WR_BIND_MW`; `imm_or_inv` the immediate data
    /// or the key to invalidate; `remote` the RDMA address and key.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn push(
        &mut self,
        wr_id: u64,
        opcode: u32,
        flags: u32,
        sges: impl IntoIterator<Item = ibv_sge>,
        imm_or_inv: u32,
        remote: (u64, u32),
        bind: Option<BindTarget<'_>>,
    ) {
        let first = self.sges.len();
        self.sges.extend(sges);
        self.spans.push((first, self.sges.len() - first));
        let (mw, rkey, info) = match bind {
            Some(b) => (
                b.mw.raw(),
                b.new_rkey,
                ibv_mw_bind_info {
                    mr: b.mr.raw(),
                    addr: b.addr,
                    length: b.length,
                    mw_access_flags: b.access,
                },
            ),
            None => (
                core::ptr::null_mut(),
                0,
                ibv_mw_bind_info {
                    mr: core::ptr::null_mut(),
                    addr: 0,
                    length: 0,
                    mw_access_flags: 0,
                },
            ),
        };
        self.wrs.push(ibv_send_wr {
            wr_id,
            next: core::ptr::null_mut(),
            sg_list: core::ptr::null_mut(),
            num_sge: 0,
            opcode,
            send_flags: flags,
            imm_or_inv,
            wr: ibv_rdma_wr {
                remote_addr: remote.0,
                rkey: remote.1,
                _pad: [0; 20],
            },
            qp_type: 0,
            _pad: 0,
            bind_mw: ibv_bind_mw_wr {
                mw,
                rkey,
                bind_info: info,
            },
        });
    }

    /// Points each request at its SGEs and the next request (the vectors no longer move).
    fn link(&mut self) {
        let sges = self.sges.as_mut_ptr();
        let n = self.wrs.len();
        let base = self.wrs.as_mut_ptr();
        for (i, (wr, &(first, count))) in self.wrs.iter_mut().zip(&self.spans).enumerate() {
            wr.num_sge = c_int::try_from(count).unwrap_or(0);
            wr.sg_list = if count == 0 {
                core::ptr::null_mut()
            } else {
                sges.wrapping_add(first)
            };
            wr.next = if i + 1 < n {
                base.wrapping_add(i + 1)
            } else {
                core::ptr::null_mut()
            };
        }
    }

    fn index_of(&self, bad: *mut ibv_send_wr) -> usize {
        let base = self.wrs.as_ptr() as usize;
        (bad as usize).saturating_sub(base) / core::mem::size_of::<ibv_send_wr>()
    }
}

/// A chain of receive work requests; as [`SendChain`].
#[derive(Default)]
pub(crate) struct RecvChain {
    wrs: Vec<ibv_recv_wr>,
    spans: Vec<(usize, usize)>,
    sges: Vec<ibv_sge>,
}

// SAFETY: as for SendChain.
unsafe impl Send for RecvChain {}

impl RecvChain {
    /// Empties the chain.
    pub(crate) fn clear(&mut self) {
        self.wrs.clear();
        self.spans.clear();
        self.sges.clear();
    }

    /// Appends a receive.
    pub(crate) fn push(&mut self, wr_id: u64, sges: impl IntoIterator<Item = ibv_sge>) {
        let first = self.sges.len();
        self.sges.extend(sges);
        self.spans.push((first, self.sges.len() - first));
        self.wrs.push(ibv_recv_wr {
            wr_id,
            next: core::ptr::null_mut(),
            sg_list: core::ptr::null_mut(),
            num_sge: 0,
        });
    }

    fn link(&mut self) {
        let sges = self.sges.as_mut_ptr();
        let n = self.wrs.len();
        let base = self.wrs.as_mut_ptr();
        for (i, (wr, &(first, count))) in self.wrs.iter_mut().zip(&self.spans).enumerate() {
            wr.num_sge = c_int::try_from(count).unwrap_or(0);
            wr.sg_list = if count == 0 {
                core::ptr::null_mut()
            } else {
                sges.wrapping_add(first)
            };
            wr.next = if i + 1 < n {
                base.wrapping_add(i + 1)
            } else {
                core::ptr::null_mut()
            };
        }
    }
}
