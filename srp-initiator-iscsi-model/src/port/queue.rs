//! The port's queues, without threads or the driver: one per LU, each with its tag table
//! (rule b: one request per tag) and at most `depth` requests outstanding in the driver,
//! and a round-robin pick of the next request to start across LUs.
//!
//! A tag is in use from the moment a submitter names it (the request waits with it
//! reserved) or the port assigns it (at start: the lowest free one) until the request
//! ends — completed by the driver or flushed by the port.

use super::request::QueueTag;
use super::{LuAddress, SrbId, SrbOwner, SrbResult};
use access_layer::verbs::Completer;
use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;

/// A request waiting in the port.
pub(crate) struct Queued<X> {
    pub(crate) owner: SrbOwner<X>,
    /// The submitter's tag (reserved in the LU's table), or None: the port assigns one.
    pub(crate) tag: Option<QueueTag>,
    pub(crate) completer: Completer<SrbResult>,
}

impl<X> Queued<X> {
    pub(crate) fn id(&self) -> SrbId {
        self.owner.srb().id()
    }
}

/// One LU's queue.
pub(crate) struct LuQueue<X> {
    /// Waiting, oldest first.
    pub(crate) waiting: VecDeque<Queued<X>>,
    /// Tags in use, and by which request.
    pub(crate) tags: ib_verbs::IdTable<QueueTag, SrbId>,
    /// In the driver.
    pub(crate) outstanding: usize,
    /// The driver reported the device gone: nothing is accepted for it.
    pub(crate) gone: bool,
}

impl<X> LuQueue<X> {
    fn new() -> Self {
        LuQueue {
            waiting: VecDeque::new(),
            tags: ib_verbs::IdTable::new(),
            outstanding: 0,
            gone: false,
        }
    }

    /// The lowest tag not in use.
    fn free_tag(&self) -> Option<QueueTag> {
        (0..QueueTag::COUNT)
            .map(|t| QueueTag(t as u8))
            .find(|t| !self.tags.contains_key(*t))
    }
}

/// All LUs' queues.
pub(crate) struct Queues<X> {
    pub(crate) lus: BTreeMap<LuAddress, LuQueue<X>>,
    /// Outstanding per LU at most (the driver's `tags_per_lu`).
    pub(crate) depth: usize,
    /// Where the round robin resumes.
    cursor: Option<LuAddress>,
}

impl<X> Queues<X> {
    pub(crate) fn new(depth: usize) -> Self {
        Queues {
            lus: BTreeMap::new(),
            depth: depth.max(1),
            cursor: None,
        }
    }

    /// The LU's queue, made on first use.
    pub(crate) fn lu(&mut self, lu: LuAddress) -> &mut LuQueue<X> {
        self.lus.entry(lu).or_insert_with(LuQueue::new)
    }

    /// Queues a request; a submitter's tag already in use on the LU is refused (the
    /// request comes back).
    pub(crate) fn push(&mut self, lu: LuAddress, item: Queued<X>) -> Result<(), Queued<X>> {
        let q = self.lu(lu);
        if let Some(tag) = item.tag {
            if tag == QueueTag::UNTAGGED || q.tags.contains_key(tag) {
                return Err(item);
            }
            q.tags.insert(tag, item.id());
        }
        q.waiting.push_back(item);
        Ok(())
    }

    /// The next request the depths allow, round robin across LUs, with its tag (now in
    /// use); counted outstanding.
    pub(crate) fn next(&mut self) -> Option<(Queued<X>, QueueTag)> {
        let depth = self.depth;
        let mut prev = self.cursor;
        for _ in 0..self.lus.len() {
            let lu = prev
                .and_then(|c| {
                    self.lus
                        .range((Bound::Excluded(c), Bound::Unbounded))
                        .next()
                })
                .or_else(|| self.lus.iter().next())
                .map(|(k, _)| *k)?;
            prev = Some(lu);
            let q = self.lus.get_mut(&lu)?;
            let Some(front) = q.waiting.front() else {
                continue;
            };
            if q.outstanding >= depth {
                continue;
            }
            let Some(tag) = front.tag.or_else(|| q.free_tag()) else {
                continue;
            };
            let item = q.waiting.pop_front()?;
            q.tags.insert(tag, item.id());
            q.outstanding += 1;
            self.cursor = Some(lu);
            return Some((item, tag));
        }
        None
    }

    /// A started request of `lu` under `tag` ended: its tag is free.
    pub(crate) fn ended(&mut self, lu: LuAddress, tag: QueueTag) {
        let q = self.lu(lu);
        debug_assert!(q.outstanding > 0, "LU {lu} outstanding underflow");
        q.outstanding = q.outstanding.saturating_sub(1);
        q.tags.remove(tag);
    }

    /// Takes every waiting request of `lu` (all LUs: `None`), freeing the tags they
    /// reserved.
    pub(crate) fn drain(&mut self, lu: Option<LuAddress>) -> Vec<Queued<X>> {
        let mut out = Vec::new();
        for (_, q) in self
            .lus
            .iter_mut()
            .filter(|(a, _)| lu.is_none_or(|l| l == **a))
        {
            for item in q.waiting.drain(..) {
                if let Some(tag) = item.tag {
                    q.tags.remove(tag);
                }
                out.push(item);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::{DataBuffer, DataDirection, SrbRequest};
    use access_layer::verbs::Completion;

    const A: LuAddress = LuAddress::new(0, 0, 0);
    const B: LuAddress = LuAddress::new(0, 0, 1);

    fn item(id: u64, tag: Option<u8>) -> Queued<()> {
        let req = SrbRequest::scsi(A, &[0; 6], DataDirection::None, DataBuffer::empty());
        let (completer, _) = Completion::pair();
        Queued {
            owner: SrbOwner::new(SrbId(id), req, DataBuffer::empty()),
            tag: tag.map(QueueTag),
            completer,
        }
    }

    #[test]
    fn tags_are_unique_per_lu_and_depth_holds() {
        let mut q = Queues::new(2);
        assert!(q.push(A, item(1, Some(0))).is_ok());
        assert!(q.push(A, item(2, Some(0))).is_err(), "tag 0 is reserved");
        assert!(
            q.push(B, item(3, Some(0))).is_ok(),
            "another LU's tags are its own"
        );
        assert!(q.push(A, item(4, None)).is_ok());
        assert!(q.push(A, item(5, None)).is_ok());
        assert!(
            q.push(A, item(6, Some(255))).is_err(),
            "SP_UNTAGGED is no tag"
        );
        let got: Vec<_> = std::iter::from_fn(|| q.next())
            .map(|(i, t)| (i.id().0, t.0))
            .collect();
        assert_eq!(
            got,
            vec![(1, 0), (3, 0), (4, 1)],
            "round robin, lowest free tag"
        );
        assert!(q.next().is_none(), "LU A is at depth 2");
        q.ended(A, QueueTag(0));
        let (i, t) = q.next().expect("depth freed");
        assert_eq!((i.id().0, t), (5, QueueTag(0)), "tag 0 is free again");
        assert!(q.push(A, item(7, Some(1))).is_err(), "tag 1 is outstanding");
    }
}
