//! The reservation state of an LU several appliances serve from one RBD image
//! (`exec/pr/shared.rs`), kept in the image's pool: the RADOS object `srp.pr.<image>` holds
//! it (its attribute `srp.version` the version, each change a compare-and-set on it) and is
//! watched by every appliance; a change is published by a notification each appliance
//! acknowledges once it has applied it. An appliance that does not acknowledge within
//! [`ACK_TIMEOUT`] is fenced: its client address — which each appliance records as the
//! attribute `srp.member.<instance id>` of the object `srp.members.<image>` when it opens
//! the LU — is added to the cluster's blocklist for [`FENCE_FOR`], so it can no longer
//! write the image, before the change is answered GOOD. A fenced appliance's LUN fails its
//! I/O until the appliance is restarted (a new client instance).

use super::BackendError;
use super::rbd::{RbdSpec, connect};
use crate::exec::pr::shared::{SharedNotice, SharedPrStore};
use rbd_client::{Cluster, RadosObject, RbdError, Watch};
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

/// How long a change waits for every other appliance's acknowledgement.
pub const ACK_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a fenced appliance stays blocklisted.
pub const FENCE_FOR: Duration = Duration::from_secs(3600);
/// The largest state read back.
const MAX_STATE: usize = 1 << 20;
/// The attribute holding the version.
const VERSION: &str = "srp.version";

/// The shared state of one image's LU.
pub struct RbdSharedPr {
    cluster: Cluster,
    state: RadosObject,
    members: RadosObject,
    me: u64,
    name: String,
    watch: Mutex<Option<Watch>>,
}

impl fmt::Debug for RbdSharedPr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RbdSharedPr")
            .field("image", &self.name)
            .field("instance", &self.me)
            .finish()
    }
}

impl RbdSharedPr {
    /// Joins the image's shared state as this appliance (its client's address recorded),
    /// creating the state (empty, version 0) if no appliance has yet.
    pub fn open(spec: &RbdSpec) -> Result<RbdSharedPr, BackendError> {
        let name = format!("rbd:{}", spec.name());
        let err = |what: &str, e: RbdError| BackendError::Unsuited {
            path: name.clone().into(),
            why: format!("the reservation state shared with the other appliances: {what}: {e}"),
        };
        let cluster = connect(spec).map_err(|e| err("connecting", e))?;
        let pool = cluster.pool(&spec.pool).map_err(|e| err("the pool", e))?;
        let state = pool
            .object(&format!("srp.pr.{}", spec.image))
            .map_err(|e| err("its object", e))?;
        let members = pool
            .object(&format!("srp.members.{}", spec.image))
            .map_err(|e| err("its members", e))?;
        let me = cluster
            .instance_id()
            .map_err(|e| err("this client's id", e))?;
        let addr = cluster
            .address()
            .map_err(|e| err("this client's address", e))?;
        members
            .set_attr(&format!("srp.member.{me}"), addr.as_bytes())
            .map_err(|e| err("recording this appliance", e))?;
        let empty = crate::exec::pr::shared::encode_state(0, &Default::default());
        // Lost to another appliance creating it first: fine.
        state
            .replace_if(VERSION, None, b"0", &empty)
            .map_err(|e| err("creating it", e))?;
        tracing::info!(image = %name, instance = me, address = %addr,
            "reservations of this LU are shared with the other appliances serving the image");
        Ok(RbdSharedPr {
            cluster,
            state,
            members,
            me,
            name,
            watch: Mutex::new(None),
        })
    }

    /// Fences appliance `gid`, which did not acknowledge a change.
    fn fence(&self, gid: u64, version: u64) -> Result<(), String> {
        let addr = self
            .members
            .attr(&format!("srp.member.{gid}"), 256)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("appliance client.{gid} did not acknowledge and its address is unknown: it cannot be fenced"))?;
        let addr = String::from_utf8_lossy(&addr).into_owned();
        self.cluster
            .blocklist(&addr, FENCE_FOR)
            .map_err(|e| format!("fencing client.{gid} at {addr}: {e}"))?;
        tracing::error!(image = %self.name, instance = gid, address = %addr, version,
            "an appliance did not acknowledge a reservation change: fenced from the cluster (blocklisted); restart it to serve again");
        Ok(())
    }
}

impl SharedPrStore for RbdSharedPr {
    fn load(&self) -> Result<Option<Vec<u8>>, String> {
        match self.state.read(MAX_STATE) {
            Ok(Some(b)) if !b.is_empty() => Ok(Some(b)),
            Ok(_) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    fn store(&self, expect: Option<u64>, version: u64, bytes: &[u8]) -> Result<bool, String> {
        let expect = expect.map(|v| v.to_string());
        self.state
            .replace_if(
                VERSION,
                expect.as_deref().map(str::as_bytes),
                version.to_string().as_bytes(),
                bytes,
            )
            .map_err(|e| e.to_string())
    }

    fn publish(&self, version: u64, message: &[u8]) -> Result<(), String> {
        let reply = self
            .state
            .notify(message, ACK_TIMEOUT)
            .map_err(|e| e.to_string())?;
        for gid in reply.timed_out.into_iter().filter(|&g| g != self.me) {
            self.fence(gid, version)?;
        }
        Ok(())
    }

    fn subscribe(&self, on_notice: Box<dyn Fn(SharedNotice) + Send + Sync>) -> Result<(), String> {
        let (me, name) = (self.me, self.name.clone());
        let w = self
            .state
            .watch(
                move |mut n| {
                    if n.notifier == me {
                        // This appliance's own change: applied already.
                        let _ = n.ack();
                        return;
                    }
                    let message = std::mem::take(&mut n.payload);
                    on_notice(SharedNotice {
                        message,
                        done: Box::new(move || {
                            if let Err(e) = n.ack() {
                                tracing::warn!(error = %e, "acknowledging a reservation change failed");
                            }
                        }),
                    });
                },
                move |e| {
                    tracing::error!(image = %name, error = %e,
                        "the watch of the shared reservation state broke: changes by the other appliances are not seen (they fence this one)");
                },
            )
            .map_err(|e| e.to_string())?;
        *self
            .watch
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(w);
        Ok(())
    }
}
