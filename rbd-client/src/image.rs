//! Clusters, pools and images, and the asynchronous operations of an image.

use crate::RbdError;
use crate::buf::IoBuf;
use crate::ffi::{self, AioOp, ImageHandle, IoCtxHandle, RadosHandle, WatchHandle};
use std::ffi::CString;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, PoisonError, Weak};

/// A completion routine: the operation's result (bytes moved, for reads and writes) and its
/// buffer back. It runs on librbd's thread: it should hand the result on, not block.
pub type Completion = Box<dyn FnOnce(Result<usize, RbdError>, Option<IoBuf>) + Send>;

pub(crate) fn cstr(what: &str, s: &str) -> Result<CString, RbdError> {
    CString::new(s).map_err(|_| RbdError::Invalid(format!("{what} {s:?} holds a NUL byte")))
}

/// A connection to a cluster as one client.
#[derive(Debug, Clone)]
pub struct Cluster(Arc<RadosHandle>);

impl Cluster {
    /// Whether librados and librbd load on this machine (the error says what to install).
    pub fn available() -> Result<(), RbdError> {
        ffi::available()
    }

    /// Connects with the configuration file `conf` as client `id` (`None`: `admin`),
    /// reading its key from `keyring` when given, after setting each `(option, value)`
    /// of `options` (e.g. `rbd_cache` = `false`).
    pub fn connect(
        conf: &Path,
        id: Option<&str>,
        keyring: Option<&Path>,
        options: &[(&str, &str)],
    ) -> Result<Cluster, RbdError> {
        let id = id.map(|i| cstr("client id", i)).transpose()?;
        let h = RadosHandle::create(id.as_deref())?;
        let path = |p: &Path| cstr("path", &p.to_string_lossy());
        h.conf_read_file(&path(conf)?)?;
        if let Some(k) = keyring {
            h.conf_set(c"keyring", &path(k)?)?;
        }
        for (k, v) in options {
            h.conf_set(&cstr("option", k)?, &cstr("value", v)?)?;
        }
        h.connect()?;
        Ok(Cluster(Arc::new(h)))
    }

    /// A handle that does not keep the connection open (for a registry of connections).
    pub fn downgrade(&self) -> WeakCluster {
        WeakCluster(Arc::downgrade(&self.0))
    }

    /// The pool `name`.
    pub fn pool(&self, name: &str) -> Result<Pool, RbdError> {
        Ok(Pool(Arc::new(self.0.ioctx(&cstr("pool", name)?)?)))
    }
}

/// A connection that may have closed (its last [`Cluster`], pool and image gone).
#[derive(Debug, Clone)]
pub struct WeakCluster(Weak<RadosHandle>);

impl WeakCluster {
    /// The connection, if it is still open.
    pub fn upgrade(&self) -> Option<Cluster> {
        self.0.upgrade().map(Cluster)
    }
}

/// A pool of the cluster.
#[derive(Debug, Clone)]
pub struct Pool(Arc<IoCtxHandle>);

impl Pool {
    pub(crate) fn io(&self) -> &Arc<IoCtxHandle> {
        &self.0
    }
}

impl Cluster {
    pub(crate) fn handle(&self) -> &RadosHandle {
        &self.0
    }
}

impl Pool {
    /// Opens image `name` (its head, writable).
    pub fn open(&self, name: &str) -> Result<Image, RbdError> {
        let h = self.0.open(&cstr("image", name)?)?;
        Ok(Image {
            handle: Some(Arc::new(h)),
            inflight: Arc::new(InFlight::default()),
            watches: Mutex::new(Vec::new()),
        })
    }
}

/// Operations in flight on an image, so that it is closed only once they have ended.
#[derive(Debug, Default)]
struct InFlight {
    count: Mutex<usize>,
    none: Condvar,
}

impl InFlight {
    fn start(&self) {
        *self.count.lock().unwrap_or_else(PoisonError::into_inner) += 1;
    }

    fn end(&self) {
        let mut n = self.count.lock().unwrap_or_else(PoisonError::into_inner);
        *n = n.saturating_sub(1);
        if *n == 0 {
            self.none.notify_all();
        }
    }
}

/// An extent of an image that holds data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    /// Its first byte.
    pub offset: u64,
    /// Its length in bytes.
    pub len: u64,
}

/// An open image. Dropping it waits until its operations in flight have completed (their
/// routines run), then closes it.
#[derive(Debug)]
pub struct Image {
    handle: Option<Arc<ImageHandle>>,
    inflight: Arc<InFlight>,
    /// Update watches, unregistered before the image closes.
    watches: Mutex<Vec<WatchHandle>>,
}

impl Image {
    fn handle(&self) -> &ImageHandle {
        // Only `drop` takes it.
        self.handle.as_deref().expect("an open image")
    }

    /// The image's size in bytes (now: it changes when the image is resized).
    pub fn size(&self) -> Result<u64, RbdError> {
        self.handle().size()
    }

    /// Whether the image has the exclusive-lock feature (`RBD_FEATURE_EXCLUSIVE_LOCK`):
    /// librbd then hands one lock between its writers, one write at a time each way.
    pub fn has_exclusive_lock(&self) -> Result<bool, RbdError> {
        /// `RBD_FEATURE_EXCLUSIVE_LOCK` (rbd/features.h).
        const EXCLUSIVE_LOCK: u64 = 1 << 2;
        Ok(self.handle().features()? & EXCLUSIVE_LOCK != 0)
    }

    fn start(&self, op: AioOp, done: Completion) {
        self.inflight.start();
        let inflight = self.inflight.clone();
        self.handle().aio(
            op,
            Box::new(move |r, buf| {
                let outer = IN_COMPLETION.replace(true);
                done(r, buf);
                IN_COMPLETION.set(outer);
                inflight.end();
            }),
        );
    }

    /// Reads `buf.len()` bytes at `offset` into `buf`.
    pub fn read(&self, offset: u64, buf: IoBuf, done: Completion) {
        self.start(AioOp::Read { off: offset, buf }, done);
    }

    /// Writes `buf` at `offset`.
    pub fn write(&self, offset: u64, buf: IoBuf, done: Completion) {
        self.start(AioOp::Write { off: offset, buf }, done);
    }

    /// Makes every write completed before it durable (SYNCHRONIZE CACHE, FUA).
    pub fn flush(&self, done: Completion) {
        self.start(AioOp::Flush, done);
    }

    /// Discards `len` bytes at `offset` (UNMAP): they read back as zeros.
    pub fn discard(&self, offset: u64, len: u64, done: Completion) {
        self.start(AioOp::Discard { off: offset, len }, done);
    }

    /// Writes `len` zero bytes at `offset` (deallocating whole objects where it can).
    pub fn write_zeroes(&self, offset: u64, len: u64, done: Completion) {
        self.start(AioOp::WriteZeroes { off: offset, len }, done);
    }

    /// Writes `buf` at `offset` only if the image holds `cmp` there, atomically in the
    /// cluster; [`RbdError::Mismatch`] if it does not (nothing written).
    pub fn compare_and_write(&self, offset: u64, cmp: IoBuf, buf: IoBuf, done: Completion) {
        self.start(
            AioOp::CompareAndWrite {
                off: offset,
                cmp,
                buf,
            },
            done,
        );
    }

    /// Calls `on_update` (on librbd's thread; it should only hand the news on) after each
    /// change of the image's header — a resize by any client among them — until the image
    /// is dropped.
    pub fn on_update(&self, on_update: Box<dyn Fn() + Send + Sync>) -> Result<(), RbdError> {
        let w = self.handle().watch(on_update)?;
        self.watches
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(w);
        Ok(())
    }

    /// The extents of `offset..offset + len` that hold data, in order (synchronous: a
    /// round trip per object it looks at; call it off the serving loop).
    pub fn allocated(&self, offset: u64, len: u64) -> Result<Vec<Extent>, RbdError> {
        Ok(self
            .handle()
            .allocated(offset, len)?
            .into_iter()
            .map(|(offset, len)| Extent { offset, len })
            .collect())
    }
}

thread_local! {
    /// Whether this thread is running a completion routine (librbd's thread, or the caller's
    /// when librbd refused to start the operation).
    static IN_COMPLETION: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// What closing an image takes: its handle, its operations in flight, its watches.
struct Closing {
    handle: Option<Arc<ImageHandle>>,
    inflight: Arc<InFlight>,
    watches: Vec<WatchHandle>,
}

impl Closing {
    /// Waits for the operations in flight, unregisters the watches, closes the image.
    fn close(mut self) {
        let mut n = self
            .inflight
            .count
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        while *n > 0 {
            n = self
                .inflight
                .none
                .wait(n)
                .unwrap_or_else(PoisonError::into_inner);
        }
        drop(n);
        if let Some(h) = self.handle.take() {
            for w in std::mem::take(&mut self.watches) {
                let _ = h.unwatch(w);
            }
        }
    }
}

impl Drop for Image {
    /// Waits for the operations in flight, then closes the image. Dropped by a completion
    /// routine (its owner's last reference gone there), the image is closed on a thread of
    /// its own: that routine's operation counts as in flight until the routine returns, and
    /// librbd must not be asked to close an image from its own completion thread.
    fn drop(&mut self) {
        let closing = Closing {
            handle: self.handle.take(),
            inflight: self.inflight.clone(),
            watches: std::mem::take(
                &mut *self.watches.lock().unwrap_or_else(PoisonError::into_inner),
            ),
        };
        if !IN_COMPLETION.get() {
            closing.close();
            return;
        }
        let slot = Arc::new(Mutex::new(Some(closing)));
        let theirs = slot.clone();
        let spawned = std::thread::Builder::new()
            .name("rbd-close".into())
            .spawn(move || {
                if let Some(c) = theirs.lock().unwrap_or_else(PoisonError::into_inner).take() {
                    c.close();
                }
            });
        if spawned.is_err() {
            // No thread to close it on: the image stays open (its memory and its session
            // with the cluster) rather than deadlock this completion thread.
            let leaked = slot.lock().unwrap_or_else(PoisonError::into_inner).take();
            tracing::error!(
                "cannot start a thread to close an RBD image dropped in a completion routine: \
                 it is left open"
            );
            std::mem::forget(leaked);
        }
    }
}
