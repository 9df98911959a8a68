//! A miniport that blocks at dispatch level is trapped, and nothing hangs: through the
//! port's kernel primitives (`ke`: the verifier notes the call, debug builds panic, the
//! port catches it) and through plain std blocking (the DPC watchdog). Either way the
//! port bugchecks: the submitter gets SRB_STATUS_INTERNAL_ERROR, later submissions are
//! refused. Blocking in HwFindAdapter at passive level is allowed.

use access_layer::verbs::in_dispatch;
use srp_initiator_storport::port::ke::{self, KeEvent};
use srp_initiator_storport::port::{
    AdapterControl, AdapterControlStatus, DataDirection, FindAdapterStatus, LuAddress, Miniport,
    Port, PortConfig, PortConfigurationInfo, PortError, PortServices, Routine, Srb, SrbRequest,
    SrbResult, SrbStatus, Violation,
};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How and where the miniport blocks.
#[derive(Debug)]
enum How {
    KeEventWait,
    KeRecv(Mutex<Receiver<()>>),
    Sleep(Duration),
    StdRecv(Mutex<Receiver<()>>),
    /// Does not block.
    Nothing,
}

#[derive(Debug)]
struct Plan {
    how: How,
    routine: Routine,
    event: KeEvent,
    passive_wait_ok: OnceLock<bool>,
}

/// The device extension.
#[derive(Default)]
struct Blocker {
    plan: OnceLock<Arc<Plan>>,
    /// SRBs StartIo left for the DPC routine or HwTimer to complete.
    held: Mutex<Vec<Srb<()>>>,
    /// Whether the DPC routine and HwTimer ran at dispatch level, on the port's DPC.
    ran_at_dispatch: Mutex<Vec<(Routine, bool, Option<String>)>>,
}

impl Blocker {
    /// The DPC routine or HwTimer: blocks if planned, then completes what StartIo held.
    fn complete_held(&self, port: &PortServices<Self>, routine: Routine) {
        let thread = std::thread::current().name().map(str::to_owned);
        self.ran_at_dispatch
            .lock()
            .expect("lock")
            .push((routine, in_dispatch(), thread));
        self.block(routine);
        for srb in self.held.lock().expect("lock").drain(..) {
            srb.set_status(SrbStatus::SUCCESS);
            port.request_complete(&srb);
        }
    }
}

impl Blocker {
    fn block(&self, routine: Routine) {
        let plan = self.plan.get().expect("found");
        if plan.routine != routine {
            return;
        }
        match &plan.how {
            How::KeEventWait => {
                let _ = plan.event.wait(Duration::from_secs(5));
            }
            How::KeRecv(rx) => {
                let _ = ke::recv_timeout(&rx.lock().expect("lock"), Duration::from_secs(5));
            }
            How::Sleep(d) => std::thread::sleep(*d),
            How::StdRecv(rx) => {
                let _ = rx.lock().expect("lock").recv();
            }
            How::Nothing => {}
        }
    }
}

impl Miniport for Blocker {
    type HwContext = Arc<Plan>;
    type SrbExtension = ();

    fn find_adapter(
        &self,
        _port: &PortServices<Self>,
        context: &Arc<Plan>,
        config: &mut PortConfigurationInfo,
    ) -> FindAdapterStatus {
        // Passive level: a wait is fine here (the 2005 miniport logs in from here).
        let waited = !in_dispatch() && context.event.wait(Duration::from_millis(1)).is_err();
        let _ = context.passive_wait_ok.set(waited);
        let _ = self.plan.set(context.clone());
        config.maximum_transfer_length = 1 << 16;
        config.number_of_physical_breaks = 16;
        FindAdapterStatus::Found
    }

    fn initialize(&self, _port: &PortServices<Self>) -> bool {
        true
    }

    fn build_io(&self, _port: &PortServices<Self>, _srb: &Srb<()>) -> bool {
        self.block(Routine::BuildIo);
        true
    }

    fn start_io(&self, port: &PortServices<Self>, srb: Srb<()>) -> bool {
        self.block(Routine::StartIo);
        match self.plan.get().map(|p| p.routine) {
            // Completed later, as an HBA's interrupt would: from the DPC or the timer.
            Some(Routine::Dpc) => {
                self.held.lock().expect("lock").push(srb);
                port.issue_dpc();
            }
            Some(Routine::Timer) => {
                self.held.lock().expect("lock").push(srb);
                port.request_timer_call(Duration::from_millis(20));
            }
            _ => {
                srb.set_status(SrbStatus::SUCCESS);
                port.request_complete(&srb);
            }
        }
        true
    }

    fn dpc(&self, port: &PortServices<Self>) {
        self.complete_held(port, Routine::Dpc);
    }

    fn timer(&self, port: &PortServices<Self>) {
        self.complete_held(port, Routine::Timer);
    }

    fn reset_bus(&self, _port: &PortServices<Self>, _path_id: u8) -> bool {
        true
    }

    fn adapter_control(
        &self,
        _port: &PortServices<Self>,
        _control: AdapterControl<'_>,
    ) -> AdapterControlStatus {
        AdapterControlStatus::Success
    }
}

fn port_for(how: How, routine: Routine) -> (Port<Blocker>, Arc<Plan>) {
    let plan = Arc::new(Plan {
        how,
        routine,
        event: KeEvent::default(),
        passive_wait_ok: OnceLock::new(),
    });
    let cfg = PortConfig {
        dpc_watchdog: Duration::from_millis(200),
        ..PortConfig::default()
    };
    let port = Port::start(plan.clone(), cfg).expect("starts");
    assert_eq!(
        plan.passive_wait_ok.get(),
        Some(&true),
        "a passive wait is allowed"
    );
    (port, plan)
}

/// Submits a TEST UNIT READY while the adapter is paused (so the submit returns at once),
/// then resumes: the port's DPC thread runs BuildIo and StartIo and is the one that
/// blocks. Returns the result, within 3 s.
fn submit_and_wait(port: &Port<Blocker>) -> (SrbResult, Duration) {
    port.services().pause(60);
    let tur = SrbRequest::scsi(
        LuAddress::new(0, 0, 0),
        &[0; 6],
        DataDirection::None,
        vec![],
    );
    let c = port.submit(tur).expect("queued");
    let t0 = Instant::now();
    port.services().resume();
    let r = c
        .wait_timeout(Duration::from_secs(3))
        .expect("completed, not hung");
    (r, t0.elapsed())
}

/// The trap: the violation, the bugcheck, and the request failed by the port — except
/// that a release build's refused `ke` wait returns to the miniport, which may complete
/// the request before the port sees the note.
fn assert_trapped(port: &Port<Blocker>, r: &SrbResult, want: &Violation) {
    let refused_wait = matches!(want, Violation::BlockingAtDispatch { .. });
    if cfg!(debug_assertions) || !refused_wait {
        assert_eq!(r.status, SrbStatus::INTERNAL_ERROR);
    }
    assert_eq!(
        port.violations().first(),
        Some(want),
        "{:?}",
        port.violations()
    );
    assert!(port.is_bugchecked());
    let tur = SrbRequest::scsi(
        LuAddress::new(0, 0, 0),
        &[0; 6],
        DataDirection::None,
        vec![],
    );
    assert_eq!(port.submit(tur).err(), Some(PortError::BugChecked));
}

#[test]
fn a_ke_wait_in_start_io_is_trapped_at_once() {
    let (port, _plan) = port_for(How::KeEventWait, Routine::StartIo);
    let (r, took) = submit_and_wait(&port);
    // The violation kind (BlockingAtDispatch, not DpcWatchdog) shows the verifier caught
    // it; the time is only bounded, so a loaded machine does not fail the test.
    assert!(took < Duration::from_millis(1500), "{took:?}");
    let want = Violation::BlockingAtDispatch {
        routine: Routine::StartIo,
        call: "KeWaitForSingleObject".into(),
    };
    assert_trapped(&port, &r, &want);
}

#[test]
fn a_ke_receive_in_build_io_is_trapped_at_once() {
    let (_tx, rx) = mpsc::channel();
    let (port, _plan) = port_for(How::KeRecv(Mutex::new(rx)), Routine::BuildIo);
    let (r, took) = submit_and_wait(&port);
    assert!(took < Duration::from_millis(1500), "{took:?}");
    let want = Violation::BlockingAtDispatch {
        routine: Routine::BuildIo,
        call: "KeWaitForSingleObject".into(),
    };
    assert_trapped(&port, &r, &want);
}

#[test]
fn a_plain_sleep_in_start_io_trips_the_dpc_watchdog() {
    let (port, _plan) = port_for(How::Sleep(Duration::from_secs(2)), Routine::StartIo);
    let (r, took) = submit_and_wait(&port);
    assert!(took >= Duration::from_millis(190), "{took:?}");
    assert!(
        took < Duration::from_millis(1500),
        "the watchdog, not the sleep: {took:?}"
    );
    let want = Violation::DpcWatchdog {
        routine: Routine::StartIo,
        limit_ms: 200,
    };
    assert_trapped(&port, &r, &want);
}

#[test]
fn a_channel_receive_in_start_io_trips_the_dpc_watchdog() {
    let (tx, rx) = mpsc::channel::<()>();
    let (port, _plan) = port_for(How::StdRecv(Mutex::new(rx)), Routine::StartIo);
    let (r, took) = submit_and_wait(&port);
    assert!(took < Duration::from_millis(1500), "{took:?}");
    let want = Violation::DpcWatchdog {
        routine: Routine::StartIo,
        limit_ms: 200,
    };
    assert_trapped(&port, &r, &want);
    drop(tx); // lets the stuck StartIo return
}

#[test]
fn the_dpc_routine_and_hw_timer_run_on_the_port_dpc_at_dispatch_level() {
    for routine in [Routine::Dpc, Routine::Timer] {
        let (port, _plan) = port_for(How::Nothing, routine);
        let (r, _) = submit_and_wait(&port);
        assert_eq!(r.status, SrbStatus::SUCCESS, "{routine}");
        assert!(port.violations().is_empty(), "{:?}", port.violations());
        let ran = port
            .miniport()
            .ran_at_dispatch
            .lock()
            .expect("lock")
            .clone();
        assert_eq!(ran.len(), 1, "{routine}: {ran:?}");
        assert_eq!(ran[0].0, routine);
        assert!(ran[0].1, "{routine} at dispatch level");
        assert_eq!(
            ran[0].2.as_deref(),
            Some("storport-dpc"),
            "on the port's DPC"
        );
    }
}

#[test]
fn a_ke_wait_in_the_dpc_routine_is_trapped_at_once() {
    let (port, _plan) = port_for(How::KeEventWait, Routine::Dpc);
    let (r, took) = submit_and_wait(&port);
    assert!(took < Duration::from_millis(1500), "{took:?}");
    let want = Violation::BlockingAtDispatch {
        routine: Routine::Dpc,
        call: "KeWaitForSingleObject".into(),
    };
    assert_trapped(&port, &r, &want);
}

#[test]
fn a_plain_sleep_in_hw_timer_trips_the_dpc_watchdog() {
    let (port, _plan) = port_for(How::Sleep(Duration::from_secs(2)), Routine::Timer);
    let (r, took) = submit_and_wait(&port);
    assert!(
        took < Duration::from_millis(1500),
        "the watchdog, not the sleep: {took:?}"
    );
    let want = Violation::DpcWatchdog {
        routine: Routine::Timer,
        limit_ms: 200,
    };
    assert_trapped(&port, &r, &want);
}
