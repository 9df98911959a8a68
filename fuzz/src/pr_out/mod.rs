//! `pr_out`: persistent reservations through [`srp_target::LogicalUnit::execute`], by a
//! script of PERSISTENT RESERVE OUT commands (every service action, TYPE and SCOPE,
//! parameter lists with keys that collide, every flag, wrong lengths, short data-out) and
//! PERSISTENT RESERVE IN, READ, WRITE, TEST UNIT READY and REQUEST SENSE from six I_T
//! nexuses (three initiators, two target ports).
//!
//! After every PERSISTENT RESERVE OUT an observer nexus reads the state back
//! ([`view::View`]: READ KEYS, READ RESERVATION and READ FULL STATUS, which must agree), and:
//! a refused command changed nothing; PRGENERATION moved by exactly one for a REGISTER,
//! REGISTER AND IGNORE EXISTING KEY, CLEAR, PREEMPT or PREEMPT AND ABORT that completed,
//! and not at all otherwise; each service action that completed did what SPC-4 says
//! (REGISTER holds the new key, RESERVE holds the reservation, CLEAR leaves nothing,
//! PREEMPT removes the preempted key and keeps the sender, PREEMPT AND ABORT names only
//! nexuses it unregistered). READ and WRITE from any nexus conflict exactly as the
//! reported state says they must (SPC-4 Table 53). Every outcome passes
//! [`crate::scsi_lu::exec`]'s checks (valid sense with every CHECK CONDITION).

mod view;

use crate::input::Input;
use crate::scsi_lu::{self, Outcome, exec, rw10};
use scsi::{SenseKey, Status};
use srp::wire::PortId;
use srp_target::io::NexusInfo;
use srp_target::{LogicalUnit, PortIdentity, TargetPortGroup};
use view::View;

/// Steps per input.
const MAX_STEPS: usize = 64;
/// Keys that collide across nexuses (0 is "none").
const KEYS: [u64; 4] = [
    0,
    0xaaaa_0000_0000_0001,
    0xbbbb_0000_0000_0002,
    0xcccc_0000_0000_0003,
];

const REGISTER: u8 = 0;
const RESERVE: u8 = 1;
const RELEASE: u8 = 2;
const CLEAR: u8 = 3;
const PREEMPT: u8 = 4;
const PREEMPT_AND_ABORT: u8 = 5;
const REGISTER_IGNORE: u8 = 6;

/// One input.
pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let mut h = Harness {
        lu: scsi_lu::ram_lu(false),
        nexuses: scsi_lu::nexuses(),
        observer: NexusInfo {
            initiator: PortId([0xd0; 16]),
            luns: vec![scsi::Lun::ZERO],
            port: PortIdentity::for_ioc(0).expect("port"),
            groups: TargetPortGroup::one_per_ioc(2),
        },
        view: None,
    };
    h.view = Some(h.observe());
    let mut steps = 0;
    while !input.is_empty() && steps < MAX_STEPS {
        let n = input.below(h.nexuses.len());
        match input.below(8) {
            0..=3 => h.pr_out(&mut input, n),
            4 => h.pr_in(&mut input, n),
            5 => h.io(n),
            6 => {
                // Anything at all as a PERSISTENT RESERVE OUT CDB and parameter list.
                let mut cdb = input.bytes(10).to_vec();
                cdb.resize(10, 0);
                cdb[0] = 0x5f;
                let len = input.below(40);
                let dout = input.bytes(len).to_vec();
                h.after_pr_out(n, &cdb, &dout);
            }
            _ => {
                let cdb: &[u8] = if input.bool() {
                    &[0x00, 0, 0, 0, 0, 0]
                } else {
                    &[0x03, 0, 0, 0, 252, 0]
                };
                exec(&h.lu, &h.nexuses[n], cdb, &[]);
            }
        }
        steps += 1;
    }
}

struct Harness {
    lu: LogicalUnit,
    nexuses: Vec<NexusInfo>,
    observer: NexusInfo,
    /// The state as last observed.
    view: Option<View>,
}

/// Runs a command again while it is answered with a unit attention (which the attempt
/// reported and cleared; the command was not executed).
fn past_attentions(lu: &LogicalUnit, n: &NexusInfo, cdb: &[u8], dout: &[u8]) -> Outcome {
    for _ in 0..=srp_target::exec::ua::MAX_PENDING {
        let o = exec(lu, n, cdb, dout);
        if o.sense().map(|s| s.code().key) != Some(SenseKey::UnitAttention) {
            return o;
        }
    }
    panic!("more unit attentions than a nexus keeps");
}

fn pr_in_cdb(sa: u8, alloc: u16) -> [u8; 10] {
    let a = alloc.to_be_bytes();
    [0x5e, sa, 0, 0, 0, 0, 0, a[0], a[1], 0]
}

impl Harness {
    fn view(&self) -> &View {
        self.view.as_ref().expect("observed at start")
    }

    /// PERSISTENT RESERVE IN service action `sa` from the observer, whole.
    fn report(&self, sa: u8) -> Vec<u8> {
        let o = past_attentions(&self.lu, &self.observer, &pr_in_cdb(sa, 0xffff), &[]);
        assert!(o.good(), "PR IN {sa}: {:?}", o.result);
        o.data_in
    }

    fn observe(&self) -> View {
        View::parse(&self.report(0), &self.report(1), &self.report(3))
    }

    /// A structured PERSISTENT RESERVE OUT from nexus `n`.
    fn pr_out(&mut self, input: &mut Input<'_>, n: usize) {
        let sa = match input.below(16) {
            15 => input.u8() & 0x1f,
            x => [0, 1, 2, 3, 4, 5, 6, 0, 1, 4, 6, 2, 3, 5, 7][x],
        };
        let scope_type = match input.below(8) {
            7 => input.u8(),
            x => [1, 3, 5, 6, 7, 8, 1][x],
        };
        let me = &self.nexuses[n];
        let mine = self
            .view()
            .registration(me.initiator, me.port.relative_port.0)
            .map(|r| r.key);
        let key = match input.below(4) {
            0 | 1 => mine.unwrap_or(0),
            _ => input.pick(&KEYS),
        };
        let sa_key = match input.below(8) {
            7 => input.u64(),
            _ => input.pick(&KEYS),
        };
        let flags = match input.below(8) {
            0 => 0x04, // ALL_TG_PT
            1 => 0x01, // APTPL
            2 => 0x08, // SPEC_I_PT
            3 => input.u8(),
            _ => 0,
        };
        let mut list = Vec::with_capacity(24);
        list.extend(key.to_be_bytes());
        list.extend(sa_key.to_be_bytes());
        list.extend([0, 0, 0, 0, flags, 0, 0, 0]);
        let param_len: u32 = match input.below(16) {
            0 => input.u32() % 48,
            _ => 24,
        };
        match input.below(16) {
            0 => list.truncate(input.below(24)),
            1 => list.extend(input.bytes(8)),
            _ => {}
        }
        let l = param_len.to_be_bytes();
        let cdb = [0x5f, sa, scope_type, 0, 0, l[0], l[1], l[2], l[3], 0];
        self.after_pr_out(n, &cdb, &list);
    }

    /// Runs a PERSISTENT RESERVE OUT from nexus `n` and checks what it did.
    fn after_pr_out(&mut self, n: usize, cdb: &[u8], dout: &[u8]) {
        let me = &self.nexuses[n];
        let before = self.view().clone();
        let o = exec(&self.lu, me, cdb, dout);
        let after = self.observe();
        let out = match &o.result {
            Ok(out) if out.status == Status::Good => out,
            _ => {
                assert_eq!(
                    after, before,
                    "a refused PR OUT ({cdb:02x?}) changed the state"
                );
                self.view = Some(after);
                return;
            }
        };
        let sa = cdb[1] & 0x1f;
        let ty = cdb[2] & 0x0f;
        let key_at = |at: usize| u64::from_be_bytes(dout[at..at + 8].try_into().expect("8"));
        let sa_key = key_at(8);
        let (init, port) = (me.initiator, me.port.relative_port.0);
        let mine = after.registration(init, port);
        let moves = [REGISTER, REGISTER_IGNORE, CLEAR, PREEMPT, PREEMPT_AND_ABORT].contains(&sa);
        let bump = u32::from(moves);
        assert_eq!(
            after.generation,
            before.generation.wrapping_add(bump),
            "PRGENERATION after service action {sa}"
        );
        if sa != PREEMPT_AND_ABORT {
            assert!(
                out.abort_nexuses.is_empty(),
                "aborts from service action {sa}"
            );
        }
        match sa {
            REGISTER | REGISTER_IGNORE => match sa_key {
                0 => assert!(mine.is_none(), "still registered after unregistering"),
                k => assert_eq!(mine.map(|r| r.key), Some(k), "the new key"),
            },
            RESERVE => {
                assert_eq!(
                    after.reservation.map(|r| r.1),
                    Some(ty),
                    "the type reserved"
                );
                assert!(mine.is_some_and(|r| r.holder), "the sender holds it");
                assert_eq!(
                    after.full,
                    before
                        .full
                        .iter()
                        .map(|r| holder_as(r, &after))
                        .collect::<Vec<_>>()
                );
            }
            RELEASE => {
                let held = before.registration(init, port).is_some_and(|r| r.holder);
                if held {
                    assert_eq!(after.reservation, None, "released by its holder");
                } else {
                    assert_eq!(after, before, "a RELEASE by a non-holder changes nothing");
                }
            }
            CLEAR => {
                assert!(
                    after.full.is_empty() && after.reservation.is_none(),
                    "CLEAR"
                );
            }
            PREEMPT | PREEMPT_AND_ABORT => {
                assert!(mine.is_some(), "the preempting nexus stays registered");
                if sa_key != 0 {
                    assert!(
                        after
                            .full
                            .iter()
                            .all(|r| r.key != sa_key || (r.initiator, r.port) == (init, port)),
                        "a preempted key survived"
                    );
                }
                for gone in &out.abort_nexuses {
                    assert!(
                        after.registration(gone.initiator, gone.port.0).is_none(),
                        "an aborted nexus is still registered"
                    );
                    assert!(
                        before.registration(gone.initiator, gone.port.0).is_some(),
                        "an aborted nexus was not registered"
                    );
                }
            }
            other => panic!("service action {other} completed"),
        }
        self.view = Some(after);
    }

    /// PERSISTENT RESERVE IN with any service action and allocation length: the data is
    /// the whole report cut to the allocation length.
    fn pr_in(&mut self, input: &mut Input<'_>, n: usize) {
        let sa = match input.below(8) {
            7 => input.u8(),
            x => (x % 4) as u8,
        };
        let alloc = match input.below(4) {
            0 => input.u16(),
            _ => u16::from(input.u8()),
        };
        let o = exec(&self.lu, &self.nexuses[n], &pr_in_cdb(sa, alloc), &[]);
        if !o.good() {
            return;
        }
        assert!(o.data_in.len() <= usize::from(alloc));
        let whole = self.report(sa & 0x1f);
        assert_eq!(
            o.data_in,
            whole[..whole.len().min(usize::from(alloc))],
            "PR IN {sa} cut to {alloc}"
        );
    }

    /// READ and WRITE from nexus `n` pass or conflict as the reported state says.
    fn io(&mut self, n: usize) {
        let me = &self.nexuses[n];
        let (read, write) = self.view().access(me.initiator, me.port.relative_port.0);
        let status = |ok: bool| {
            if ok {
                Status::Good
            } else {
                Status::ReservationConflict
            }
        };
        let o = past_attentions(&self.lu, me, &rw10(0x28, 0, 1), &[]);
        assert_eq!(
            o.status(),
            Some(status(read)),
            "READ from nexus {n}: {:?}",
            self.view
        );
        let o = past_attentions(&self.lu, me, &rw10(0x2a, 0, 1), &[0x5a; scsi_lu::BLOCK]);
        assert_eq!(
            o.status(),
            Some(status(write)),
            "WRITE from nexus {n}: {:?}",
            self.view
        );
    }
}

/// `r` as it stands in `after` but for its holder flag and type: RESERVE changes nothing
/// but who holds what.
fn holder_as(r: &view::Registrant, after: &View) -> view::Registrant {
    let now = after
        .registration(r.initiator, r.port)
        .expect("RESERVE unregisters nobody");
    view::Registrant {
        holder: now.holder,
        scope_type: now.scope_type,
        ..r.clone()
    }
}
