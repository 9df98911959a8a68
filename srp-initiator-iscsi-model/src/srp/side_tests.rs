//! The side's wake-ups and waits: no wake-up lost, no idle spin, waiters released by
//! progress or at their bound (the no-`std` build sleeps the same way, on kernel events).

use super::*;
use std::sync::Mutex;
use std::time::Instant;
use win_port::SystemMemory;

/// A port that only counts completions.
struct CountingPort(Mutex<usize>);

impl IscsiPortCalls<SrbExt> for CountingPort {
    fn complete_request(&self, _request: &Request<SrbExt>) {
        *self.0.lock().expect("count") += 1;
    }

    fn system_memory(&self) -> Option<Arc<SystemMemory>> {
        None
    }
}

fn side() -> Arc<Side> {
    let port: PortCalls = Arc::new(CountingPort(Mutex::new(0)));
    Arc::new(Side::new(port, SystemMemory::new(4)).expect("std events"))
}

/// Waits until the worker sleeps on its event.
fn asleep(side: &Side) {
    let t0 = Instant::now();
    while !side.lock().sleeping {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the worker never slept"
        );
        std::thread::yield_now();
    }
}

fn clock() -> impl Fn() -> Time {
    let epoch = Instant::now();
    move || Time(epoch.elapsed().as_nanos() as u64)
}

/// A wake-up reaches a sleeping worker: it returns long before its timeout.
#[test]
fn a_wake_up_ends_the_workers_sleep() {
    let side = side();
    let s = side.clone();
    let sleeper = std::thread::spawn(move || {
        let t0 = Instant::now();
        drop(s.wait_for_work(Duration::from_secs(30)));
        t0.elapsed()
    });
    asleep(&side);
    PortSide::wake(&*side);
    let slept = sleeper.join().expect("sleeper");
    assert!(
        slept < Duration::from_secs(10),
        "woken only by the timeout: {slept:?}"
    );
}

/// A wake-up given before the worker sleeps is not lost (kept in `woken`), and once it
/// is consumed the next sleep really sleeps (the event was cleared: no spinning).
#[test]
fn a_consumed_wake_up_leaves_the_next_sleep_asleep() {
    let side = side();
    // The worker sleeps once and is woken (the event is set).
    let s = side.clone();
    let sleeper = std::thread::spawn(move || drop(s.wait_for_work(Duration::from_secs(30))));
    asleep(&side);
    PortSide::wake(&*side);
    sleeper.join().expect("sleeper");
    // A wake-up before the sleep: returns at once.
    PortSide::wake(&*side);
    let t0 = Instant::now();
    drop(side.wait_for_work(Duration::from_secs(30)));
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "a wake-up given before the sleep was lost"
    );
    // Nothing to do now: the worker sleeps its timeout.
    let t0 = Instant::now();
    drop(side.wait_for_work(Duration::from_millis(200)));
    assert!(
        t0.elapsed() >= Duration::from_millis(150),
        "an idle worker did not sleep: {:?}",
        t0.elapsed()
    );
}

/// A passive-level waiter looks again when the worker makes progress, and gives up at
/// its bound when nothing moves.
#[test]
fn wait_for_ends_on_progress_or_at_its_bound() {
    let side = side();
    let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (s, f) = (side.clone(), flag.clone());
    let waiter = std::thread::spawn(move || {
        let t0 = Instant::now();
        let done = s.wait_for(Duration::from_secs(30), clock(), || {
            f.load(std::sync::atomic::Ordering::SeqCst)
        });
        (done, t0.elapsed())
    });
    std::thread::sleep(Duration::from_millis(50));
    flag.store(true, std::sync::atomic::Ordering::SeqCst);
    side.progress(&mut side.lock());
    let (done, took) = waiter.join().expect("waiter");
    assert!(
        done && took < Duration::from_secs(10),
        "{done} after {took:?}"
    );
    assert!(
        side.lock().watchers.is_empty(),
        "the progress released its waiter"
    );

    let t0 = Instant::now();
    assert!(!side.wait_for(Duration::from_millis(100), clock(), || false));
    assert!(t0.elapsed() >= Duration::from_millis(90), "gave up early");
    assert!(
        side.lock().watchers.is_empty(),
        "a timed-out waiter left its event"
    );
}
