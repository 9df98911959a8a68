//! The port in manual mode on a virtual clock, as the whole-stack simulator drives it: no
//! thread, nothing happens without `run_due`, HwTimer and request timeouts fire in virtual
//! time exactly when due, and the same calls at the same clock values give the same
//! miniport calls.

mod common;

use common::*;
use ib_verbs::time::Clock;
use srp_initiator_storport::port::{
    AdapterControl, AdapterControlStatus, FindAdapterStatus, Miniport, Port, PortConfig,
    PortConfigurationInfo, PortError, PortEvent, PortMode, PortServices, ResetCause, Srb,
    SrbStatus,
};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A virtual clock: `base` plus an offset the test advances.
#[derive(Debug)]
struct VClock {
    base: Instant,
    nanos: AtomicU64,
}

impl VClock {
    fn new() -> Arc<VClock> {
        Arc::new(VClock {
            base: Instant::now(),
            nanos: AtomicU64::new(0),
        })
    }

    fn advance(&self, d: Duration) {
        self.nanos.fetch_add(d.as_nanos() as u64, SeqCst);
    }

    fn set(&self, t: Instant) {
        self.nanos.store((t - self.base).as_nanos() as u64, SeqCst);
    }
}

impl Clock for VClock {
    fn now(&self) -> Instant {
        self.base + Duration::from_nanos(self.nanos.load(SeqCst))
    }
}

fn manual(clock: &Arc<VClock>) -> PortConfig {
    PortConfig {
        clock: clock.clone(),
        mode: PortMode::Manual,
        ..PortConfig::default()
    }
}

/// No thread of the port runs in this process.
fn no_port_threads() {
    for task in std::fs::read_dir("/proc/self/task").expect("procfs") {
        let comm =
            std::fs::read_to_string(task.expect("task").path().join("comm")).unwrap_or_default();
        assert!(!comm.starts_with("storport-"), "a port thread: {comm}");
    }
}

/// A miniport that logs every call, holds what it starts, completes it all from its DPC
/// routine and with BUS_RESET from HwResetBus, and asks for its timer at initialization.
#[derive(Default)]
struct Logger {
    probe: OnceLock<Arc<LogProbe>>,
}

#[derive(Default)]
struct LogProbe {
    /// HwTimer's first delay.
    timer_after: Duration,
    clock: OnceLock<Arc<VClock>>,
    log: Mutex<Vec<String>>,
    held: Mutex<Vec<Srb<()>>>,
    timer_fired_at: Mutex<Vec<Instant>>,
}

impl Logger {
    fn p(&self) -> &Arc<LogProbe> {
        self.probe.get().expect("found")
    }

    fn log(&self, what: String) {
        self.p().log.lock().expect("lock").push(what);
    }

    fn complete_held(&self, port: &PortServices<Self>, status: SrbStatus) {
        let held: Vec<_> = self.p().held.lock().expect("lock").drain(..).collect();
        for srb in held {
            srb.set_status(status);
            port.request_complete(&srb);
        }
    }
}

impl Miniport for Logger {
    type HwContext = Arc<LogProbe>;
    type SrbExtension = ();

    fn find_adapter(
        &self,
        _port: &PortServices<Self>,
        context: &Arc<LogProbe>,
        config: &mut PortConfigurationInfo,
    ) -> FindAdapterStatus {
        let _ = self.probe.set(context.clone());
        config.maximum_transfer_length = 1 << 20;
        config.number_of_physical_breaks = 16;
        config.maximum_number_of_logical_units = 4;
        FindAdapterStatus::Found
    }

    fn initialize(&self, port: &PortServices<Self>) -> bool {
        port.request_timer_call(self.p().timer_after);
        true
    }

    fn build_io(&self, _port: &PortServices<Self>, srb: &Srb<()>) -> bool {
        self.log(format!("build {}", srb.id().0));
        true
    }

    fn start_io(&self, port: &PortServices<Self>, srb: Srb<()>) -> bool {
        self.log(format!("start {}", srb.id().0));
        // A stall never spins on a clock that does not advance.
        port.stall_execution(Duration::from_secs(3600));
        self.p().held.lock().expect("lock").push(srb);
        true
    }

    fn reset_bus(&self, port: &PortServices<Self>, path_id: u8) -> bool {
        self.log(format!("reset {path_id}"));
        self.complete_held(port, SrbStatus::BUS_RESET);
        true
    }

    fn adapter_control(
        &self,
        _port: &PortServices<Self>,
        _control: AdapterControl<'_>,
    ) -> AdapterControlStatus {
        AdapterControlStatus::Success
    }

    fn dpc(&self, port: &PortServices<Self>) {
        self.log("dpc".into());
        self.complete_held(port, SrbStatus::SUCCESS);
    }

    fn timer(&self, _port: &PortServices<Self>) {
        self.log("timer".into());
        let now = self.p().clock.get().expect("clock").now();
        self.p().timer_fired_at.lock().expect("lock").push(now);
    }
}

fn logger(clock: &Arc<VClock>, timer_after: Duration) -> (Port<Logger>, Arc<LogProbe>) {
    let probe = Arc::new(LogProbe {
        timer_after,
        ..LogProbe::default()
    });
    let _ = probe.clock.set(clock.clone());
    let port = Port::<Logger>::start(probe.clone(), manual(clock)).expect("starts");
    (port, probe)
}

#[test]
fn a_request_completes_only_when_the_owner_runs_the_port() {
    let clock = VClock::new();
    let (port, probe) = start_with(
        RamConfig {
            luns: 1,
            blocks: 16,
            ..RamConfig::default()
        },
        manual(&clock),
    );
    assert_eq!(port.next_due(), None, "an idle port has nothing to do");
    let c = port.submit(tur(lu(0))).expect("accepted");
    assert_eq!(probe.starts(), 1, "submit starts it inline");
    std::thread::sleep(Duration::from_millis(20));
    assert!(!c.is_complete(), "no thread hands the completion back");
    assert_eq!(
        port.next_due(),
        Some(clock.now()),
        "the completion is due now"
    );
    assert!(port.run_due() > 0);
    let r = c.try_take().expect("completed").expect("ok");
    assert_eq!(r.status, SrbStatus::SUCCESS);
    assert_eq!(port.run_due(), 0, "nothing more");
    assert_eq!(port.next_due(), None);
    no_port_threads();
}

#[test]
fn hw_timer_fires_exactly_when_the_virtual_clock_passes_it() {
    let clock = VClock::new();
    let t0 = clock.now();
    let after = Duration::from_millis(750);
    let (port, probe) = logger(&clock, after);
    assert_eq!(port.next_due(), Some(t0 + after), "next_due is the timer");
    clock.advance(after - Duration::from_nanos(1));
    assert_eq!(port.run_due(), 0, "not before");
    assert!(probe.timer_fired_at.lock().expect("lock").is_empty());
    clock.set(t0 + after);
    assert_eq!(port.run_due(), 1, "HwTimer ran");
    assert_eq!(
        *probe.timer_fired_at.lock().expect("lock"),
        vec![t0 + after]
    );
    assert_eq!(port.next_due(), None, "a one-shot timer");
    // An IssueDpc from outside (a CQ notification) is due at once.
    assert!(probe.timer_fired_at.lock().expect("lock").len() == 1);
    let services = port.services();
    assert!(services.issue_dpc());
    assert_eq!(port.next_due(), Some(clock.now()));
    assert_eq!(port.run_due(), 1);
    assert_eq!(
        *probe.log.lock().expect("lock"),
        vec!["timer".to_string(), "dpc".to_string()]
    );
    no_port_threads();
}

#[test]
fn a_request_never_completed_times_out_in_virtual_time_and_resets_inline() {
    let real = Instant::now();
    let clock = VClock::new();
    let t0 = clock.now();
    let (port, probe) = logger(&clock, Duration::ZERO);
    let timeout = Duration::from_secs(30);
    let c = port
        .submit(tur(lu(0)).with_timeout(timeout))
        .expect("accepted");
    assert_eq!(
        probe.held.lock().expect("lock").len(),
        1,
        "the miniport holds it"
    );
    // While it is held the port ticks every `tick`, as its timer thread would.
    let tick = PortConfig::default().tick;
    assert_eq!(port.next_due(), Some(t0 + tick));
    let mut ticks = 0;
    while !c.is_complete() {
        let next = port.next_due().expect("a tick is due while it is held");
        assert!(next > clock.now(), "nothing due now after run_due");
        clock.set(next);
        port.run_due();
        ticks += 1;
        assert!(ticks < 10_000, "it times out");
    }
    let elapsed = clock.now() - t0;
    assert!(
        elapsed > timeout && elapsed <= timeout + 2 * tick,
        "timed out after {elapsed:?} of virtual time"
    );
    let r = c.try_take().expect("completed").expect("ok");
    assert_eq!(r.status, SrbStatus::BUS_RESET);
    let ev = port.take_events();
    assert!(
        ev.contains(&PortEvent::RequestTimedOut {
            id: r.id,
            lu: lu(0)
        }),
        "{ev:?}"
    );
    assert!(
        ev.contains(&PortEvent::BusReset {
            path: 0,
            cause: ResetCause::Timeout,
            success: true
        }),
        "{ev:?}"
    );
    assert!(port.violations().is_empty());
    assert_eq!(port.next_due(), None, "quiet again");
    assert!(
        real.elapsed() < Duration::from_secs(5),
        "virtual, not real, time"
    );
    no_port_threads();
}

#[test]
fn stop_adapter_does_not_wait_in_manual_mode() {
    let clock = VClock::new();
    let (port, probe) = logger(&clock, Duration::ZERO);
    let c = port.submit(tur(lu(0))).expect("accepted");
    let real = Instant::now();
    assert_eq!(
        port.stop_adapter(Duration::from_secs(60)),
        Err(PortError::DrainTimeout { outstanding: 1 })
    );
    assert!(real.elapsed() < Duration::from_secs(5));
    assert!(
        port.services().issue_dpc(),
        "the DPC completes what it holds"
    );
    port.run_due();
    assert!(c.is_complete());
    assert_eq!(port.stop_adapter(Duration::from_secs(60)), Ok(()));
    assert!(probe.held.lock().expect("lock").is_empty());
}

/// One scripted run: submits, a DPC, a timeout; the miniport's calls in order.
fn script() -> Vec<String> {
    let clock = VClock::new();
    let (port, probe) = logger(&clock, Duration::from_millis(5));
    let mut completions = Vec::new();
    for i in 0..8u8 {
        let lun = i % 3;
        let req = tur(lu(lun)).with_timeout(Duration::from_secs(1 + u64::from(i % 2)));
        completions.push(port.submit(req).expect("accepted"));
        if i == 3 {
            port.services().issue_dpc();
        }
        clock.advance(Duration::from_millis(3));
        port.run_due();
    }
    while let Some(t) = port.next_due() {
        clock.set(t);
        port.run_due();
    }
    assert!(completions.iter().all(|c| c.is_complete()));
    let log = probe.log.lock().expect("lock").clone();
    // SRB ids are process-wide (tests run at once): name each by its first appearance.
    let mut ids: Vec<String> = Vec::new();
    log.into_iter()
        .map(|l| match l.split_once(' ') {
            Some((what, id)) if what != "reset" => {
                let n = ids.iter().position(|x| x == id).unwrap_or_else(|| {
                    ids.push(id.to_string());
                    ids.len() - 1
                });
                format!("{what} #{n}")
            }
            _ => l,
        })
        .collect()
}

#[test]
fn the_same_calls_at_the_same_times_give_the_same_miniport_calls() {
    let a = script();
    assert!(a.iter().any(|l| l == "timer") && a.iter().any(|l| l.starts_with("reset")));
    assert_eq!(a, script());
}
