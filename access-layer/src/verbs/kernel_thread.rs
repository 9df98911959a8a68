//! Threads a driver starts and joins (a worker at passive level): `std::thread` with
//! `std`; in a build with no `std` (a kernel driver) the system threads the driver's glue
//! provides (`PsCreateSystemThread`, and `KeWaitForSingleObject` on the thread object to
//! join it), installed once with [`install_kernel_threads`]. [`spawn_thread`] is the one
//! call either way.

use crate::prelude::*;

/// A started thread: joining waits until its body returned (passive level only).
pub trait KernelThread: Send {
    /// Waits for the thread to finish.
    fn join(self: Box<Self>);
}

/// A thread's body.
pub type ThreadBody = Box<dyn FnOnce() + Send>;

/// The kernel's thread calls, as a driver's glue installs them.
#[derive(Clone, Copy, Debug)]
pub struct KernelThreads {
    /// Starts `body` on a new system thread named `name`; `None` if the system refused.
    pub spawn: fn(name: &'static str, body: ThreadBody) -> Option<Box<dyn KernelThread>>,
}

/// Why [`spawn_thread`] started nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelThreadError {
    /// No `std`, and the driver's glue installed no thread calls.
    #[error("no kernel thread calls are installed (install_kernel_threads)")]
    NotInstalled,
    /// The system refused a thread.
    #[error("the system refused thread {name}: {reason}")]
    Refused {
        /// The thread's name.
        name: &'static str,
        /// The system's words.
        reason: String,
    },
}

#[cfg(not(feature = "std"))]
static KERNEL_THREADS: ib_verbs::sync::SetOnce<KernelThreads> = ib_verbs::sync::SetOnce::new();

/// Installs the kernel's thread calls (a driver's `DriverEntry`); whether this was the
/// first install. With `std` threads are the system's and this does nothing (returns
/// `false`).
pub fn install_kernel_threads(threads: KernelThreads) -> bool {
    #[cfg(not(feature = "std"))]
    {
        KERNEL_THREADS.set(threads)
    }
    #[cfg(feature = "std")]
    {
        let _ = threads;
        false
    }
}

/// Starts `body` on a thread of its own named `name`.
pub fn spawn_thread(
    name: &'static str,
    body: impl FnOnce() + Send + 'static,
) -> Result<Box<dyn KernelThread>, KernelThreadError> {
    #[cfg(feature = "std")]
    {
        match std::thread::Builder::new().name(name.into()).spawn(body) {
            Ok(h) => Ok(Box::new(StdThread(h))),
            Err(e) => Err(KernelThreadError::Refused {
                name,
                reason: e.to_string(),
            }),
        }
    }
    #[cfg(not(feature = "std"))]
    {
        let threads = KERNEL_THREADS
            .get()
            .ok_or(KernelThreadError::NotInstalled)?;
        (threads.spawn)(name, Box::new(body)).ok_or_else(|| KernelThreadError::Refused {
            name,
            reason: "PsCreateSystemThread failed".into(),
        })
    }
}

/// A `std` thread.
#[cfg(feature = "std")]
struct StdThread(std::thread::JoinHandle<()>);

#[cfg(feature = "std")]
impl KernelThread for StdThread {
    fn join(self: Box<Self>) {
        // A body that panicked has ended too; its panic was reported where it happened.
        let _ = self.0.join();
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn a_spawned_body_has_run_once_joined() {
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        let t = spawn_thread("kernel-thread-test", move || {
            assert_eq!(std::thread::current().name(), Some("kernel-thread-test"));
            r.store(true, Ordering::SeqCst);
        })
        .expect("spawn");
        t.join();
        assert!(ran.load(Ordering::SeqCst));
    }
}
