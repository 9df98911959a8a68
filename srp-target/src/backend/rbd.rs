//! A LUN on a Ceph RBD image, through librbd (`rbd-client`, loaded at run time).
//!
//! The image is opened as client `client` of the cluster `conf` describes (cephx with
//! `keyring` when given) with librbd's cache off (`rbd_cache = false`: a completed write is
//! on the OSDs, and two appliances on one image never serve each other stale cached data)
//! and with an operation timeout (`rados_osd_op_timeout`), so a cluster that stops
//! answering fails commands instead of holding workers for ever. Its capacity is the
//! image's size. READ, WRITE and flush are asynchronous ([`AsyncIo`]: `rbd_aio_read` and
//! `rbd_aio_write` straight into and out of the command slot's registered memory,
//! `rbd_aio_flush`; `exec/aio.rs` runs them); the other operations wait on the backend
//! worker that runs them: FLUSH is `rbd_aio_flush`, UNMAP `rbd_aio_write_zeroes` (zeros, whole objects
//! deallocated: the LBPRZ the target reports holds — a plain discard may be skipped for a
//! range smaller than librbd's discard granularity), GET LBA STATUS from the image's
//! allocated extents
//! (`rbd_diff_iterate2`). Every librbd error becomes an I/O error with its errno (the
//! executor maps it to sense data and counts it).

use super::check_range;
use super::{AsyncIo, BackendError, BlockSize, CapacityListener, IoDone, LbaExtent, Op, OwnedSpan};
use rbd_client::{Cluster, Image, IoBuf, RbdError};
use scsi::{BlockCount, Lba};
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

/// Where an RBD LUN's image is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RbdSpec {
    /// The pool.
    pub pool: String,
    /// The image.
    pub image: String,
    /// The cluster's configuration file.
    pub conf: PathBuf,
    /// The client id (without `client.`); `None`: librados's default (`admin`).
    pub client: Option<String>,
    /// The client's keyring (cephx); `None`: the configuration's.
    pub keyring: Option<PathBuf>,
    /// Other appliances serve the image too (`[[peer]]`): it must not have the
    /// exclusive-lock feature (see [`RbdBackend::open`]).
    pub shared: bool,
    /// The appliance (its node GUID; 0 when unknown): LUNs of one appliance share a
    /// cluster connection, two appliances never do — even in one process, each must be a
    /// client of its own to the others (their notifications, their fencing).
    pub appliance: u64,
}

impl From<&crate::config::RbdBacking> for RbdSpec {
    fn from(b: &crate::config::RbdBacking) -> RbdSpec {
        RbdSpec {
            pool: b.pool.clone(),
            image: b.image.clone(),
            conf: b.conf.clone(),
            client: b.client.clone(),
            keyring: b.keyring.clone(),
            shared: false,
            appliance: 0,
        }
    }
}

impl RbdSpec {
    /// `pool/image`, as the configuration writes it.
    pub fn name(&self) -> String {
        format!("{}/{}", self.pool, self.image)
    }
}

/// Seconds an OSD or monitor operation may take before it fails with ETIMEDOUT.
const OP_TIMEOUT_SECS: &str = "30";

/// The open cluster connections, by appliance and what names a client: LUNs of one
/// appliance in one cluster as one client share one connection (its threads and sockets),
/// closed when the last of them goes.
type ClientKey = (u64, PathBuf, Option<String>, Option<PathBuf>);
static CLIENTS: std::sync::LazyLock<
    Mutex<std::collections::HashMap<ClientKey, rbd_client::WeakCluster>>,
> = std::sync::LazyLock::new(Default::default);

/// The connection to `spec`'s cluster as its client: an open one shared, else a new one.
pub(super) fn connect(spec: &RbdSpec) -> Result<Cluster, RbdError> {
    let key = (
        spec.appliance,
        spec.conf.clone(),
        spec.client.clone(),
        spec.keyring.clone(),
    );
    let mut clients = CLIENTS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(c) = clients.get(&key).and_then(rbd_client::WeakCluster::upgrade) {
        return Ok(c);
    }
    clients.retain(|_, w| w.upgrade().is_some());
    let c = Cluster::connect(
        &spec.conf,
        spec.client.as_deref(),
        spec.keyring.as_deref(),
        &[
            ("rbd_cache", "false"),
            ("rados_osd_op_timeout", OP_TIMEOUT_SECS),
            ("rados_mon_op_timeout", OP_TIMEOUT_SECS),
            ("client_mount_timeout", OP_TIMEOUT_SECS),
        ],
    )?;
    clients.insert(key, c.downgrade());
    Ok(c)
}

/// An open RBD image as a LUN.
pub struct RbdBackend {
    spec: RbdSpec,
    image: Arc<Image>,
    block_size: BlockSize,
    /// The capacity: the image's size in blocks, followed when another client resizes it.
    blocks: Arc<AtomicU64>,
    /// The name errors carry (`rbd:pool/image`).
    path: PathBuf,
    /// The thread that reads the image's size again when librbd says its header changed.
    resize: Mutex<Option<ResizeWatcher>>,
}

/// A header change to look at, and whether to stop.
#[derive(Default)]
struct Signal {
    state: Mutex<(bool, bool)>,
    cv: Condvar,
}

impl Signal {
    fn raise(&self, stop: bool) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if stop {
            s.1 = true;
        } else {
            s.0 = true;
        }
        self.cv.notify_all();
    }

    /// Waits for a change (true) or the stop (false).
    fn wait(&self) -> bool {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if s.1 {
                return false;
            }
            if s.0 {
                s.0 = false;
                return true;
            }
            s = self.cv.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

struct ResizeWatcher {
    signal: Arc<Signal>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for ResizeWatcher {
    fn drop(&mut self) {
        self.signal.raise(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl fmt::Debug for RbdBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RbdBackend")
            .field("image", &self.spec.name())
            .field("blocks", &self.capacity())
            .finish()
    }
}

fn io_error(op: Op, path: &std::path::Path, e: RbdError) -> BackendError {
    let source = match e.errno() {
        Some(errno) => std::io::Error::from_raw_os_error(errno),
        None => std::io::Error::other(e.to_string()),
    };
    BackendError::Io {
        op,
        path: path.to_owned(),
        source,
    }
}

impl RbdBackend {
    /// Connects to the cluster, opens the image, and takes its size as the capacity (a
    /// whole number of `block_size` blocks, at least one). An image other appliances serve
    /// too (`spec.shared`) is refused if it has the exclusive-lock feature: with two active
    /// writers librbd hands the lock back and forth on every write (each transfer a round
    /// of notifications, tens of milliseconds), and the features it protects (object map,
    /// journaling) are single-writer ones; without it each appliance writes the image
    /// directly, RADOS orders writes per object, and the cache is off on both.
    /// Fencing a dead or cut-off appliance is the cluster's blocklist.
    pub fn open(spec: &RbdSpec, block_size: BlockSize) -> Result<RbdBackend, BackendError> {
        let path = PathBuf::from(format!("rbd:{}", spec.name()));
        let err = |e| io_error(Op::Open, &path, e);
        let cluster = connect(spec).map_err(err)?;
        let image = cluster
            .pool(&spec.pool)
            .and_then(|p| p.open(&spec.image))
            .map_err(err)?;
        if spec.shared && image.has_exclusive_lock().map_err(err)? {
            return Err(BackendError::Unsuited {
                path,
                why: "the image has the exclusive-lock feature, and other appliances serve it \
                      too ([[peer]]): librbd would pass the lock between them on every write; \
                      disable it (rbd feature disable POOL/IMAGE fast-diff object-map \
                      exclusive-lock) or create the image with --image-feature layering"
                    .into(),
            });
        }
        let size = image.size().map_err(err)?;
        let bs = u64::from(block_size.bytes());
        if size == 0 || size % bs != 0 {
            return Err(BackendError::BadSize {
                op: Op::Open,
                path,
                size_bytes: size,
                why: "an RBD image must be a nonzero whole number of the LUN's blocks",
            });
        }
        Ok(RbdBackend {
            spec: spec.clone(),
            image: Arc::new(image),
            block_size,
            blocks: Arc::new(AtomicU64::new(size / bs)),
            path,
            resize: Mutex::new(None),
        })
    }

    fn capacity(&self) -> u64 {
        self.blocks.load(Ordering::Acquire)
    }

    fn offset(&self, lba: Lba) -> u64 {
        lba.0 * u64::from(self.block_size.bytes())
    }

    fn check(&self, op: Op, lba: Lba, len_bytes: usize) -> Result<(), BackendError> {
        check_range(
            op,
            &self.path,
            self.block_size,
            self.capacity(),
            lba,
            len_bytes,
        )
        .map(|_| ())
    }
}

impl super::Backend for RbdBackend {
    fn block_size(&self) -> BlockSize {
        self.block_size
    }

    fn blocks(&self) -> u64 {
        self.capacity()
    }

    /// librbd's update watch raises a signal (its callback must not call back into
    /// librbd); a thread of this LUN's reads the size again and, when the image is now
    /// another whole number of blocks, takes it as the capacity and calls `listener`. A
    /// size that is not a whole number of blocks is logged and not taken.
    fn watch_capacity(&self, listener: CapacityListener) {
        let signal = Arc::new(Signal::default());
        let raise = signal.clone();
        if let Err(e) = self.image.on_update(Box::new(move || raise.raise(false))) {
            tracing::warn!(image = %self.spec.name(), error = %e,
                "cannot watch the RBD image: a resize by another client will not be seen until restart");
            return;
        }
        let (image, blocks, sig) = (self.image.clone(), self.blocks.clone(), signal.clone());
        let (name, bs) = (self.spec.name(), u64::from(self.block_size.bytes()));
        let thread = std::thread::Builder::new()
            .name("rbd-resize".into())
            .spawn(move || {
                while sig.wait() {
                    let size = match image.size() {
                        Ok(s) => s,
                        Err(e) => {
                            tracing::warn!(image = %name, error = %e, "reading the RBD image's size after a change failed");
                            continue;
                        }
                    };
                    if size == 0 || size % bs != 0 {
                        tracing::warn!(image = %name, size,
                            "the RBD image now has a size that is not a whole number of blocks: capacity kept");
                        continue;
                    }
                    let now = size / bs;
                    if blocks.swap(now, Ordering::AcqRel) != now {
                        listener(now);
                    }
                }
            });
        match thread {
            Ok(t) => {
                *self.resize.lock().unwrap_or_else(PoisonError::into_inner) = Some(ResizeWatcher {
                    signal,
                    thread: Some(t),
                });
            }
            Err(e) => tracing::warn!(image = %self.spec.name(), error = %e,
                "cannot start the RBD resize watcher: a resize will not be seen until restart"),
        }
    }

    fn read_at(&self, lba: Lba, buf: &mut [u8]) -> Result<(), BackendError> {
        self.check(Op::Read, lba, buf.len())?;
        self.image
            .read_blocking(self.offset(lba), buf)
            .map_err(|e| io_error(Op::Read, &self.path, e))
    }

    fn write_at(&self, lba: Lba, buf: &[u8]) -> Result<(), BackendError> {
        self.check(Op::Write, lba, buf.len())?;
        self.image
            .write_blocking(self.offset(lba), buf)
            .map_err(|e| io_error(Op::Write, &self.path, e))
    }

    fn flush(&self) -> Result<(), BackendError> {
        self.image
            .flush_blocking()
            .map_err(|e| io_error(Op::Flush, &self.path, e))
    }

    fn unmap(&self, lba: Lba, blocks: BlockCount) -> Result<(), BackendError> {
        let bytes = u64::from(blocks.0) * u64::from(self.block_size.bytes());
        let len = usize::try_from(bytes).unwrap_or(usize::MAX);
        self.check(Op::Unmap, lba, len)?;
        self.image
            .write_zeroes_blocking(self.offset(lba), bytes)
            .map_err(|e| io_error(Op::Unmap, &self.path, e))
    }

    /// librbd compares and writes one 512-byte sector at most, inside one sector
    /// (`ImageCompareAndWriteRequest::prune_object_extents`): one block of a 512-byte LUN,
    /// none of a 4096-byte one (COMPARE AND WRITE is then not offered: the target's own
    /// compare and write would be atomic on this appliance only, not in the cluster).
    fn max_compare_and_write_blocks(&self) -> u8 {
        match self.block_size {
            BlockSize::B512 => 1,
            BlockSize::B4096 => 0,
        }
    }

    fn compare_and_write(
        &self,
        lba: Lba,
        verify: &[u8],
        write: &[u8],
    ) -> Option<Result<Option<usize>, BackendError>> {
        if let Err(e) = self.check(Op::Write, lba, write.len()) {
            return Some(Err(e));
        }
        Some(
            match self
                .image
                .compare_and_write_blocking(self.offset(lba), verify, write)
            {
                Ok(()) => Ok(None),
                Err(RbdError::Mismatch { offset }) => {
                    Ok(Some(usize::try_from(offset).unwrap_or(usize::MAX)))
                }
                Err(e) => Err(io_error(Op::Write, &self.path, e)),
            },
        )
    }

    fn async_io(&self) -> Option<&dyn AsyncIo> {
        Some(self)
    }

    fn lba_status(&self, lba: Lba, max: u64) -> Result<LbaExtent, BackendError> {
        let bs = u64::from(self.block_size.bytes());
        let max = max.min(self.capacity().saturating_sub(lba.0)).max(1);
        let start = self.offset(lba);
        let ext = self
            .image
            .allocated(start, max * bs)
            .map_err(|e| io_error(Op::Status, &self.path, e))?;
        // The run from `lba`: mapped up to the end of the extent holding it, or deallocated
        // up to the next extent.
        let run = match ext.iter().find(|e| e.offset + e.len > start) {
            Some(e) if e.offset <= start => LbaExtent {
                blocks: (e.offset + e.len - start).div_ceil(bs),
                deallocated: false,
            },
            Some(e) => LbaExtent {
                blocks: ((e.offset - start) / bs).max(1),
                deallocated: true,
            },
            None => LbaExtent {
                blocks: max,
                deallocated: true,
            },
        };
        Ok(LbaExtent {
            blocks: run.blocks.min(max),
            ..run
        })
    }
}

impl RbdBackend {
    /// The span as librbd's buffer: the registered memory itself, no copy.
    fn io_buf(&self, op: Op, span: &OwnedSpan) -> Result<IoBuf, BackendError> {
        IoBuf::span(&span.block, span.offset, span.len).map_err(|e| io_error(op, &self.path, e))
    }

    /// `done` as librbd's completion routine, its error named for `op`.
    fn routine(&self, op: Op, done: IoDone) -> rbd_client::Completion {
        let path = self.path.clone();
        Box::new(move |r, _buf| done(r.map(|_| ()).map_err(|e| io_error(op, &path, e))))
    }

    fn start(
        &self,
        op: Op,
        lba: Lba,
        span: &OwnedSpan,
        done: IoDone,
        go: impl FnOnce(&Image, u64, IoBuf, rbd_client::Completion),
    ) {
        let buf = self
            .check(op, lba, span.len)
            .and_then(|()| self.io_buf(op, span));
        match buf {
            Ok(buf) => go(&self.image, self.offset(lba), buf, self.routine(op, done)),
            Err(e) => done(Err(e)),
        }
    }
}

/// librbd's `rbd_aio_read`/`rbd_aio_write` straight into and out of the command slot's
/// registered memory, `rbd_aio_flush`; their completions run on librbd's thread.
impl AsyncIo for RbdBackend {
    fn read_into(&self, lba: Lba, dst: OwnedSpan, done: IoDone) {
        self.start(Op::Read, lba, &dst, done, |img, off, buf, d| {
            img.read(off, buf, d);
        });
    }

    fn write_from(&self, lba: Lba, src: OwnedSpan, done: IoDone) {
        self.start(Op::Write, lba, &src, done, |img, off, buf, d| {
            img.write(off, buf, d);
        });
    }

    fn flush(&self, done: IoDone) {
        self.image.flush(self.routine(Op::Flush, done));
    }
}
