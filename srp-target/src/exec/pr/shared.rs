//! Reservations shared by several appliances serving one LU (issue #30, Deliver 4): the
//! persistent reservation state and the SCSI-2 reservation are one state, kept by a
//! [`SharedPrStore`] outside the appliance (an RBD LU's: a RADOS object beside its image,
//! `backend/rbd_pr.rs`), so a registration or reservation made through one appliance is
//! enforced at every other.
//!
//! A change (`LogicalUnit::pr_transact`), under the LU's PR lock: the state is read back
//! from the store when another appliance moved it on, the service action runs on it, and
//! the result is stored only if the stored version is still the one read (compare-and-set;
//! on a lost race the action runs again on the newer state). The unit attentions it owes
//! are established here under the lock, as for an unshared LU. Then, with the lock
//! released, `LogicalUnit::pr_publish` tells the other appliances and returns only once
//! each has applied the new state — or, if one does not answer, once the store has fenced
//! it from the cluster — so that, when the service action answers GOOD, no command checked
//! against the old state can still reach the medium anywhere.
//!
//! An appliance told of a change (`LogicalUnit::apply_shared_pr`, on a thread of its
//! own): reads the state, takes it under the PR lock with the unit attentions the message
//! names, moves the LU's PR epoch on, waits until every I/O in flight has ended (the LU's
//! exclusive order), and acknowledges. A command that passed its reservation check before
//! the change and takes the LU's order after it sees the epoch moved and is answered BUSY
//! (its initiator sends it again and meets the new state): see
//! `LogicalUnit::check_pr_epoch`.

use super::{ItNexus, PrState};
use crate::exec::ua::To;
use crate::exec::{LogicalUnit, Stop};
use crate::lu::RelativePortId;
use scsi::{Sense, SenseCode, SenseKey};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// Where the shared state lives (module doc).
pub trait SharedPrStore: Send + Sync + fmt::Debug {
    /// The stored state, if any.
    fn load(&self) -> Result<Option<Vec<u8>>, String>;
    /// Stores `bytes` (whose first line names `version`) only if the stored version is
    /// still `expect` (`None`: nothing stored yet); `Ok(false)`: another appliance moved it
    /// on first, nothing changed.
    fn store(&self, expect: Option<u64>, version: u64, bytes: &[u8]) -> Result<bool, String>;
    /// Tells every other appliance of `version` with `message`; returns once each has
    /// applied it or has been fenced from the store's cluster. `Err`: one could be neither.
    fn publish(&self, version: u64, message: &[u8]) -> Result<(), String>;
    /// Calls `on_notice` (on a thread of the store's) for each change another appliance
    /// publishes.
    fn subscribe(&self, on_notice: Box<dyn Fn(SharedNotice) + Send + Sync>) -> Result<(), String>;
}

/// A change another appliance published: its message, and what acknowledges it.
pub struct SharedNotice {
    /// The unit attentions it established, encoded (`encode_message`).
    pub message: Vec<u8>,
    /// Tells the publisher this appliance has applied it.
    pub done: Box<dyn FnOnce() + Send>,
}

impl fmt::Debug for SharedNotice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedNotice")
            .field("message_len", &self.message.len())
            .finish()
    }
}

/// The state as stored: a first line `version = N`, then the fields.
pub(crate) fn encode_state(version: u64, st: &PrState) -> Vec<u8> {
    let mut out = format!(
        "version = {version}\ngeneration = {}\nptpl = {}\n",
        st.generation, st.ptpl
    );
    if let Some(h) = st.scsi2 {
        out += &format!("scsi2 = \"{}/{}\"\n", h.initiator, h.port.0);
    }
    if let Some(r) = st.res {
        out += &format!(
            "reservation = \"{}/{} {}\"\n",
            r.holder.initiator, r.holder.port.0, r.kind as u8
        );
    }
    for r in &st.regs {
        out += &format!(
            "registration = \"{}/{} {:#018x} {}\"\n",
            r.nexus.initiator,
            r.nexus.port.0,
            r.key,
            u8::from(r.all_tg_pt)
        );
    }
    out.into_bytes()
}

fn nexus(text: &str) -> Result<ItNexus, String> {
    let (i, p) = text
        .split_once('/')
        .ok_or_else(|| format!("{text:?}: not initiator/port"))?;
    Ok(ItNexus {
        initiator: i.parse().map_err(|e| format!("{i:?}: {e}"))?,
        port: RelativePortId(p.parse().map_err(|e| format!("{p:?}: {e}"))?),
    })
}

/// The stored bytes as (version, state); an error names what is wrong.
pub(crate) fn decode_state(bytes: &[u8]) -> Result<(u64, PrState), String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_owned())?;
    let mut version = None;
    let mut st = PrState::default();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (k, v) = line
            .split_once(" = ")
            .ok_or_else(|| format!("line {line:?}"))?;
        let quoted = || v.trim_matches('"');
        let num = |v: &str| v.parse::<u64>().map_err(|e| format!("{k} {v:?}: {e}"));
        match k {
            "version" => version = Some(num(v)?),
            "generation" => st.generation = u32::try_from(num(v)?).map_err(|e| e.to_string())?,
            "ptpl" => st.ptpl = v == "true",
            "scsi2" => st.scsi2 = Some(nexus(quoted())?),
            "reservation" => {
                let (n, t) = quoted()
                    .split_once(' ')
                    .ok_or_else(|| format!("reservation {v}"))?;
                let code = u8::try_from(num(t)?).map_err(|e| e.to_string())?;
                let kind = super::ResType::from_pr(scsi::cdb::PrType::from(code))
                    .ok_or_else(|| format!("reservation type {code}"))?;
                st.res = Some(super::Reservation {
                    holder: nexus(n)?,
                    kind,
                });
            }
            "registration" => {
                let mut f = quoted().split(' ');
                let (Some(n), Some(key), Some(all)) = (f.next(), f.next(), f.next()) else {
                    return Err(format!("registration {v}"));
                };
                let key = key
                    .strip_prefix("0x")
                    .and_then(|k| u64::from_str_radix(k, 16).ok())
                    .ok_or_else(|| format!("key {key:?}"))?;
                st.regs.push(super::Registration {
                    nexus: nexus(n)?,
                    key,
                    all_tg_pt: all == "1",
                });
            }
            other => return Err(format!("unknown field {other:?}")),
        }
    }
    let version = version.ok_or_else(|| "no version".to_owned())?;
    Ok((version, st))
}

/// The unit attentions of a change, for the other appliances: one line each, `all`,
/// `allbut I/P`, `one I/P` or `port P`, then key, ASC and ASCQ.
pub(crate) fn encode_message(uas: &[(To, SenseCode)]) -> Vec<u8> {
    let mut out = String::new();
    for (to, c) in uas {
        let who = match to {
            To::All => "all".to_owned(),
            To::AllBut(n) => format!("allbut {}/{}", n.initiator, n.port.0),
            To::One(n) => format!("one {}/{}", n.initiator, n.port.0),
            To::Port(p) => format!("port {}", p.0),
        };
        out += &format!("{who} {} {} {}\n", u8::from(c.key), c.asc, c.ascq);
    }
    out.into_bytes()
}

/// `encode_message`'s lines back; a malformed one is skipped (and logged by the caller).
pub(crate) fn decode_message(bytes: &[u8]) -> Result<Vec<(To, SenseCode)>, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_owned())?;
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let (to, rest) = match f.as_slice() {
            ["all", rest @ ..] => (To::All, rest),
            ["allbut", n, rest @ ..] => (To::AllBut(nexus(n)?), rest),
            ["one", n, rest @ ..] => (To::One(nexus(n)?), rest),
            ["port", p, rest @ ..] => (
                To::Port(RelativePortId(
                    p.parse().map_err(|_| format!("port {p:?}"))?,
                )),
                rest,
            ),
            _ => return Err(format!("line {line:?}")),
        };
        let [k, asc, ascq] = rest else {
            return Err(format!("line {line:?}"));
        };
        let n = |v: &str| v.parse::<u8>().map_err(|_| format!("{v:?} in {line:?}"));
        out.push((
            to,
            SenseCode {
                key: SenseKey::from(n(k)?),
                asc: n(asc)?,
                ascq: n(ascq)?,
            },
        ));
    }
    Ok(out)
}

/// A change made (`LogicalUnit::pr_transact`): the new version to publish, if the state
/// is shared and moved on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Published(Option<u64>);

/// Tries before a change gives up against appliances that keep moving the state on.
const RACES: usize = 16;

fn internal(what: &str, e: &str, lu: &LogicalUnit) -> Stop {
    tracing::error!(lu = %lu.identity().unique_name(), error = %e,
        "shared reservation state: {what} failed; the service action is not applied");
    Stop::Check(Sense::new(SenseCode::INTERNAL_TARGET_FAILURE))
}

impl LogicalUnit {
    /// Runs `change` on the reservation state under the PR lock — against the shared state
    /// when the LU has one (module doc) — and, when `ok` says it succeeded, keeps it (stored
    /// first when shared). Hands back the locked state, as it was before, and what to
    /// publish once the lock is released (`LogicalUnit::pr_publish`).
    pub(crate) fn pr_transact<R>(
        &self,
        mut change: impl FnMut(&mut PrState) -> R,
        ok: impl Fn(&R) -> bool,
    ) -> Result<
        (
            std::sync::RwLockWriteGuard<'_, PrState>,
            PrState,
            R,
            Published,
        ),
        Stop,
    > {
        let mut st = self.pr_write();
        let Some(store) = &self.pr_shared else {
            let before = st.clone();
            let r = change(&mut st);
            if !ok(&r) {
                *st = before.clone();
            }
            return Ok((st, before, r, Published(None)));
        };
        for _ in 0..RACES {
            match store.load() {
                Ok(Some(bytes)) => {
                    let (v, fresh) =
                        decode_state(&bytes).map_err(|e| internal("reading", &e, self))?;
                    if Some(v) != self.pr_version.load() {
                        *st = fresh;
                        self.pr_version.store(Some(v));
                    }
                }
                Ok(None) => {}
                Err(e) => return Err(internal("reading", &e, self)),
            }
            let before = st.clone();
            let r = change(&mut st);
            if !ok(&r) || *st == before {
                *st = before.clone();
                return Ok((st, before, r, Published(None)));
            }
            let expect = self.pr_version.load();
            let next = expect.map_or(1, |v| v + 1);
            match store.store(expect, next, &encode_state(next, &st)) {
                Ok(true) => {
                    self.pr_version.store(Some(next));
                    return Ok((st, before, r, Published(Some(next))));
                }
                Ok(false) => {
                    *st = before;
                    // Another appliance moved it on: read it back, run the action again.
                    self.pr_version.store(None);
                }
                Err(e) => {
                    *st = before;
                    return Err(internal("storing", &e, self));
                }
            }
        }
        Err(internal(
            "storing",
            "the state kept changing under this appliance",
            self,
        ))
    }

    /// Tells the other appliances of a change `LogicalUnit::pr_transact` made, with the
    /// unit attentions it established; returns once each has applied it or been fenced.
    /// Call with the PR lock released.
    pub(crate) fn pr_publish(&self, p: Published, uas: &[(To, SenseCode)]) -> Result<(), Stop> {
        let (Some(store), Published(Some(version))) = (&self.pr_shared, p) else {
            return Ok(());
        };
        store
            .publish(version, &encode_message(uas))
            .map_err(|e| internal("telling the other appliances", &e, self))
    }

    /// Tells the other appliances of unit attentions for their nexuses without a change of
    /// state (a LOGICAL UNIT RESET here), waiting as `LogicalUnit::pr_publish` does;
    /// logged if it fails.
    pub(crate) fn pr_tell(&self, uas: &[(To, SenseCode)]) {
        let (Some(store), Some(version)) = (&self.pr_shared, self.pr_version.load()) else {
            return;
        };
        if let Err(e) = store.publish(version, &encode_message(uas)) {
            tracing::error!(lu = %self.identity().unique_name(), error = %e,
                "telling the other appliances of a unit attention failed");
        }
    }

    /// Whether the state is shared with other appliances.
    pub(crate) fn pr_is_shared(&self) -> bool {
        self.pr_shared.is_some()
    }

    /// Takes the shared state another appliance published (module doc), then acknowledges.
    pub(crate) fn apply_shared_pr(&self, notice: SharedNotice) {
        let Some(store) = &self.pr_shared else {
            (notice.done)();
            return;
        };
        let lu = self.identity().unique_name();
        {
            let mut st = self.pr_write();
            let loaded = store.load().and_then(|b| match b {
                Some(b) => decode_state(&b).map(Some),
                None => Ok(None),
            });
            // The unit attentions the publisher established (with a change of state, or
            // alone: a LOGICAL UNIT RESET there) reach this appliance's nexuses too.
            let tell = || match decode_message(&notice.message) {
                Ok(uas) => {
                    for (to, code) in uas {
                        self.unit_attention(to, code);
                    }
                }
                Err(e) => tracing::warn!(lu = %lu, error = %e,
                    "shared reservation state: a notice's unit attentions could not be read"),
            };
            match loaded {
                Ok(Some((v, fresh))) if Some(v) != self.pr_version.load() => {
                    *st = fresh;
                    self.pr_version.store(Some(v));
                    tell();
                    self.pr_epoch.fetch_add(1, Ordering::AcqRel);
                    tracing::info!(lu = %lu, version = v,
                        "shared reservation state: taken from another appliance");
                }
                Ok(_) => tell(),
                Err(e) => {
                    // Not acknowledged: the publisher fences this appliance rather than
                    // answer GOOD while it may still enforce the old state.
                    tracing::error!(lu = %lu, error = %e,
                        "shared reservation state: a change could not be read; not acknowledged (the other appliance will fence this one)");
                    return;
                }
            }
        }
        // Commands checked against the old state and already past the order have ended.
        drop(self.atomic_order());
        (notice.done)();
    }

    /// Starts taking the changes other appliances publish: each on a thread of this LU's,
    /// in order. Called once the LU is shared (`into_shared`).
    pub(crate) fn follow_shared_pr(self: &Arc<Self>) {
        let Some(store) = &self.pr_shared else {
            return;
        };
        // The state as the other appliances left it, before any command is checked.
        {
            let mut st = self.pr_write();
            match store
                .load()
                .and_then(|b| b.map(|b| decode_state(&b)).transpose())
            {
                Ok(Some((v, fresh))) => {
                    *st = fresh;
                    self.pr_version.store(Some(v));
                }
                Ok(None) => {}
                Err(e) => tracing::error!(lu = %self.identity().unique_name(), error = %e,
                    "shared reservation state: cannot be read at start; the first service action reads it again"),
            }
        }
        let (tx, rx) = std::sync::mpsc::channel::<SharedNotice>();
        let weak = Arc::downgrade(self);
        let name = self.identity().unique_name().to_owned();
        let spawned = std::thread::Builder::new()
            .name("pr-follow".into())
            .spawn(move || {
                while let Ok(n) = rx.recv() {
                    match weak.upgrade() {
                        Some(lu) => lu.apply_shared_pr(n),
                        None => (n.done)(),
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::error!(lu = %name, error = %e,
                "shared reservation state: no thread to follow the other appliances; their changes will not be acknowledged (they fence this one)");
            return;
        }
        let tx = std::sync::Mutex::new(tx);
        if let Err(e) = store.subscribe(Box::new(move |n| {
            let _ = tx
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .send(n);
        })) {
            tracing::error!(lu = %name, error = %e,
                "shared reservation state: cannot follow the other appliances; their changes will not be acknowledged (they fence this one)");
        }
    }

    /// After a command took the LU's order: BUSY if the shared reservation state changed
    /// since `seen` (the epoch when the command passed its check), so that it is sent again
    /// and checked against the new state (module doc).
    pub(crate) fn check_pr_epoch(&self, seen: u64) -> Result<(), Stop> {
        if self.pr_shared.is_some() && self.pr_epoch.load(Ordering::Acquire) != seen {
            tracing::info!(lu = %self.identity().unique_name(),
                "a command met a reservation change from another appliance between its check and the medium: answered BUSY (it will be sent again)");
            return Err(Stop::Busy);
        }
        Ok(())
    }

    /// The PR epoch now (moved on by each change taken from another appliance).
    pub(crate) fn pr_epoch(&self) -> u64 {
        self.pr_epoch.load(Ordering::Acquire)
    }
}

/// The version of the shared state this appliance holds (read and written with the PR
/// lock held; its own small lock only to keep `&self`).
#[derive(Debug, Default)]
pub(crate) struct PrVersion(std::sync::Mutex<Option<u64>>);

impl PrVersion {
    pub(crate) fn load(&self) -> Option<u64> {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn store(&self, v: Option<u64>) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = v;
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Registration, ResType, Reservation};
    use super::*;
    use srp::wire::PortId;

    fn n(i: u8, p: u16) -> ItNexus {
        ItNexus {
            initiator: PortId([i; 16]),
            port: RelativePortId(p),
        }
    }

    #[test]
    fn the_state_round_trips() {
        let st = PrState {
            generation: 7,
            regs: vec![
                Registration {
                    nexus: n(0xa0, 1),
                    key: 0xaaaa,
                    all_tg_pt: false,
                },
                Registration {
                    nexus: n(0xb0, 3),
                    key: u64::MAX,
                    all_tg_pt: true,
                },
            ],
            res: Some(Reservation {
                holder: n(0xa0, 1),
                kind: ResType::WriteExclusiveRegistrantsOnly,
            }),
            ptpl: true,
            scsi2: Some(n(0xc0, 2)),
        };
        let (v, back) = decode_state(&encode_state(42, &st)).expect("decodes");
        assert_eq!((v, back), (42, st));
        assert!(decode_state(b"generation = 1\n").is_err(), "no version");
        assert!(decode_state(b"version = 1\ncolour = \"red\"\n").is_err());
    }

    /// A store in memory: what another appliance left, compare-and-set by version.
    #[derive(Debug, Default)]
    struct MemStore(std::sync::Mutex<Option<(u64, Vec<u8>)>>);

    impl SharedPrStore for MemStore {
        fn load(&self) -> Result<Option<Vec<u8>>, String> {
            Ok(self.0.lock().expect("mem").as_ref().map(|(_, b)| b.clone()))
        }
        fn store(&self, expect: Option<u64>, version: u64, bytes: &[u8]) -> Result<bool, String> {
            let mut s = self.0.lock().expect("mem");
            if s.as_ref().map(|(v, _)| *v) != expect {
                return Ok(false);
            }
            *s = Some((version, bytes.to_vec()));
            Ok(true)
        }
        fn publish(&self, _: u64, _: &[u8]) -> Result<(), String> {
            Ok(())
        }
        fn subscribe(&self, _: Box<dyn Fn(SharedNotice) + Send + Sync>) -> Result<(), String> {
            Ok(())
        }
    }

    #[test]
    fn a_command_checked_before_another_appliances_change_is_busy() {
        use crate::backend::{BlockSize, RamBackend};
        let store = Arc::new(MemStore::default());
        let mut cfg = crate::exec::LuConfig::new(crate::lu::LunIdentity::derive(
            "shared",
            crate::lu::Oui::new(0x001405).expect("oui"),
        ));
        cfg.shared_pr = Some(store.clone());
        let ram = RamBackend::new(64, BlockSize::B512).expect("ram");
        let lu = LogicalUnit::new(Box::new(ram), cfg).into_shared();
        let nexus = |epoch: u64| crate::exec::Nexus {
            initiator: PortId([0xa0; 16]),
            luns: &[],
            port: crate::lu::PortIdentity::for_ioc(0).expect("port"),
            groups: &[],
            abort: None,
            may_wait: true,
            pr_epoch: Some(epoch),
        };
        let seen = lu.pr_epoch();
        // Another appliance registers a key and tells this one.
        let theirs = PrState {
            generation: 1,
            regs: vec![super::super::Registration {
                nexus: n(0xb0, 3),
                key: 0xb,
                all_tg_pt: false,
            }],
            ..PrState::default()
        };
        assert!(
            store
                .store(None, 1, &encode_state(1, &theirs))
                .expect("store")
        );
        let acked = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let a = acked.clone();
        lu.apply_shared_pr(SharedNotice {
            message: encode_message(&[(To::One(n(0xa0, 1)), SenseCode::RESERVATIONS_PREEMPTED)]),
            done: Box::new(move || a.store(true, Ordering::SeqCst)),
        });
        assert!(acked.load(Ordering::SeqCst), "acknowledged once applied");
        assert_eq!(*lu.pr_read(), theirs, "the other appliance's state taken");
        // A write that passed its check before the change: BUSY at the order.
        assert!(matches!(
            lu.write_order_at(&nexus(seen), scsi::Lba(0), 1),
            Err(Stop::Busy)
        ));
        // Checked after it: goes on.
        assert!(
            lu.write_order_at(&nexus(lu.pr_epoch()), scsi::Lba(0), 1)
                .is_ok()
        );
        // A command in flight (it holds the LU's order) when a change arrives: the change
        // is acknowledged only once it has ended.
        let in_flight = lu.write_order();
        let theirs2 = PrState {
            generation: 2,
            ..theirs.clone()
        };
        assert!(
            store
                .store(Some(1), 2, &encode_state(2, &theirs2))
                .expect("store")
        );
        let (tx, rx) = std::sync::mpsc::channel();
        let lu2 = lu.clone();
        let applier = std::thread::spawn(move || {
            lu2.apply_shared_pr(SharedNotice {
                message: Vec::new(),
                done: Box::new(move || {
                    let _ = tx.send(());
                }),
            });
        });
        assert!(
            rx.recv_timeout(std::time::Duration::from_millis(300))
                .is_err(),
            "acknowledged while a command that passed the old check was in flight"
        );
        drop(in_flight);
        rx.recv_timeout(std::time::Duration::from_secs(5))
            .expect("acknowledged once it ended");
        applier.join().expect("applier");
        // Another appliance moved the state on and this one has not been told yet: a
        // change here reads it back first and is stored on top of it.
        let mut moved = theirs2.clone();
        moved.regs.push(super::super::Registration {
            nexus: n(0xc0, 5),
            key: 0xc,
            all_tg_pt: false,
        });
        assert!(
            store
                .store(Some(2), 3, &encode_state(3, &moved))
                .expect("store")
        );
        let (st, _, (), published) = lu
            .pr_transact(|st| st.generation += 1, |_| true)
            .expect("a change on top of the newer state");
        drop(st);
        assert!(matches!(published, Published(Some(4))), "{published:?}");
        let (v, stored) =
            decode_state(&store.load().expect("load").expect("some")).expect("decode");
        assert_eq!(v, 4);
        assert_eq!(
            stored.regs.len(),
            2,
            "the other appliance's registration kept: {stored:?}"
        );
        assert_eq!(stored.generation, moved.generation + 1);
        // The change's unit attention reached the nexus it names.
        assert_eq!(
            lu.ua.lock().expect("ua").pending(n(0xa0, 1)),
            vec![SenseCode::RESERVATIONS_PREEMPTED]
        );
    }

    #[test]
    fn the_message_round_trips() {
        let uas = vec![
            (To::One(n(0xa0, 1)), SenseCode::REGISTRATIONS_PREEMPTED),
            (To::AllBut(n(0xb0, 3)), SenseCode::RESERVATIONS_RELEASED),
            (To::All, SenseCode::BUS_DEVICE_RESET_FUNCTION_OCCURRED),
            (
                To::Port(RelativePortId(4)),
                SenseCode::REPORTED_LUNS_DATA_HAS_CHANGED,
            ),
        ];
        assert_eq!(decode_message(&encode_message(&uas)).expect("decodes"), uas);
        assert!(decode_message(b"sideways 1 2 3\n").is_err());
    }
}
