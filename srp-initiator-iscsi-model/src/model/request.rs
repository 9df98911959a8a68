//! [`Request`]: a request as the driver holds it — the SRB handle (data, status, sense,
//! extension: everything of [`Srb`]) plus its [`QueueTag`] — and its typed lifecycle
//! ([`RequestState`]: queued → started → completed by the driver, or flushed by the port),
//! which is how the port tells a double completion from a completion after a flush.

use alloc::sync::Arc;
use core::fmt;
use core::ops::Deref;
use ib_verbs::sync::Lock;
use win_port::{LuAddress, Srb, SrbId, SrbOwner};

/// SRB `QueueTag`: a request's tag, unique among its LU's outstanding requests. 0 to 254;
/// 255 is `SP_UNTAGGED`, never a tag here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueueTag(pub u8);

impl ib_verbs::IdKey for QueueTag {
    fn id_bits(self) -> u64 {
        u64::from(self.0)
    }
}

impl QueueTag {
    /// `SP_UNTAGGED`.
    pub const UNTAGGED: QueueTag = QueueTag(0xff);
    /// How many tags an LU has.
    pub const COUNT: u16 = 255;
}

impl fmt::Display for QueueTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Why the port completed a request on its own authority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FlushCause {
    /// A bus reset flushed it (`SRB_STATUS_BUS_RESET`).
    Reset,
    /// The driver still held it when its removal entry returned.
    Removal,
    /// The port bugchecked (`SRB_STATUS_INTERNAL_ERROR`).
    BugCheck,
}

/// Where a request is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestState {
    /// Given to the driver, not completed.
    Started,
    /// The driver completed it.
    Completed,
    /// The port completed it.
    Flushed(FlushCause),
}

/// What ending a request's life is, for [`RequestState::end`].
#[cfg_attr(not(feature = "std"), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// The driver completes it.
    Complete,
    /// The port flushes it.
    Flush(FlushCause),
}

impl RequestState {
    /// The transition table: only a started request ends; ending an ended one gives back
    /// the state it was in (the caller turns it into a violation).
    #[cfg_attr(not(feature = "std"), allow(dead_code))]
    pub(crate) fn end(self, how: End) -> Result<RequestState, RequestState> {
        match (self, how) {
            // The one legal end of each kind.
            (RequestState::Started, End::Complete) => Ok(RequestState::Completed),
            (RequestState::Started, End::Flush(c)) => Ok(RequestState::Flushed(c)),
            // Already over: a double completion, a completion after a flush, or a flush
            // of something the driver completed (the port never does that).
            (ended, _) => Err(ended),
        }
    }
}

struct Inner<X> {
    owner: SrbOwner<X>,
    tag: QueueTag,
    state: Lock<RequestState>,
}

/// A request the port gave the driver: clones are the same request. Derefs to its
/// [`Srb`] (read and write the data, set the status and sense, use the extension).
pub struct Request<X> {
    inner: Arc<Inner<X>>,
}

impl<X> Clone for Request<X> {
    fn clone(&self) -> Self {
        Request {
            inner: self.inner.clone(),
        }
    }
}

impl<X> fmt::Debug for Request<X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Request")
            .field("id", &self.id())
            .field("lu", &self.address())
            .field("tag", &self.inner.tag)
            .field("state", &self.state())
            .finish()
    }
}

impl<X> Deref for Request<X> {
    type Target = Srb<X>;

    fn deref(&self) -> &Srb<X> {
        self.inner.owner.srb()
    }
}

impl<X> Request<X> {
    /// A started request: how the port (the emulated one, or a kernel driver's glue over
    /// the SRB the system handed it) gives an SRB and its tag to the driver.
    pub fn new(owner: SrbOwner<X>, tag: QueueTag) -> Request<X> {
        Request {
            inner: Arc::new(Inner {
                owner,
                tag,
                state: Lock::new(RequestState::Started),
            }),
        }
    }

    /// Its tag on its LU.
    pub fn tag(&self) -> QueueTag {
        self.inner.tag
    }

    /// Where it is in its life.
    pub fn state(&self) -> RequestState {
        *self.inner.state.lock()
    }

    /// Whether two handles are the same request.
    pub fn same(&self, other: &Request<X>) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Its SRB's identity (also through the deref; here to name it in logs).
    pub fn request_id(&self) -> SrbId {
        self.id()
    }

    /// Its LU (as [`Srb::address`]).
    pub fn lu(&self) -> LuAddress {
        self.address()
    }

    /// Ends its life (see [`RequestState::end`]; the emulated port's rule keeping).
    #[cfg_attr(not(feature = "std"), allow(dead_code))]
    pub(crate) fn end(&self, how: End) -> Result<RequestState, RequestState> {
        let mut s = self.inner.state.lock();
        let next = s.end(how)?;
        *s = next;
        Ok(next)
    }

    /// The port's side of the SRB.
    pub fn owner(&self) -> &SrbOwner<X> {
        &self.inner.owner
    }
}

/// Requests the port ended, kept for new ones (as the SRBs' lookaside list): one is reused
/// once nothing else holds it — the driver let go of its handles — so starting a request
/// allocates nothing in the steady state. A handle the driver still holds keeps its request
/// (and its ended state, which is how a late or second completion is told apart) out of
/// reuse.
#[cfg(feature = "std")]
pub(crate) struct RequestLookaside<X> {
    retired: Lock<alloc::vec::Vec<Arc<Inner<X>>>>,
}

/// Requests a lookaside list keeps at most.
#[cfg(feature = "std")]
const LOOKASIDE_DEPTH: usize = 256;
/// Retired requests one start looks at (the oldest are likeliest to be free).
#[cfg(feature = "std")]
const LOOKASIDE_SCAN: usize = 8;

#[cfg(feature = "std")]
impl<X> Default for RequestLookaside<X> {
    fn default() -> Self {
        RequestLookaside {
            retired: Lock::new(alloc::vec::Vec::new()),
        }
    }
}

#[cfg(feature = "std")]
impl<X> RequestLookaside<X> {
    /// Keeps an ended request's memory for a later one.
    pub(crate) fn retire(&self, request: Request<X>) {
        let mut r = self.retired.lock();
        if r.len() < LOOKASIDE_DEPTH {
            r.push(request.inner);
        }
    }

    /// A started request for `owner` under `tag`: a retired one nothing else holds, if
    /// one is near the front, else a new one.
    pub(crate) fn start(&self, owner: SrbOwner<X>, tag: QueueTag) -> Request<X> {
        let free = {
            let mut r = self.retired.lock();
            let i = r
                .iter()
                .take(LOOKASIDE_SCAN)
                .position(|a| Arc::strong_count(a) == 1);
            i.map(|i| r.swap_remove(i))
        };
        if let Some(mut inner) = free
            && let Some(slot) = Arc::get_mut(&mut inner)
        {
            slot.owner = owner;
            slot.tag = tag;
            *slot.state.get_mut() = RequestState::Started;
            return Request { inner };
        }
        Request::new(owner, tag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_started_request_ends() {
        let s = RequestState::Started;
        assert_eq!(s.end(End::Complete), Ok(RequestState::Completed));
        let flushed = RequestState::Flushed(FlushCause::Reset);
        assert_eq!(s.end(End::Flush(FlushCause::Reset)), Ok(flushed));
        assert_eq!(
            RequestState::Completed.end(End::Complete),
            Err(RequestState::Completed),
            "a double completion"
        );
        assert_eq!(flushed.end(End::Complete), Err(flushed), "after a flush");
    }

    #[cfg(feature = "std")]
    fn owner(id: u64) -> SrbOwner<()> {
        use win_port::{DataBuffer, DataDirection, SrbRequest};
        let lu = LuAddress::new(0, 0, 0);
        let req = SrbRequest::scsi(lu, &[0; 6], DataDirection::None, DataBuffer::empty());
        SrbOwner::new(SrbId(id), req, DataBuffer::empty())
    }

    /// An ended request nothing else holds is started again in the same memory, as new;
    /// one the driver still holds a handle to is left alone (its ended state is how the
    /// port tells a second completion from a first).
    #[cfg(feature = "std")]
    #[test]
    fn the_lookaside_reuses_only_a_request_nobody_holds() {
        let pool = RequestLookaside::default();
        let first = pool.start(owner(1), QueueTag(3));
        first.end(End::Complete).expect("started");
        let at = Arc::as_ptr(&first.inner);
        pool.retire(first);
        let again = pool.start(owner(2), QueueTag(4));
        assert_eq!(Arc::as_ptr(&again.inner), at, "reused");
        assert_eq!(again.state(), RequestState::Started);
        assert_eq!((again.request_id(), again.tag()), (SrbId(2), QueueTag(4)));

        again.end(End::Complete).expect("started");
        let kept = again.clone();
        pool.retire(again);
        let other = pool.start(owner(3), QueueTag(5));
        assert!(!other.same(&kept), "a request the driver holds was reused");
        assert_eq!(kept.state(), RequestState::Completed);
        assert_eq!(kept.request_id(), SrbId(2));
    }
}
