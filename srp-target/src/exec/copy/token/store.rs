//! The token store of a copy manager (sans-IO: every call takes the time it is `now`):
//! live tokens, a bounded record of why recent tokens are gone, and the results of token
//! operations for RECEIVE ROD TOKEN INFORMATION.
//!
//! Call order for a token operation: [`Tokens::begin`] with its result key (refused while
//! a command with that key runs: OPERATION IN PROGRESS), then [`Tokens::find`] /
//! [`Tokens::insert`] / [`Tokens::delete`], then [`Running::finish`] with how it ended, or
//! [`Running::forget`] when the command did not run (BUSY): its list identifier is then
//! unused, as if never sent. Every lookup first retires the tokens that died since the last
//! one (expired, or revoked by a write), so their watches — which every write to their
//! source scans — do not outlive them.

use super::{MAX_TOKENS, TOKEN_BYTES, Token};
use crate::exec::pr::ItNexus;
use scsi::{Sense, SenseCode};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

/// Results of token operations kept per copy manager, the oldest finished one forgotten
/// first.
const MAX_RESULTS: usize = 256;
/// Tokens whose end is remembered (`Gone`); an older one answers TOKEN UNKNOWN.
pub const MAX_TOMBSTONES: usize = 1024;

/// Why a token is gone: the sense WRITE USING TOKEN answers for it (SPC-4 table "ASC and
/// ASCQ", 23h/xxh).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Gone {
    /// Past its inactivity timeout or its lifetime: TOKEN EXPIRED (23h/07h).
    Expired,
    /// Its source was written, or its LU removed: TOKEN REVOKED (23h/06h).
    Revoked,
    /// A WRITE USING TOKEN with DEL_TKN completed: TOKEN DELETED (23h/09h).
    Deleted,
    /// Retired for a newer one past [`MAX_TOKENS`]: TOKEN CANCELLED (23h/08h).
    Cancelled,
}

impl Gone {
    pub(crate) fn sense(self) -> SenseCode {
        match self {
            Gone::Expired => SenseCode::TOKEN_EXPIRED,
            Gone::Revoked => SenseCode::TOKEN_REVOKED,
            Gone::Deleted => SenseCode::TOKEN_DELETED,
            Gone::Cancelled => SenseCode::TOKEN_CANCELLED,
        }
    }
}

/// What names a token in a tombstone: its identifier and a hash of all its bytes (a
/// token's authority is its bytes, so a token differing anywhere is another; a tombstone
/// need not keep all 512).
type Fingerprint = (u64, u64);

fn fingerprint(bytes: &[u8]) -> Fingerprint {
    use std::hash::{Hash, Hasher};
    let mut id = [0u8; 8];
    id.copy_from_slice(&bytes[8..16]);
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    (u64::from_be_bytes(id), h.finish())
}

/// Whose result: the LU the command was sent to (its NAA designator), the I_T nexus and
/// the list identifier (SPC-4 5.16.4.2 — per LU, so an RRTI to one LU never returns
/// another's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Key {
    pub(crate) lu: [u8; 16],
    pub(crate) nexus: ItNexus,
    pub(crate) list_id: u32,
}

/// How a token operation stands, for RECEIVE ROD TOKEN INFORMATION.
#[derive(Clone, Debug)]
pub(crate) struct Outcome {
    pub(crate) action: u8,
    /// `None` while the command runs.
    pub(crate) ended: Option<Ended>,
}

/// How a token operation ended.
#[derive(Clone, Debug)]
pub(crate) struct Ended {
    /// It failed (CHECK CONDITION, RESERVATION CONFLICT).
    pub(crate) failed: bool,
    /// The sense it failed with, if any.
    pub(crate) sense: Option<Sense>,
    /// Blocks represented (POPULATE TOKEN) or written (WRITE USING TOKEN).
    pub(crate) blocks: u64,
    pub(crate) token: Option<Box<[u8; TOKEN_BYTES]>>,
}

#[derive(Debug, Default)]
struct Store {
    live: VecDeque<Arc<Token>>,
    gone: VecDeque<(Fingerprint, Gone)>,
    results: VecDeque<(Key, Outcome)>,
}

/// The tokens of a copy manager and the results of its token operations.
///
/// A WRITE USING TOKEN holds its token (an `Arc`) while it copies, so the token's watches
/// stay even if the token is retired meanwhile: a write to the source during the copy is
/// seen.
#[derive(Debug, Default)]
pub(crate) struct Tokens {
    store: Mutex<Store>,
    pub(super) next_id: AtomicU64,
    /// Tokens retired (expired, revoked, deleted, cancelled) since start.
    retired: AtomicU64,
}

impl Store {
    fn bury(&mut self, t: &Token, why: Gone) {
        if self.gone.len() >= MAX_TOMBSTONES {
            self.gone.pop_front();
        }
        self.gone.push_back((fingerprint(t.bytes.as_slice()), why));
    }

    /// Retires the tokens dead at `now`; how many.
    fn prune(&mut self, now: Instant) -> u64 {
        let mut n = 0;
        let mut i = 0;
        while i < self.live.len() {
            match self.live[i].dead(now) {
                Some(why) => {
                    if let Some(t) = self.live.remove(i) {
                        self.bury(&t, why);
                        n += 1;
                    }
                }
                None => i += 1,
            }
        }
        n
    }
}

impl Tokens {
    fn lock(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn count_retired(&self, n: u64, why: &str) {
        if n > 0 {
            self.retired.fetch_add(n, Ordering::Relaxed);
            tracing::debug!(tokens = n, "ROD tokens retired: {why}");
        }
    }

    /// Tokens alive now (those dead but not yet looked at included).
    pub(crate) fn live(&self) -> usize {
        self.lock().live.len()
    }

    /// Adds `t` (dead tokens retired first; past [`MAX_TOKENS`] the oldest is cancelled).
    pub(crate) fn insert(&self, t: Token, now: Instant) {
        let mut s = self.lock();
        let dead = s.prune(now);
        let mut cancelled = 0;
        while s.live.len() >= MAX_TOKENS {
            if let Some(old) = s.live.pop_front() {
                s.bury(&old, Gone::Cancelled);
                cancelled += 1;
            }
        }
        s.live.push_back(Arc::new(t));
        drop(s);
        self.count_retired(dead, "expired or revoked");
        self.count_retired(cancelled, "cancelled for newer ones");
    }

    /// The live token whose bytes are `bytes`, its inactivity timer restarted; else why
    /// not: the reason it is gone if remembered, TOKEN UNKNOWN otherwise.
    pub(crate) fn find(&self, bytes: &[u8], now: Instant) -> Result<Arc<Token>, SenseCode> {
        let mut s = self.lock();
        let dead = s.prune(now);
        let found = s.live.iter().find(|t| t.bytes.as_slice() == bytes).cloned();
        let gone = || {
            let f = fingerprint(bytes);
            s.gone.iter().rev().find(|(g, _)| *g == f).map(|(_, w)| *w)
        };
        let r = match found {
            Some(t) => {
                t.touch(now);
                Ok(t)
            }
            None => Err(gone().map_or(SenseCode::TOKEN_UNKNOWN, Gone::sense)),
        };
        drop(s);
        self.count_retired(dead, "expired or revoked");
        r
    }

    /// Retires `t` for `why` (DEL_TKN, or a source LU gone), if it is still live.
    pub(crate) fn retire(&self, t: &Arc<Token>, why: Gone) {
        let mut s = self.lock();
        let Some(i) = s.live.iter().position(|x| Arc::ptr_eq(x, t)) else {
            return;
        };
        s.live.remove(i);
        s.bury(t, why);
        drop(s);
        self.count_retired(1, "deleted or revoked");
    }

    /// A token command with result key `k` starts: its old result is forgotten and it is
    /// marked running; OPERATION IN PROGRESS if a command with that key runs now.
    pub(crate) fn begin(&self, k: Key, action: u8) -> Result<Running<'_>, SenseCode> {
        let mut s = self.lock();
        if s.results.iter().any(|(x, o)| *x == k && o.ended.is_none()) {
            return Err(SenseCode::OPERATION_IN_PROGRESS);
        }
        s.results.retain(|(x, _)| *x != k);
        while s.results.len() >= MAX_RESULTS {
            // The oldest finished one goes; running ones stay (at most the copy limit
            // plus the POPULATE TOKENs in flight).
            match s.results.iter().position(|(_, o)| o.ended.is_some()) {
                Some(i) => {
                    s.results.remove(i);
                }
                None => break,
            }
        }
        s.results.push_back((
            k,
            Outcome {
                action,
                ended: None,
            },
        ));
        Ok(Running {
            tokens: self,
            key: k,
            settled: false,
        })
    }

    /// The result kept for `k`.
    pub(crate) fn result(&self, k: Key) -> Option<Outcome> {
        let s = self.lock();
        s.results
            .iter()
            .find(|(x, _)| *x == k)
            .map(|(_, o)| o.clone())
    }
}

/// A token command under way ([`Tokens::begin`]); dropped unsettled (a panic, an early
/// return) it is forgotten, so its list identifier is never stuck "in progress".
#[derive(Debug)]
pub(crate) struct Running<'a> {
    tokens: &'a Tokens,
    key: Key,
    settled: bool,
}

impl Running<'_> {
    /// Records how the command ended.
    pub(crate) fn finish(mut self, ended: Ended) {
        self.settled = true;
        let mut s = self.tokens.lock();
        if let Some((_, o)) = s.results.iter_mut().find(|(x, _)| *x == self.key) {
            o.ended = Some(ended);
        }
    }

    /// The command did not run (BUSY): nothing is kept for its list identifier.
    pub(crate) fn forget(mut self) {
        self.settled = true;
        self.drop_entry();
    }

    fn drop_entry(&self) {
        let mut s = self.tokens.lock();
        s.results
            .retain(|(x, o)| !(*x == self.key && o.ended.is_none()));
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if !self.settled {
            self.drop_entry();
        }
    }
}

impl super::super::CopyManager {
    /// ODX tokens retired (expired, revoked, deleted, cancelled) since start.
    pub fn tokens_retired(&self) -> u64 {
        self.tokens.retired.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{DEFAULT_INACTIVITY_S, MAX_LIFETIME_S};
    use super::*;
    use std::sync::Weak;
    use std::time::Duration;

    /// A token with no source LU (so never revoked by a write) made at `at`, number `id`.
    fn token(id: u64, at: Instant, inactivity_s: u64) -> Token {
        let mut bytes = Box::new([0u8; TOKEN_BYTES]);
        bytes[8..16].copy_from_slice(&id.to_be_bytes());
        bytes[128..136].copy_from_slice(&(!id).to_be_bytes());
        Token {
            bytes,
            source: Weak::new(),
            ranges: Vec::new(),
            watches: Vec::new(),
            inactivity: Duration::from_secs(inactivity_s),
            created: at,
            lifetime: Duration::from_secs(MAX_LIFETIME_S.into()),
            last_used: std::sync::Mutex::new(at),
        }
    }

    fn bytes(id: u64) -> Vec<u8> {
        token(id, Instant::now(), 1).bytes.to_vec()
    }

    #[test]
    fn a_token_used_within_its_inactivity_timeout_still_expires_at_its_lifetime() {
        let t0 = Instant::now();
        let mut s = Store::default();
        s.live
            .push_back(Arc::new(token(1, t0, DEFAULT_INACTIVITY_S.into())));
        // Used every 59 s: never idle for 60 s.
        let mut now = t0;
        while now < t0 + Duration::from_secs(MAX_LIFETIME_S.into()) {
            assert!(!s.live[0].expired(now), "alive at {:?}", now - t0);
            s.live[0].touch(now);
            now += Duration::from_secs(59);
        }
        let end = t0 + Duration::from_secs(MAX_LIFETIME_S.into());
        assert!(!s.live[0].expired(end - Duration::from_millis(1)));
        assert!(s.live[0].expired(end), "expired at its lifetime");
        assert_eq!(s.prune(end), 1);
        assert!(s.live.is_empty());
    }

    #[test]
    fn lookups_retire_dead_tokens_and_remember_why() {
        let t0 = Instant::now();
        let tokens = Tokens::default();
        // A token whose source LU is gone is revoked.
        let lu_gone = token(1, t0, 1);
        tokens.lock().live.push_back(Arc::new(lu_gone));
        assert_eq!(
            tokens.find(&bytes(1), t0).map(|_| ()),
            Err(SenseCode::TOKEN_REVOKED),
            "its source LU is gone"
        );
        assert_eq!(tokens.live(), 0, "retired by the lookup");
        assert_eq!(
            tokens.find(&bytes(1), t0).map(|_| ()),
            Err(SenseCode::TOKEN_REVOKED),
            "remembered"
        );
        assert_eq!(
            tokens.find(&bytes(2), t0).map(|_| ()),
            Err(SenseCode::TOKEN_UNKNOWN)
        );
        assert_eq!(tokens.retired.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn tombstones_are_bounded_the_oldest_forgotten() {
        let t0 = Instant::now();
        let mut s = Store::default();
        for id in 0..(MAX_TOMBSTONES as u64 + 10) {
            s.bury(&token(id, t0, 1), Gone::Deleted);
        }
        assert_eq!(s.gone.len(), MAX_TOMBSTONES);
        let has = |id: u64| s.gone.iter().any(|(f, _)| *f == fingerprint(&bytes(id)));
        assert!(!has(0) && !has(9), "the oldest are forgotten");
        assert!(has(10) && has(MAX_TOMBSTONES as u64 + 9));
    }

    fn key(lu: u8, list_id: u32) -> Key {
        Key {
            lu: [lu; 16],
            nexus: ItNexus {
                initiator: srp::wire::PortId([7; 16]),
                port: crate::lu::RelativePortId(1),
            },
            list_id,
        }
    }

    fn ended(blocks: u64) -> Ended {
        Ended {
            failed: false,
            sense: None,
            blocks,
            token: None,
        }
    }

    #[test]
    fn results_are_per_lu_and_a_running_list_is_in_progress() {
        let tokens = Tokens::default();
        let a = tokens.begin(key(1, 5), 0x11).expect("free");
        assert_eq!(
            tokens.begin(key(1, 5), 0x10).map(|_| ()),
            Err(SenseCode::OPERATION_IN_PROGRESS),
            "same LU, nexus and list: in progress"
        );
        let b = tokens
            .begin(key(2, 5), 0x11)
            .expect("another LU is another list");
        assert!(tokens.result(key(1, 5)).is_some_and(|o| o.ended.is_none()));
        a.finish(ended(8));
        b.forget();
        assert_eq!(
            tokens
                .result(key(1, 5))
                .and_then(|o| o.ended)
                .map(|e| e.blocks),
            Some(8)
        );
        assert!(tokens.result(key(2, 5)).is_none(), "BUSY leaves nothing");
        // A new command with the key replaces the old result at once.
        let c = tokens.begin(key(1, 5), 0x10).expect("ended");
        assert!(tokens.result(key(1, 5)).is_some_and(|o| o.ended.is_none()));
        drop(c);
        assert!(
            tokens.result(key(1, 5)).is_none(),
            "dropped unsettled: forgotten"
        );
    }
}
