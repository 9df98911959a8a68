//! RADOS objects beside the images, for state several clients share (issue #30: the
//! reservations of an LU served by several appliances): an object read whole, replaced
//! only if an attribute still holds the value the writer last saw (one atomic operation:
//! compare-and-set), watched, and notified — the notifier waiting until every watcher has
//! acknowledged or timed out. And the client's own identity (instance id, address) and the
//! cluster's blocklist, which fences a client that did not answer.

use crate::RbdError;
use crate::ffi::{IoCtxHandle, NotifyAck, ObjectWatch};
use crate::image::{Cluster, Pool, cstr};
use std::ffi::CString;
use std::sync::Arc;
use std::time::Duration;

/// One object of a pool.
#[derive(Debug, Clone)]
pub struct RadosObject {
    io: Arc<IoCtxHandle>,
    oid: CString,
}

/// A notification a watch received: who sent it, what it says; the sender waits for its
/// [`Notification::ack`].
#[derive(Debug)]
pub struct Notification {
    /// The notifier's instance id ([`Cluster::instance_id`]).
    pub notifier: u64,
    /// What it sent.
    pub payload: Vec<u8>,
    ack: NotifyAck,
}

impl Notification {
    /// Tells the notifier this watcher has dealt with it (from any thread).
    pub fn ack(self) -> Result<(), RbdError> {
        self.ack.ack()
    }
}

/// A watch of an object; ends when dropped (no routine runs after the drop returns).
#[derive(Debug)]
pub struct Watch(#[allow(dead_code)] ObjectWatch);

/// Who acknowledged a notification and who did not within its timeout, by instance id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NotifyReply {
    /// The watchers that acknowledged.
    pub acked: Vec<u64>,
    /// The watchers that did not, within the timeout.
    pub timed_out: Vec<u64>,
}

impl NotifyReply {
    /// librados's reply buffer: le32 acks, each { le64 gid, le64 cookie, le32 len, data },
    /// then le32 timeouts, each { le64 gid, le64 cookie }.
    fn parse(b: &[u8]) -> Result<NotifyReply, RbdError> {
        let bad = || RbdError::Invalid(format!("a notify reply of {} bytes is malformed", b.len()));
        let mut at = 0usize;
        let mut take = |n: usize| -> Result<&[u8], RbdError> {
            let s = b.get(at..at + n).ok_or_else(bad)?;
            at += n;
            Ok(s)
        };
        let u32_of = |s: &[u8]| u32::from_le_bytes(s.try_into().unwrap_or_default());
        let u64_of = |s: &[u8]| u64::from_le_bytes(s.try_into().unwrap_or_default());
        let mut r = NotifyReply::default();
        if b.is_empty() {
            return Ok(r);
        }
        let acks = u32_of(take(4)?);
        for _ in 0..acks {
            r.acked.push(u64_of(take(8)?));
            take(8)?;
            let len = u32_of(take(4)?) as usize;
            take(len)?;
        }
        let timeouts = u32_of(take(4)?);
        for _ in 0..timeouts {
            r.timed_out.push(u64_of(take(8)?));
            take(8)?;
        }
        Ok(r)
    }
}

impl Pool {
    /// Object `name` of this pool (nothing is read or created yet).
    pub fn object(&self, name: &str) -> Result<RadosObject, RbdError> {
        Ok(RadosObject {
            io: self.io().clone(),
            oid: cstr("object", name)?,
        })
    }
}

impl RadosObject {
    /// Its data, up to `max` bytes; `None` if the object does not exist.
    pub fn read(&self, max: usize) -> Result<Option<Vec<u8>>, RbdError> {
        self.io.read_object(&self.oid, max)
    }

    /// Its attribute `name`, up to `max` bytes; `None` if the object or the attribute does
    /// not exist.
    pub fn attr(&self, name: &str, max: usize) -> Result<Option<Vec<u8>>, RbdError> {
        self.io.getxattr(&self.oid, &cstr("attribute", name)?, max)
    }

    /// Sets attribute `name` to `value` (creating the object if it does not exist).
    pub fn set_attr(&self, name: &str, value: &[u8]) -> Result<(), RbdError> {
        self.io
            .setxattr(&self.oid, &cstr("attribute", name)?, value)
    }

    /// Atomically: if attribute `attr` is `expect` (`None`: the object does not exist),
    /// the data becomes `data` and the attribute `new`. `Ok(false)`: it was not (another
    /// client changed it first), and nothing changed.
    pub fn replace_if(
        &self,
        attr: &str,
        expect: Option<&[u8]>,
        new: &[u8],
        data: &[u8],
    ) -> Result<bool, RbdError> {
        self.io
            .replace_if(&self.oid, &cstr("attribute", attr)?, expect, new, data)
    }

    /// Watches the object: `on_notify` runs on librados's thread for each notification
    /// (it should hand it on; the notifier waits for its acknowledgement), `on_error`
    /// when the watch breaks (the client lost the OSD, or was blocklisted).
    pub fn watch(
        &self,
        on_notify: impl Fn(Notification) + Send + Sync + 'static,
        on_error: impl Fn(RbdError) + Send + Sync + 'static,
    ) -> Result<Watch, RbdError> {
        let w = self.io.watch(
            &self.oid,
            Box::new(move |ack, notifier, payload| {
                on_notify(Notification {
                    notifier,
                    payload,
                    ack,
                });
            }),
            Box::new(move |err| on_error(RbdError::call("watch", i64::from(err)))),
        )?;
        Ok(Watch(w))
    }

    /// Notifies every watcher (this client's own watches included) and waits up to
    /// `timeout` for each to acknowledge.
    pub fn notify(&self, payload: &[u8], timeout: Duration) -> Result<NotifyReply, RbdError> {
        let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        let (_, reply) = self.io.notify(&self.oid, payload, ms)?;
        NotifyReply::parse(&reply)
    }
}

impl Cluster {
    /// This client's instance id: what notifications and notify replies name it by.
    pub fn instance_id(&self) -> Result<u64, RbdError> {
        self.handle().instance_id()
    }

    /// This client's address as the blocklist takes it (`IP:port/nonce`), from librados's
    /// list of its addresses (`[v2:IP:port/nonce,v1:…]` or one address).
    pub fn address(&self) -> Result<String, RbdError> {
        let all = self.handle().addrs()?;
        let first = all
            .trim_matches(|c| c == '[' || c == ']')
            .split(',')
            .next()
            .unwrap_or_default();
        let addr = first
            .strip_prefix("v2:")
            .or_else(|| first.strip_prefix("v1:"))
            .or_else(|| first.strip_prefix("any:"))
            .unwrap_or(first);
        if addr.is_empty() {
            return Err(RbdError::Invalid(format!("no client address in {all:?}")));
        }
        Ok(addr.to_owned())
    }

    /// Fences the client at `addr` ([`Cluster::address`] of it): the OSDs refuse it for
    /// `expire` (whole seconds, at least one).
    pub fn blocklist(&self, addr: &str, expire: Duration) -> Result<(), RbdError> {
        let secs = u32::try_from(expire.as_secs().max(1)).unwrap_or(u32::MAX);
        self.handle().blocklist_add(&cstr("address", addr)?, secs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notify_reply_names_who_answered_and_who_did_not() {
        let mut b = Vec::new();
        b.extend(2u32.to_le_bytes());
        for (gid, data) in [(7u64, &b"ok"[..]), (9, &b""[..])] {
            b.extend(gid.to_le_bytes());
            b.extend(1u64.to_le_bytes());
            b.extend((data.len() as u32).to_le_bytes());
            b.extend(data);
        }
        b.extend(1u32.to_le_bytes());
        b.extend(11u64.to_le_bytes());
        b.extend(3u64.to_le_bytes());
        let r = NotifyReply::parse(&b).expect("parses");
        assert_eq!((r.acked, r.timed_out), (vec![7, 9], vec![11]));
        assert!(NotifyReply::parse(&b[..b.len() - 1]).is_err(), "truncated");
        assert_eq!(
            NotifyReply::parse(&[]).expect("empty"),
            NotifyReply::default()
        );
    }
}
