//! The one module of the crate with `unsafe`: librados and librbd loaded at run time, their
//! handles owned (released once, by Drop), the asynchronous completion trampoline and the
//! extent-listing callback. Each block says why it holds.
#![allow(unsafe_code)]

use crate::RbdError;
use crate::buf::{Inner, IoBuf};
use core::ffi::{CStr, c_char, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr::NonNull;
use std::sync::{Arc, OnceLock};

const LIBRADOS: &CStr = c"librados.so.2";
const LIBRBD: &CStr = c"librbd.so.1";
const INSTALL: &str = "install Ceph's client libraries (Debian/Ubuntu: apt install librbd1)";

type Rados = *mut c_void;
type IoCtx = *mut c_void;
type RbdImage = *mut c_void;
type RbdCompletion = *mut c_void;
type RbdCallback = unsafe extern "C" fn(RbdCompletion, *mut c_void);
type DiffCallback = unsafe extern "C" fn(u64, usize, c_int, *mut c_void) -> c_int;
type UpdateCallback = unsafe extern "C" fn(*mut c_void);
type WriteOp = *mut c_void;
type WatchCallback = unsafe extern "C" fn(*mut c_void, u64, u64, u64, *mut c_void, usize);
type WatchErrCallback = unsafe extern "C" fn(*mut c_void, u64, c_int);

mod object;
pub(crate) use object::{NotifyAck, ObjectWatch};

macro_rules! library {
    ($($lib:ident $name:ident : fn($($arg:ty),*) -> $ret:ty;)*) => {
        /// The entry points this crate calls.
        #[allow(non_snake_case)]
        struct Lib {
            $($name: unsafe extern "C" fn($($arg),*) -> $ret,)*
        }

        impl Lib {
            fn load() -> Result<Lib, RbdError> {
                let rados = open(LIBRADOS)?;
                let rbd = open(LIBRBD)?;
                let handle = |which: &str| if which == "rados" { rados } else { rbd };
                $(
                    let $name = {
                        let p = sym(handle(stringify!($lib)), concat!(stringify!($name), "\0"))?;
                        // SAFETY: `p` is the address of the C function of that name, whose
                        // prototype (Ceph 16's rados/librados.h and rbd/librbd.h) is the
                        // type it is transmuted to; function and data pointers have one
                        // size on the platforms Ceph runs on (POSIX requires it for dlsym).
                        unsafe { core::mem::transmute::<*mut c_void, unsafe extern "C" fn($($arg),*) -> $ret>(p) }
                    };
                )*
                Ok(Lib { $($name,)* })
            }
        }
    };
}

library! {
    rados rados_create: fn(*mut Rados, *const c_char) -> c_int;
    rados rados_conf_read_file: fn(Rados, *const c_char) -> c_int;
    rados rados_conf_set: fn(Rados, *const c_char, *const c_char) -> c_int;
    rados rados_connect: fn(Rados) -> c_int;
    rados rados_shutdown: fn(Rados) -> ();
    rados rados_ioctx_create: fn(Rados, *const c_char, *mut IoCtx) -> c_int;
    rados rados_ioctx_destroy: fn(IoCtx) -> ();
    rbd rbd_open: fn(IoCtx, *const c_char, *mut RbdImage, *const c_char) -> c_int;
    rbd rbd_close: fn(RbdImage) -> c_int;
    rbd rbd_get_size: fn(RbdImage, *mut u64) -> c_int;
    rbd rbd_get_features: fn(RbdImage, *mut u64) -> c_int;
    rbd rbd_aio_create_completion: fn(*mut c_void, RbdCallback, *mut RbdCompletion) -> c_int;
    rbd rbd_aio_get_return_value: fn(RbdCompletion) -> isize;
    rbd rbd_aio_release: fn(RbdCompletion) -> ();
    rbd rbd_aio_read: fn(RbdImage, u64, usize, *mut c_char, RbdCompletion) -> c_int;
    rbd rbd_aio_write: fn(RbdImage, u64, usize, *const c_char, RbdCompletion) -> c_int;
    rbd rbd_aio_flush: fn(RbdImage, RbdCompletion) -> c_int;
    rbd rbd_aio_discard: fn(RbdImage, u64, u64, RbdCompletion) -> c_int;
    rbd rbd_aio_write_zeroes: fn(RbdImage, u64, usize, RbdCompletion, c_int, c_int) -> c_int;
    rbd rbd_aio_compare_and_write: fn(RbdImage, u64, usize, *const c_char, *const c_char, RbdCompletion, *mut u64, c_int) -> isize;
    rbd rbd_diff_iterate2: fn(RbdImage, *const c_char, u64, u64, u8, u8, DiffCallback, *mut c_void) -> c_int;
    rbd rbd_update_watch: fn(RbdImage, *mut u64, UpdateCallback, *mut c_void) -> c_int;
    rbd rbd_update_unwatch: fn(RbdImage, u64) -> c_int;
    rados rados_get_instance_id: fn(Rados) -> u64;
    rados rados_getaddrs: fn(Rados, *mut *mut c_char) -> c_int;
    rados rados_blocklist_add: fn(Rados, *mut c_char, u32) -> c_int;
    rados rados_buffer_free: fn(*mut c_char) -> ();
    rados rados_read: fn(IoCtx, *const c_char, *mut c_char, usize, u64) -> c_int;
    rados rados_getxattr: fn(IoCtx, *const c_char, *const c_char, *mut c_char, usize) -> c_int;
    rados rados_setxattr: fn(IoCtx, *const c_char, *const c_char, *const c_char, usize) -> c_int;
    rados rados_create_write_op: fn() -> WriteOp;
    rados rados_release_write_op: fn(WriteOp) -> ();
    rados rados_write_op_create: fn(WriteOp, c_int, *const c_char) -> ();
    rados rados_write_op_cmpxattr: fn(WriteOp, *const c_char, u8, *const c_char, usize) -> ();
    rados rados_write_op_setxattr: fn(WriteOp, *const c_char, *const c_char, usize) -> ();
    rados rados_write_op_write_full: fn(WriteOp, *const c_char, usize) -> ();
    rados rados_write_op_operate: fn(WriteOp, IoCtx, *const c_char, *mut libc::time_t, c_int) -> c_int;
    rados rados_watch2: fn(IoCtx, *const c_char, *mut u64, WatchCallback, WatchErrCallback, *mut c_void) -> c_int;
    rados rados_unwatch2: fn(IoCtx, u64) -> c_int;
    rados rados_watch_flush: fn(Rados) -> c_int;
    rados rados_notify2: fn(IoCtx, *const c_char, *const c_char, c_int, u64, *mut *mut c_char, *mut usize) -> c_int;
    rados rados_notify_ack: fn(IoCtx, *const c_char, u64, u64, *const c_char, c_int) -> c_int;
}

/// `dlopen`s `name` for the whole process (never closed: librados keeps threads).
fn open(name: &CStr) -> Result<*mut c_void, RbdError> {
    // SAFETY: `name` is NUL-terminated; dlopen has no other precondition.
    let h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if h.is_null() {
        return Err(RbdError::Load(format!(
            "{} could not be loaded ({}): {INSTALL}",
            name.to_string_lossy(),
            dl_error()
        )));
    }
    Ok(h)
}

/// The address of `name` (NUL-terminated) in `handle`.
fn sym(handle: *mut c_void, name: &str) -> Result<*mut c_void, RbdError> {
    let n = CStr::from_bytes_with_nul(name.as_bytes())
        .map_err(|_| RbdError::Load(format!("bad symbol name {name:?}")))?;
    // SAFETY: `handle` came from a successful dlopen and is never closed; `n` is
    // NUL-terminated.
    let p = unsafe { libc::dlsym(handle, n.as_ptr()) };
    if p.is_null() {
        return Err(RbdError::Load(format!(
            "{} is missing ({}): Ceph 16 (pacific) or later is needed ({INSTALL})",
            name.trim_end_matches('\0'),
            dl_error()
        )));
    }
    Ok(p)
}

/// `dlerror()`'s message.
fn dl_error() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until the next dl*
    // call on this thread; it is copied at once.
    unsafe {
        let e: *const c_char = libc::dlerror();
        if e.is_null() {
            "no detail".into()
        } else {
            CStr::from_ptr(e).to_string_lossy().into_owned()
        }
    }
}

static LIB: OnceLock<Result<Lib, RbdError>> = OnceLock::new();

fn lib() -> Result<&'static Lib, RbdError> {
    LIB.get_or_init(Lib::load).as_ref().map_err(Clone::clone)
}

/// Whether the libraries load here (the error says what to install).
pub(crate) fn available() -> Result<(), RbdError> {
    lib().map(|_| ())
}

fn check(op: &'static str, ret: c_int) -> Result<(), RbdError> {
    if ret < 0 {
        Err(RbdError::call(op, i64::from(ret)))
    } else {
        Ok(())
    }
}

/// A cluster handle (`rados_t`), shut down on drop.
#[derive(Debug)]
pub(crate) struct RadosHandle(NonNull<c_void>);

// SAFETY: librados's cluster handle is safe to use from several threads (librados.h:
// "the cluster handle ... may be shared"); it is shut down once, by Drop.
unsafe impl Send for RadosHandle {}
// SAFETY: as above.
unsafe impl Sync for RadosHandle {}

impl RadosHandle {
    /// `rados_create(id)`: a handle for client `id` (without the `client.` prefix).
    pub(crate) fn create(id: Option<&CStr>) -> Result<RadosHandle, RbdError> {
        let l = lib()?;
        let mut h: Rados = core::ptr::null_mut();
        let id = id.map_or(core::ptr::null(), CStr::as_ptr);
        // SAFETY: `h` is a valid out-pointer; `id` is NULL or NUL-terminated.
        check("rados_create", unsafe { (l.rados_create)(&mut h, id) })?;
        NonNull::new(h)
            .map(RadosHandle)
            .ok_or(RbdError::call("rados_create", -i64::from(libc::ENOMEM)))
    }

    pub(crate) fn conf_read_file(&self, path: &CStr) -> Result<(), RbdError> {
        let l = lib()?;
        // SAFETY: a live handle, not connected yet; `path` is NUL-terminated.
        check("rados_conf_read_file", unsafe {
            (l.rados_conf_read_file)(self.0.as_ptr(), path.as_ptr())
        })
    }

    pub(crate) fn conf_set(&self, key: &CStr, value: &CStr) -> Result<(), RbdError> {
        let l = lib()?;
        // SAFETY: a live handle; both strings NUL-terminated (librados copies them).
        check("rados_conf_set", unsafe {
            (l.rados_conf_set)(self.0.as_ptr(), key.as_ptr(), value.as_ptr())
        })
    }

    pub(crate) fn connect(&self) -> Result<(), RbdError> {
        let l = lib()?;
        // SAFETY: a live, configured handle.
        check("rados_connect", unsafe {
            (l.rados_connect)(self.0.as_ptr())
        })
    }

    /// `rados_ioctx_create`: the pool `name`.
    pub(crate) fn ioctx(self: &Arc<Self>, name: &CStr) -> Result<IoCtxHandle, RbdError> {
        let l = lib()?;
        let mut io: IoCtx = core::ptr::null_mut();
        // SAFETY: a live, connected handle; `name` NUL-terminated; `io` a valid out-pointer.
        check("rados_ioctx_create", unsafe {
            (l.rados_ioctx_create)(self.0.as_ptr(), name.as_ptr(), &mut io)
        })?;
        let ptr = NonNull::new(io).ok_or(RbdError::call("rados_ioctx_create", -5))?;
        Ok(IoCtxHandle {
            ptr,
            _cluster: self.clone(),
        })
    }
}

impl Drop for RadosHandle {
    fn drop(&mut self) {
        if let Ok(l) = lib() {
            // SAFETY: the handle is live and this is its only release; every pool and
            // image holds an Arc of it, so none outlives it.
            unsafe { (l.rados_shutdown)(self.0.as_ptr()) };
        }
    }
}

/// A pool's I/O context, destroyed on drop (before its cluster handle, which it holds).
#[derive(Debug)]
pub(crate) struct IoCtxHandle {
    ptr: NonNull<c_void>,
    _cluster: Arc<RadosHandle>,
}

// SAFETY: an I/O context is used here only to open images (librbd's calls take it under
// their own locks); destroyed once, by Drop.
unsafe impl Send for IoCtxHandle {}
// SAFETY: as above.
unsafe impl Sync for IoCtxHandle {}

impl IoCtxHandle {
    /// `rbd_open(name)` (no snapshot: the image's head, writable).
    pub(crate) fn open(self: &Arc<Self>, name: &CStr) -> Result<ImageHandle, RbdError> {
        let l = lib()?;
        let mut img: RbdImage = core::ptr::null_mut();
        // SAFETY: a live I/O context; `name` NUL-terminated; `img` a valid out-pointer;
        // the snapshot name NULL (the head).
        check("rbd_open", unsafe {
            (l.rbd_open)(
                self.ptr.as_ptr(),
                name.as_ptr(),
                &mut img,
                core::ptr::null(),
            )
        })?;
        let ptr = NonNull::new(img).ok_or(RbdError::call("rbd_open", -5))?;
        Ok(ImageHandle {
            ptr,
            _pool: self.clone(),
        })
    }
}

impl Drop for IoCtxHandle {
    fn drop(&mut self) {
        if let Ok(l) = lib() {
            // SAFETY: live, released once; every image opened in it holds an Arc of it.
            unsafe { (l.rados_ioctx_destroy)(self.ptr.as_ptr()) };
        }
    }
}

/// An open image, closed on drop. The caller ([`crate::Image`]) closes it only when no
/// asynchronous operation of it is in flight.
#[derive(Debug)]
pub(crate) struct ImageHandle {
    ptr: NonNull<c_void>,
    _pool: Arc<IoCtxHandle>,
}

// SAFETY: librbd's image handle is safe for concurrent asynchronous I/O from several
// threads (its ImageCtx locks); closed once, by Drop.
unsafe impl Send for ImageHandle {}
// SAFETY: as above.
unsafe impl Sync for ImageHandle {}

impl Drop for ImageHandle {
    fn drop(&mut self) {
        if let Ok(l) = lib() {
            // SAFETY: live, closed once, with no operation in flight (see the type's doc).
            unsafe { (l.rbd_close)(self.ptr.as_ptr()) };
        }
    }
}

/// What an asynchronous operation does.
#[derive(Debug)]
pub(crate) enum AioOp {
    Read { off: u64, buf: IoBuf },
    Write { off: u64, buf: IoBuf },
    Flush,
    Discard { off: u64, len: u64 },
    WriteZeroes { off: u64, len: u64 },
    CompareAndWrite { off: u64, cmp: IoBuf, buf: IoBuf },
}

impl AioOp {
    fn name(&self) -> &'static str {
        match self {
            AioOp::Read { .. } => "rbd_aio_read",
            AioOp::Write { .. } => "rbd_aio_write",
            AioOp::Flush => "rbd_aio_flush",
            AioOp::Discard { .. } => "rbd_aio_discard",
            AioOp::WriteZeroes { .. } => "rbd_aio_write_zeroes",
            AioOp::CompareAndWrite { .. } => "rbd_aio_compare_and_write",
        }
    }
}

/// What a completion routine gets: the result (bytes for reads and writes) and the
/// operation's buffer back (the written one for COMPARE AND WRITE).
pub(crate) type Done = Box<dyn FnOnce(Result<usize, RbdError>, Option<IoBuf>) + Send>;

/// An operation in flight: owned by librbd's completion (as its `cb_arg`) until the
/// trampoline takes it back.
struct InFlight {
    op: AioOp,
    /// Where librbd writes COMPARE AND WRITE's mismatch offset (a stable address).
    mismatch: u64,
    done: Done,
}

/// A pointer and a length of an [`IoBuf`] (the block's bytes, or the vector's).
fn raw(buf: &mut IoBuf) -> (*mut c_char, usize) {
    match &mut buf.0 {
        Inner::Vec(v) => (v.as_mut_ptr().cast(), v.len()),
        Inner::Span { block, offset, len } => {
            // `offset + len` lies inside the block (checked when the span was made), so
            // the pointer stays inside its allocation.
            let p = block.dma_base().as_ptr().wrapping_add(*offset);
            (p.cast(), *len)
        }
    }
}

impl ImageHandle {
    /// `rbd_get_size`.
    pub(crate) fn size(&self) -> Result<u64, RbdError> {
        let l = lib()?;
        let mut size = 0u64;
        // SAFETY: a live image; `size` a valid out-pointer.
        check("rbd_get_size", unsafe {
            (l.rbd_get_size)(self.ptr.as_ptr(), &mut size)
        })?;
        Ok(size)
    }

    /// `rbd_get_features`: the image's feature bits (`RBD_FEATURE_*`).
    pub(crate) fn features(&self) -> Result<u64, RbdError> {
        let l = lib()?;
        let mut features = 0u64;
        // SAFETY: a live image; `features` a valid out-pointer.
        check("rbd_get_features", unsafe {
            (l.rbd_get_features)(self.ptr.as_ptr(), &mut features)
        })?;
        Ok(features)
    }

    /// Starts `op`; `done` runs on librbd's thread when it ends — or here, at once, with
    /// the error, if librbd refuses to start it.
    pub(crate) fn aio(&self, op: AioOp, done: Done) {
        let l = match lib() {
            Ok(l) => l,
            Err(e) => {
                let buf = give_back(op);
                done(Err(e), buf);
                return;
            }
        };
        let name = op.name();
        let mut fl = Box::new(InFlight {
            op,
            mismatch: 0,
            done,
        });
        // The buffers' addresses are taken from the boxed operation, which does not move
        // until the trampoline frees it.
        let fl_ptr: *mut InFlight = &mut *fl;
        let mut comp: RbdCompletion = core::ptr::null_mut();
        // SAFETY: `comp` is a valid out-pointer; the callback is `trampoline`, whose
        // argument is the InFlight it frees exactly once.
        let r = unsafe { (l.rbd_aio_create_completion)(fl_ptr.cast(), trampoline, &mut comp) };
        if r < 0 || comp.is_null() {
            let f = *fl;
            let buf = give_back(f.op);
            (f.done)(
                Err(RbdError::call(
                    "rbd_aio_create_completion",
                    i64::from(r.min(-1)),
                )),
                buf,
            );
            return;
        }
        let fl = Box::into_raw(fl);
        let img = self.ptr.as_ptr();
        // SAFETY: `fl` is the live boxed operation (owned by the completion from here on);
        // each buffer pointer is valid for its length until the trampoline runs, because
        // the buffer is inside that box; the image is live and stays open while any
        // operation is in flight (the caller's rule); `mismatch` is a field of the box.
        let ret: i64 = unsafe {
            let f = &mut *fl;
            match &mut f.op {
                AioOp::Read { off, buf } => {
                    let (p, n) = raw(buf);
                    i64::from((l.rbd_aio_read)(img, *off, n, p, comp))
                }
                AioOp::Write { off, buf } => {
                    let (p, n) = raw(buf);
                    i64::from((l.rbd_aio_write)(img, *off, n, p, comp))
                }
                AioOp::Flush => i64::from((l.rbd_aio_flush)(img, comp)),
                AioOp::Discard { off, len } => {
                    i64::from((l.rbd_aio_discard)(img, *off, *len, comp))
                }
                AioOp::WriteZeroes { off, len } => {
                    let n = usize::try_from(*len).unwrap_or(usize::MAX);
                    i64::from((l.rbd_aio_write_zeroes)(img, *off, n, comp, 0, 0))
                }
                AioOp::CompareAndWrite { off, cmp, buf } => {
                    let (c, cn) = raw(cmp);
                    let (p, n) = raw(buf);
                    if cn != n {
                        -i64::from(libc::EINVAL)
                    } else {
                        let mismatch: *mut u64 = &mut f.mismatch;
                        (l.rbd_aio_compare_and_write)(img, *off, n, c, p, comp, mismatch, 0) as i64
                    }
                }
            }
        };
        if ret < 0 {
            // Not started: librbd will not call back (as SPDK's bdev_rbd relies on).
            // SAFETY: the completion was created above and never handed to librbd's I/O
            // path; `fl` is reclaimed once, here, instead of by the trampoline.
            let f = unsafe {
                (l.rbd_aio_release)(comp);
                Box::from_raw(fl)
            };
            let buf = give_back(f.op);
            (f.done)(Err(RbdError::call(name, ret)), buf);
        }
    }

    /// The extents of `off..off + len` that hold data, in order (`rbd_diff_iterate2`
    /// against nothing: what is allocated, parents included, at byte granularity).
    pub(crate) fn allocated(&self, off: u64, len: u64) -> Result<Vec<(u64, u64)>, RbdError> {
        let l = lib()?;
        let mut out: Vec<(u64, u64)> = Vec::new();
        // SAFETY: a live image; no snapshot name (NULL: from the beginning); the callback
        // only pushes to `out`, whose address is valid for the whole (synchronous) call.
        let r = unsafe {
            (l.rbd_diff_iterate2)(
                self.ptr.as_ptr(),
                core::ptr::null(),
                off,
                len,
                1,
                0,
                diff_cb,
                (&mut out as *mut Vec<(u64, u64)>).cast(),
            )
        };
        check("rbd_diff_iterate2", r)?;
        Ok(out)
    }
}

/// What an update watch calls (on librbd's thread) when the image's header changes.
pub(crate) type OnUpdate = Box<dyn Fn() + Send + Sync>;

/// A registered update watch: its handle and the routine librbd holds a pointer to.
#[derive(Debug)]
pub(crate) struct WatchHandle {
    handle: u64,
    routine: *mut OnUpdate,
}

// SAFETY: the routine is `Send + Sync`; the handle is an integer.
unsafe impl Send for WatchHandle {}
// SAFETY: as above.
unsafe impl Sync for WatchHandle {}

impl ImageHandle {
    /// `rbd_update_watch`: `on_update` runs (on librbd's thread) after each change of the
    /// image's header — a resize among them. Unregister it with [`ImageHandle::unwatch`]
    /// before the image closes.
    pub(crate) fn watch(&self, on_update: OnUpdate) -> Result<WatchHandle, RbdError> {
        let l = lib()?;
        let routine = Box::into_raw(Box::new(on_update));
        let mut handle = 0u64;
        // SAFETY: a live image; `handle` a valid out-pointer; `routine` stays allocated
        // until `unwatch` frees it, after librbd no longer calls back with it.
        let r = unsafe {
            (l.rbd_update_watch)(self.ptr.as_ptr(), &mut handle, update_cb, routine.cast())
        };
        if r < 0 {
            // SAFETY: librbd refused the watch, so it holds no pointer to the routine;
            // freed once, here.
            drop(unsafe { Box::from_raw(routine) });
            return Err(RbdError::call("rbd_update_watch", i64::from(r)));
        }
        Ok(WatchHandle { handle, routine })
    }

    /// `rbd_update_unwatch`, then the routine freed (librbd calls it no more: unwatching
    /// waits for a notification being delivered).
    pub(crate) fn unwatch(&self, w: WatchHandle) -> Result<(), RbdError> {
        let l = lib()?;
        // SAFETY: a live image and a handle it gave.
        let r = unsafe { (l.rbd_update_unwatch)(self.ptr.as_ptr(), w.handle) };
        if r < 0 {
            // Still registered as far as we know: the routine is leaked rather than freed
            // under librbd (a bounded leak on an error path).
            return Err(RbdError::call("rbd_update_unwatch", i64::from(r)));
        }
        // SAFETY: unregistered, so librbd holds no pointer to it; freed once, here.
        drop(unsafe { Box::from_raw(w.routine) });
        Ok(())
    }
}

/// librbd's update-watch callback: runs the routine (a panic is caught: it must not unwind
/// into C).
unsafe extern "C" fn update_cb(arg: *mut c_void) {
    // SAFETY: `arg` is the routine `watch` registered, alive until `unwatch` returns.
    let routine = unsafe { &*arg.cast::<OnUpdate>() };
    let _ = catch_unwind(AssertUnwindSafe(routine));
}

/// The buffer an operation carried, for its completion routine.
fn give_back(op: AioOp) -> Option<IoBuf> {
    match op {
        AioOp::Read { buf, .. } | AioOp::Write { buf, .. } => Some(buf),
        AioOp::CompareAndWrite { buf, .. } => Some(buf),
        AioOp::Flush | AioOp::Discard { .. } | AioOp::WriteZeroes { .. } => None,
    }
}

/// librbd's completion callback: takes the operation back, releases the completion and
/// runs the completion routine (a panic in it is caught: it must not unwind into C).
unsafe extern "C" fn trampoline(comp: RbdCompletion, arg: *mut c_void) {
    let Ok(l) = lib() else {
        return;
    };
    // SAFETY: `arg` is the InFlight boxed by `aio` for this completion, which librbd calls
    // back exactly once; `comp` is that completion, released once, here.
    let (f, ret) = unsafe {
        let ret = (l.rbd_aio_get_return_value)(comp);
        (l.rbd_aio_release)(comp);
        (Box::from_raw(arg.cast::<InFlight>()), ret)
    };
    let _ = catch_unwind(AssertUnwindSafe(move || {
        let f = *f;
        let name = f.op.name();
        let is_caw = matches!(f.op, AioOp::CompareAndWrite { .. });
        // librbd returns the bytes read for a read and 0 for a write that succeeded.
        let written = match &f.op {
            AioOp::Write { buf, .. } | AioOp::CompareAndWrite { buf, .. } => Some(buf.len()),
            _ => None,
        };
        let result = if ret >= 0 {
            Ok(written.unwrap_or_else(|| usize::try_from(ret).unwrap_or(0)))
        } else if is_caw && ret == -(libc::EILSEQ as isize) {
            Err(RbdError::Mismatch { offset: f.mismatch })
        } else {
            Err(RbdError::call(name, ret as i64))
        };
        let buf = give_back(f.op);
        (f.done)(result, buf);
    }));
}

/// `rbd_diff_iterate2`'s callback: an extent that exists is appended.
unsafe extern "C" fn diff_cb(off: u64, len: usize, exists: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the vector `allocated` passed, alive for the whole synchronous
    // iteration, which calls back on one thread at a time.
    let out = unsafe { &mut *arg.cast::<Vec<(u64, u64)>>() };
    if exists != 0 {
        out.push((off, len as u64));
    }
    0
}
