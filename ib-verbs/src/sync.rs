//! Locks for code that runs in a daemon and in a kernel driver alike. With `std` they are
//! the system's (a waiter sleeps); without it (a Windows kernel driver) they are spin
//! locks, which is what a driver holds at DISPATCH_LEVEL anyway (`KeAcquireSpinLock`).
//! The critical sections of the cores are short and never call out, so the two behave
//! alike. A `std` lock poisoned by a panic elsewhere is entered anyway: every user keeps
//! its state consistent between statements that can panic, and a driver has no unwinding.

use core::fmt;

#[cfg(feature = "std")]
type MutexImp<T> = std::sync::Mutex<T>;
#[cfg(not(feature = "std"))]
type MutexImp<T> = spin::Mutex<T>;

/// What [`Lock::lock`] returns: the lock is held until it drops.
#[cfg(feature = "std")]
pub type LockGuard<'a, T> = std::sync::MutexGuard<'a, T>;
/// What [`Lock::lock`] returns: the lock is held until it drops.
#[cfg(not(feature = "std"))]
pub type LockGuard<'a, T> = spin::MutexGuard<'a, T>;

/// A mutual-exclusion lock: `std::sync::Mutex` with `std`, a spin lock without.
#[derive(Default)]
pub struct Lock<T> {
    inner: MutexImp<T>,
}

impl<T> Lock<T> {
    /// A lock holding `value`.
    pub const fn new(value: T) -> Lock<T> {
        Lock {
            inner: MutexImp::new(value),
        }
    }

    /// Enters the lock, waiting (std) or spinning (no std) while another holds it.
    pub fn lock(&self) -> LockGuard<'_, T> {
        #[cfg(feature = "std")]
        {
            self.inner
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        }
        #[cfg(not(feature = "std"))]
        {
            self.inner.lock()
        }
    }

    /// Enters the lock if nobody holds it.
    pub fn try_lock(&self) -> Option<LockGuard<'_, T>> {
        #[cfg(feature = "std")]
        {
            match self.inner.try_lock() {
                Ok(g) => Some(g),
                Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => None,
            }
        }
        #[cfg(not(feature = "std"))]
        {
            self.inner.try_lock()
        }
    }

    /// The value, with no locking (the caller owns the lock).
    pub fn get_mut(&mut self) -> &mut T {
        #[cfg(feature = "std")]
        {
            self.inner
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        }
        #[cfg(not(feature = "std"))]
        {
            self.inner.get_mut()
        }
    }

    /// The value, consuming the lock.
    pub fn into_inner(self) -> T {
        #[cfg(feature = "std")]
        {
            self.inner
                .into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        }
        #[cfg(not(feature = "std"))]
        {
            self.inner.into_inner()
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for Lock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.try_lock() {
            Some(g) => f.debug_tuple("Lock").field(&&*g).finish(),
            None => f.write_str("Lock(<held>)"),
        }
    }
}

#[cfg(feature = "std")]
type RwImp<T> = std::sync::RwLock<T>;
#[cfg(not(feature = "std"))]
type RwImp<T> = spin::RwLock<T>;

/// What [`RwLock::read`] returns.
#[cfg(feature = "std")]
pub type ReadGuard<'a, T> = std::sync::RwLockReadGuard<'a, T>;
/// What [`RwLock::read`] returns.
#[cfg(not(feature = "std"))]
pub type ReadGuard<'a, T> = spin::RwLockReadGuard<'a, T>;
/// What [`RwLock::write`] returns.
#[cfg(feature = "std")]
pub type WriteGuard<'a, T> = std::sync::RwLockWriteGuard<'a, T>;
/// What [`RwLock::write`] returns.
#[cfg(not(feature = "std"))]
pub type WriteGuard<'a, T> = spin::RwLockWriteGuard<'a, T>;

/// A reader-writer lock: `std::sync::RwLock` with `std`, a spinning one without
/// (`ExAcquireSpinLockShared` in a driver).
#[derive(Default)]
pub struct RwLock<T> {
    inner: RwImp<T>,
}

impl<T> RwLock<T> {
    /// A lock holding `value`.
    pub const fn new(value: T) -> RwLock<T> {
        RwLock {
            inner: RwImp::new(value),
        }
    }

    /// Shared access.
    pub fn read(&self) -> ReadGuard<'_, T> {
        #[cfg(feature = "std")]
        {
            self.inner
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        }
        #[cfg(not(feature = "std"))]
        {
            self.inner.read()
        }
    }

    /// Exclusive access.
    pub fn write(&self) -> WriteGuard<'_, T> {
        #[cfg(feature = "std")]
        {
            self.inner
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        }
        #[cfg(not(feature = "std"))]
        {
            self.inner.write()
        }
    }
}

impl<T> fmt::Debug for RwLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RwLock")
    }
}

/// A value set once and read after: `std::sync::OnceLock` with `std`, `spin::Once` without
/// (a driver's hooks, installed at `DriverEntry`).
pub struct SetOnce<T> {
    #[cfg(feature = "std")]
    inner: std::sync::OnceLock<T>,
    #[cfg(not(feature = "std"))]
    inner: spin::Once<T>,
}

impl<T> SetOnce<T> {
    /// Unset.
    pub const fn new() -> SetOnce<T> {
        SetOnce {
            #[cfg(feature = "std")]
            inner: std::sync::OnceLock::new(),
            #[cfg(not(feature = "std"))]
            inner: spin::Once::new(),
        }
    }

    /// Sets the value if it is unset; whether it was (a later value is dropped).
    pub fn set(&self, value: T) -> bool {
        #[cfg(feature = "std")]
        {
            self.inner.set(value).is_ok()
        }
        #[cfg(not(feature = "std"))]
        {
            let mut set = false;
            self.inner.call_once(|| {
                set = true;
                value
            });
            set
        }
    }

    /// The value, once set.
    pub fn get(&self) -> Option<&T> {
        self.inner.get()
    }
}

impl<T> Default for SetOnce<T> {
    fn default() -> SetOnce<T> {
        SetOnce::new()
    }
}

impl<T: fmt::Debug> fmt::Debug for SetOnce<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SetOnce").field(&self.get()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;
    use alloc::sync::Arc;

    #[test]
    fn lock_excludes_and_survives_a_poisoning_panic() {
        let l = Arc::new(Lock::new(0u32));
        let l2 = Arc::clone(&l);
        let r = std::thread::spawn(move || {
            let mut g = l2.lock();
            *g = 7;
            panic!("inside the lock");
        })
        .join();
        assert!(r.is_err());
        assert_eq!(*l.lock(), 7, "a poisoned lock is entered anyway");
        let g = l.lock();
        assert!(l.try_lock().is_none(), "held: try_lock refuses");
        drop(g);
        assert!(l.try_lock().is_some());
        assert!(format!("{l:?}").contains('7'));
    }

    #[test]
    fn set_once_keeps_the_first() {
        let o = SetOnce::new();
        assert_eq!(o.get(), None);
        assert!(o.set(1u8));
        assert!(!o.set(2u8));
        assert_eq!(o.get(), Some(&1));
    }

    #[test]
    fn rwlock_shares_reads() {
        let l = RwLock::new(5u8);
        let a = l.read();
        let b = l.read();
        assert_eq!(*a + *b, 10);
        drop((a, b));
        *l.write() = 6;
        assert_eq!(*l.read(), 6);
    }
}
