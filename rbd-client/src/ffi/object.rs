//! librados's object calls (part of the crate's one FFI module): reading an object and an
//! attribute, replacing an object only if an attribute still holds a value (one atomic
//! operation), watch/notify/ack, and the client's instance id, address and the cluster's
//! blocklist. Each block says why it holds.

use super::{IoCtxHandle, RadosHandle, check, lib};
use crate::RbdError;
use core::ffi::{CStr, c_char, c_int, c_void};
use std::ffi::CString;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

/// `LIBRADOS_CREATE_EXCLUSIVE`.
const CREATE_EXCLUSIVE: c_int = 1;
/// `LIBRADOS_CMPXATTR_OP_EQ`.
const CMPXATTR_EQ: u8 = 1;

/// What a watch calls (on librados's thread) for each notification: who sent it, what it
/// says, and the acknowledgement the notifier waits for.
pub(crate) type OnNotify = Box<dyn Fn(NotifyAck, u64, Vec<u8>) + Send + Sync>;
/// What a watch calls when librados reports an error of the watch (errno, negative).
pub(crate) type OnWatchError = Box<dyn Fn(i32) + Send + Sync>;

/// What librados holds a pointer to for a watch.
struct WatchCtx {
    on_notify: OnNotify,
    on_error: OnWatchError,
    io: Arc<IoCtxHandle>,
    oid: CString,
}

/// A registered watch; unregistered (and its callbacks drained) on drop.
pub(crate) struct ObjectWatch {
    cookie: u64,
    ctx: *mut WatchCtx,
    io: Arc<IoCtxHandle>,
}

impl std::fmt::Debug for ObjectWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectWatch")
            .field("cookie", &self.cookie)
            .finish()
    }
}

// SAFETY: the context's routines are `Send + Sync`, its pool handle is shared by design;
// the cookie is an integer.
unsafe impl Send for ObjectWatch {}
// SAFETY: as above.
unsafe impl Sync for ObjectWatch {}

/// The acknowledgement of one notification, sent once (by [`NotifyAck::ack`]).
#[derive(Debug)]
pub(crate) struct NotifyAck {
    io: Arc<IoCtxHandle>,
    oid: CString,
    notify_id: u64,
    cookie: u64,
}

impl NotifyAck {
    /// `rados_notify_ack` with no payload.
    pub(crate) fn ack(self) -> Result<(), RbdError> {
        let l = lib()?;
        // SAFETY: a live I/O context (held by the Arc); `oid` NUL-terminated; the ids are
        // librados's own for this notification; no payload (NULL, 0).
        check("rados_notify_ack", unsafe {
            (l.rados_notify_ack)(
                self.io.ptr.as_ptr(),
                self.oid.as_ptr(),
                self.notify_id,
                self.cookie,
                core::ptr::null(),
                0,
            )
        })
    }
}

impl RadosHandle {
    /// `rados_get_instance_id`: this client's global id (a notifier's and a watcher's id).
    pub(crate) fn instance_id(&self) -> Result<u64, RbdError> {
        let l = lib()?;
        // SAFETY: a live, connected handle.
        Ok(unsafe { (l.rados_get_instance_id)(self.0.as_ptr()) })
    }

    /// `rados_getaddrs`: this client's addresses, as librados prints them.
    pub(crate) fn addrs(&self) -> Result<String, RbdError> {
        let l = lib()?;
        let mut p: *mut c_char = core::ptr::null_mut();
        // SAFETY: a live handle; `p` a valid out-pointer, set to a buffer librados
        // allocates, which is copied and freed here with rados_buffer_free.
        check("rados_getaddrs", unsafe {
            (l.rados_getaddrs)(self.0.as_ptr(), &mut p)
        })?;
        if p.is_null() {
            return Ok(String::new());
        }
        // SAFETY: a NUL-terminated string from librados, freed once, after the copy.
        let s = unsafe {
            let s = CStr::from_ptr(p).to_string_lossy().into_owned();
            (l.rados_buffer_free)(p);
            s
        };
        Ok(s)
    }

    /// `rados_blocklist_add`: the client at `addr` may not reach the OSDs for
    /// `expire_secs` seconds (0: the cluster's default).
    pub(crate) fn blocklist_add(&self, addr: &CStr, expire_secs: u32) -> Result<(), RbdError> {
        let l = lib()?;
        // SAFETY: a live handle; librados only reads the NUL-terminated address (the C
        // prototype is not const-correct).
        check("rados_blocklist_add", unsafe {
            (l.rados_blocklist_add)(self.0.as_ptr(), addr.as_ptr().cast_mut(), expire_secs)
        })
    }
}

/// An errno of "not there".
fn absent(r: c_int) -> bool {
    r == -libc::ENOENT || r == -libc::ENODATA
}

impl IoCtxHandle {
    /// `rados_read` of up to `max` bytes from the start: `None` if the object does not
    /// exist.
    pub(crate) fn read_object(&self, oid: &CStr, max: usize) -> Result<Option<Vec<u8>>, RbdError> {
        let l = lib()?;
        let mut buf = vec![0u8; max];
        // SAFETY: a live I/O context; `oid` NUL-terminated; `buf` valid for `max` bytes.
        let r = unsafe {
            (l.rados_read)(
                self.ptr.as_ptr(),
                oid.as_ptr(),
                buf.as_mut_ptr().cast(),
                max,
                0,
            )
        };
        if absent(r) {
            return Ok(None);
        }
        check("rados_read", r)?;
        buf.truncate(usize::try_from(r).unwrap_or(0));
        Ok(Some(buf))
    }

    /// `rados_getxattr` of up to `max` bytes: `None` if the object or the attribute does
    /// not exist.
    pub(crate) fn getxattr(
        &self,
        oid: &CStr,
        name: &CStr,
        max: usize,
    ) -> Result<Option<Vec<u8>>, RbdError> {
        let l = lib()?;
        let mut buf = vec![0u8; max];
        // SAFETY: a live I/O context; both names NUL-terminated; `buf` valid for `max`.
        let r = unsafe {
            (l.rados_getxattr)(
                self.ptr.as_ptr(),
                oid.as_ptr(),
                name.as_ptr(),
                buf.as_mut_ptr().cast(),
                max,
            )
        };
        if absent(r) {
            return Ok(None);
        }
        check("rados_getxattr", r)?;
        buf.truncate(usize::try_from(r).unwrap_or(0));
        Ok(Some(buf))
    }

    /// `rados_setxattr` (the object is created if it does not exist).
    pub(crate) fn setxattr(&self, oid: &CStr, name: &CStr, value: &[u8]) -> Result<(), RbdError> {
        let l = lib()?;
        // SAFETY: a live I/O context; both names NUL-terminated; `value` valid for its
        // length during the synchronous call.
        check("rados_setxattr", unsafe {
            (l.rados_setxattr)(
                self.ptr.as_ptr(),
                oid.as_ptr(),
                name.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
            )
        })
    }

    /// One atomic write operation: if attribute `attr` equals `expect` (`None`: the object
    /// does not exist yet), the object's data becomes `data` and the attribute `new`.
    /// `Ok(false)`: the attribute (or the object's existence) was otherwise, nothing
    /// changed.
    pub(crate) fn replace_if(
        &self,
        oid: &CStr,
        attr: &CStr,
        expect: Option<&[u8]>,
        new: &[u8],
        data: &[u8],
    ) -> Result<bool, RbdError> {
        let l = lib()?;
        // SAFETY: creates an operation handle, released below on every path.
        let op = unsafe { (l.rados_create_write_op)() };
        if op.is_null() {
            return Err(RbdError::call(
                "rados_create_write_op",
                -i64::from(libc::ENOMEM),
            ));
        }
        // SAFETY: `op` is live until released below; every buffer and name outlives the
        // synchronous operate call that reads them; the I/O context is live.
        let r = unsafe {
            match expect {
                None => (l.rados_write_op_create)(op, CREATE_EXCLUSIVE, core::ptr::null()),
                Some(v) => (l.rados_write_op_cmpxattr)(
                    op,
                    attr.as_ptr(),
                    CMPXATTR_EQ,
                    v.as_ptr().cast(),
                    v.len(),
                ),
            }
            (l.rados_write_op_write_full)(op, data.as_ptr().cast(), data.len());
            (l.rados_write_op_setxattr)(op, attr.as_ptr(), new.as_ptr().cast(), new.len());
            let r = (l.rados_write_op_operate)(
                op,
                self.ptr.as_ptr(),
                oid.as_ptr(),
                core::ptr::null_mut(),
                0,
            );
            (l.rados_release_write_op)(op);
            r
        };
        // The comparison failed (ECANCELED), the object exists already (EEXIST), or it is
        // gone (ENOENT, ENODATA: no attribute).
        if r == -libc::ECANCELED || r == -libc::EEXIST || absent(r) {
            return Ok(false);
        }
        check("rados_write_op_operate", r)?;
        Ok(true)
    }

    /// `rados_watch2`: `on_notify` runs (on librados's thread) for each notification of
    /// `oid`, `on_error` when the watch fails; until the returned watch is dropped.
    pub(crate) fn watch(
        self: &Arc<Self>,
        oid: &CStr,
        on_notify: OnNotify,
        on_error: OnWatchError,
    ) -> Result<ObjectWatch, RbdError> {
        let l = lib()?;
        let ctx = Box::into_raw(Box::new(WatchCtx {
            on_notify,
            on_error,
            io: self.clone(),
            oid: oid.to_owned(),
        }));
        let mut cookie = 0u64;
        // SAFETY: a live I/O context; `oid` NUL-terminated; `cookie` a valid out-pointer;
        // `ctx` stays allocated until the watch's drop frees it, after unwatching and
        // flushing, when librados calls back with it no more.
        let r = unsafe {
            (l.rados_watch2)(
                self.ptr.as_ptr(),
                oid.as_ptr(),
                &mut cookie,
                watch_cb,
                watch_err_cb,
                ctx.cast(),
            )
        };
        if r < 0 {
            // SAFETY: librados refused the watch and holds no pointer to the context.
            drop(unsafe { Box::from_raw(ctx) });
            return Err(RbdError::call("rados_watch2", i64::from(r)));
        }
        Ok(ObjectWatch {
            cookie,
            ctx,
            io: self.clone(),
        })
    }

    /// `rados_notify2`: tells every watcher of `oid` and waits up to `timeout_ms` for their
    /// acknowledgements; the return code (0, or -ETIMEDOUT when some did not answer) and
    /// librados's reply buffer (who answered, who timed out).
    pub(crate) fn notify(
        &self,
        oid: &CStr,
        payload: &[u8],
        timeout_ms: u64,
    ) -> Result<(c_int, Vec<u8>), RbdError> {
        let l = lib()?;
        let len = c_int::try_from(payload.len())
            .map_err(|_| RbdError::Invalid("a notification over 2 GiB".into()))?;
        let (mut reply, mut reply_len): (*mut c_char, usize) = (core::ptr::null_mut(), 0);
        // SAFETY: a live I/O context; `oid` NUL-terminated; `payload` valid for `len`;
        // the out-pointers valid; the reply buffer, if set, is copied and freed here once.
        let (r, bytes) = unsafe {
            let r = (l.rados_notify2)(
                self.ptr.as_ptr(),
                oid.as_ptr(),
                payload.as_ptr().cast(),
                len,
                timeout_ms,
                &mut reply,
                &mut reply_len,
            );
            let bytes = if reply.is_null() {
                Vec::new()
            } else {
                let b = std::slice::from_raw_parts(reply.cast::<u8>(), reply_len).to_vec();
                (l.rados_buffer_free)(reply);
                b
            };
            (r, bytes)
        };
        if r < 0 && r != -libc::ETIMEDOUT {
            return Err(RbdError::call("rados_notify2", i64::from(r)));
        }
        Ok((r, bytes))
    }
}

impl Drop for ObjectWatch {
    fn drop(&mut self) {
        let Ok(l) = lib() else {
            return;
        };
        // SAFETY: a live I/O context and the cookie it gave; then the cluster's pending
        // callbacks are flushed, so none runs with the context after it is freed.
        let (r, _) = unsafe {
            let r = (l.rados_unwatch2)(self.io.ptr.as_ptr(), self.cookie);
            let f = (l.rados_watch_flush)(self.io._cluster.0.as_ptr());
            (r, f)
        };
        if r < 0 {
            // Still registered as far as we know: the context is leaked rather than freed
            // under librados (a bounded leak on an error path).
            return;
        }
        // SAFETY: unregistered and flushed: librados holds no pointer to it; freed once.
        drop(unsafe { Box::from_raw(self.ctx) });
    }
}

/// librados's notification callback: hands the notification and its acknowledgement to
/// the routine (a panic is caught: it must not unwind into C).
unsafe extern "C" fn watch_cb(
    arg: *mut c_void,
    notify_id: u64,
    cookie: u64,
    notifier: u64,
    data: *mut c_void,
    len: usize,
) {
    // SAFETY: `arg` is the context `watch` registered, alive until the watch's drop has
    // unwatched and flushed; `data` is valid for `len` bytes during the call (or NULL).
    let (ctx, payload) = unsafe {
        let payload = if data.is_null() || len == 0 {
            Vec::new()
        } else {
            std::slice::from_raw_parts(data.cast::<u8>(), len).to_vec()
        };
        (&*arg.cast::<WatchCtx>(), payload)
    };
    let ack = NotifyAck {
        io: ctx.io.clone(),
        oid: ctx.oid.clone(),
        notify_id,
        cookie,
    };
    let _ = catch_unwind(AssertUnwindSafe(|| (ctx.on_notify)(ack, notifier, payload)));
}

/// librados's watch error callback.
unsafe extern "C" fn watch_err_cb(arg: *mut c_void, _cookie: u64, err: c_int) {
    // SAFETY: as in `watch_cb`.
    let ctx = unsafe { &*arg.cast::<WatchCtx>() };
    let _ = catch_unwind(AssertUnwindSafe(|| (ctx.on_error)(err)));
}
