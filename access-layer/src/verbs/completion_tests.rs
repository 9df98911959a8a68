use super::*;
use crate::verbs::dispatch::{DispatchGuard, in_dispatch};
use alloc::task::Wake;
use core::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Barrier;
use std::sync::Mutex;
use std::sync::mpsc;

/// A minimal executor: polls on this thread, parks between wake-ups.
fn block_on<F: Future + Unpin>(mut f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(v) = Pin::new(&mut f).poll(&mut cx) {
            return v;
        }
        std::thread::park_timeout(Duration::from_millis(50));
    }
}

#[test]
fn value_is_delivered_exactly_once() {
    let (done, c) = Completion::<u32>::pair();
    let other = c.clone();
    assert!(!c.is_complete());
    assert!(c.try_take().is_none());
    done.complete(Ok(7));
    assert!(other.is_complete());
    assert_eq!(other.try_take(), Some(Ok(7)));
    assert_eq!(c.try_take(), Some(Err(VerbsError::AlreadyClaimed)));
    assert_eq!(c.wait(), Err(VerbsError::AlreadyClaimed));
    let (tx, rx) = mpsc::channel();
    c.on_complete(move |r| tx.send(r).expect("send"));
    assert_eq!(rx.try_recv(), Ok(Err(VerbsError::AlreadyClaimed)));
}

#[test]
fn routine_runs_at_dispatch_now_or_later() {
    let (tx, rx) = mpsc::channel();
    // Registered before completion: runs in the completing thread.
    let (done, c) = Completion::pair();
    let tx2 = tx.clone();
    c.on_complete(move |r| tx2.send((r, in_dispatch())).expect("send"));
    assert!(rx.try_recv().is_err());
    std::thread::spawn(move || done.complete(Ok(1)))
        .join()
        .expect("thread");
    assert_eq!(rx.try_recv(), Ok((Ok(1), true)));
    assert!(!in_dispatch(), "the marker was the completing thread's");
    // Registered after completion: runs right away, still at dispatch.
    let c = Completion::ready(Ok(2));
    c.on_complete(move |r| tx.send((r, in_dispatch())).expect("send"));
    assert_eq!(rx.try_recv(), Ok((Ok(2), true)));
    assert!(!in_dispatch());
    assert_eq!(c.try_take(), Some(Err(VerbsError::AlreadyClaimed)));
}

#[test]
fn a_second_routine_is_refused_and_the_first_keeps_the_result() {
    let (done, c) = Completion::pair();
    let (tx, rx) = mpsc::channel();
    let tx2 = tx.clone();
    c.on_complete(move |r| tx.send(("first", r)).expect("send"));
    c.on_complete(move |r| tx2.send(("second", r)).expect("send"));
    assert_eq!(
        rx.try_recv(),
        Ok(("second", Err(VerbsError::AlreadyClaimed)))
    );
    done.complete(Ok(3u8));
    assert_eq!(rx.try_recv(), Ok(("first", Ok(3))));
    assert!(rx.try_recv().is_err());
}

#[test]
fn racing_completion_and_registration_never_loses_or_duplicates() {
    for i in 0..2000u64 {
        let (done, c) = Completion::pair();
        let calls = Arc::new(AtomicUsize::new(0));
        let got = Arc::new(Mutex::new(None));
        let start = Arc::new(Barrier::new(2));
        let completer = {
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                done.complete(Ok(i));
            })
        };
        let (calls2, got2) = (calls.clone(), got.clone());
        start.wait();
        c.on_complete(move |r| {
            calls2.fetch_add(1, Ordering::SeqCst);
            *got2.lock().expect("lock") = Some(r);
        });
        completer.join().expect("completer");
        assert_eq!(calls.load(Ordering::SeqCst), 1, "iteration {i}");
        assert_eq!(*got.lock().expect("lock"), Some(Ok(i)), "iteration {i}");
        assert_eq!(c.try_take(), Some(Err(VerbsError::AlreadyClaimed)));
    }
}

#[test]
fn racing_routine_and_taker_deliver_to_exactly_one() {
    for i in 0..2000u64 {
        let (done, c) = Completion::pair();
        let start = Arc::new(Barrier::new(3));
        let routine_got = Arc::new(Mutex::new(None));
        let completer = {
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                done.complete(Ok(i));
            })
        };
        let registrar = {
            let (start, c, got) = (start.clone(), c.clone(), routine_got.clone());
            std::thread::spawn(move || {
                start.wait();
                c.on_complete(move |r| *got.lock().expect("lock") = Some(r));
            })
        };
        start.wait();
        let taken = c.wait_timeout(Duration::from_secs(10));
        completer.join().expect("completer");
        registrar.join().expect("registrar");
        let routine = routine_got.lock().expect("lock").take();
        let oks = [Some(&taken), routine.as_ref()]
            .into_iter()
            .flatten()
            .filter(|r| **r == Ok(i))
            .count();
        assert_eq!(
            oks, 1,
            "iteration {i}: taker {taken:?}, routine {routine:?}"
        );
        assert!(routine.is_some(), "iteration {i}: the routine ran");
    }
}

#[test]
fn wait_blocks_until_completed_from_another_thread() {
    let (done, c) = Completion::pair();
    let t = std::thread::spawn(move || done.complete(Ok("x")));
    assert_eq!(c.wait(), Ok("x"));
    t.join().expect("thread");
}

#[test]
fn wait_timeout_times_out_and_keeps_the_result_for_later() {
    let (done, c) = Completion::<u8>::pair();
    assert_eq!(
        c.wait_timeout(Duration::from_millis(10)),
        Err(VerbsError::TimedOut)
    );
    done.complete(Ok(4));
    assert_eq!(c.wait_timeout(Duration::from_millis(10)), Ok(4));
}

#[test]
fn dropped_completer_abandons() {
    let (done, c) = Completion::<u8>::pair();
    drop(done);
    assert_eq!(c.wait(), Err(VerbsError::Abandoned));
}

#[test]
fn future_resolves_across_threads() {
    let (done, c) = Completion::pair();
    let t = std::thread::spawn(move || {
        std::thread::yield_now();
        done.complete(Ok(5u16));
    });
    assert_eq!(block_on(c.clone()), Ok(5));
    assert_eq!(block_on(c), Err(VerbsError::AlreadyClaimed));
    t.join().expect("thread");
}

#[test]
fn blocking_wait_at_dispatch_is_trapped_and_leaves_the_result() {
    let (done, c) = Completion::<u8>::pair();
    {
        let _g = DispatchGuard::enter();
        if cfg!(debug_assertions) {
            let r = std::panic::catch_unwind(|| c.wait());
            assert!(r.is_err(), "trapped");
        } else {
            assert_eq!(
                c.wait(),
                Err(VerbsError::BlockingAtDispatch {
                    call: "Completion::wait"
                })
            );
        }
        assert!(!c.is_complete());
    }
    done.complete(Ok(9));
    assert_eq!(c.wait(), Ok(9), "passive level may wait");
}

#[test]
fn a_pool_reuses_an_object_only_once_every_handle_is_gone() {
    let pool = CompletionPool::<u32>::new();
    let (done, c) = pool.pair();
    let first = Arc::clone(&c.inner);
    done.complete(Ok(1));
    // The consumer still holds it: a new pair gets a fresh object.
    let (done2, c2) = pool.pair();
    assert!(!Arc::ptr_eq(&first, &c2.inner));
    let addrs = [Arc::as_ptr(&first), Arc::as_ptr(&c2.inner)];
    assert_eq!(c.wait(), Ok(1));
    drop((c, first));
    done2.complete(Ok(2));
    assert_eq!(c2.try_take(), Some(Ok(2)));
    drop(c2);
    // Both are free now: the next pairs reuse them, pending again and unclaimed.
    let (done3, c3) = pool.pair();
    assert!(addrs.contains(&Arc::as_ptr(&c3.inner)), "reused");
    assert!(!c3.is_complete());
    let (hit, routine_result) = (Arc::new(Mutex::new(None)), 3);
    let seen = hit.clone();
    c3.on_complete(move |r| *seen.lock().expect("lock") = Some(r));
    done3.complete(Ok(routine_result));
    assert_eq!(*hit.lock().expect("lock"), Some(Ok(3)));
    assert_eq!(pool.retired.lock().len(), 2);
}

/// A KEVENT as a driver's glue would make one, over a condition variable: set once,
/// counted, waited on with a timeout.
#[derive(Default)]
struct TestEvent {
    set: Mutex<u32>,
    cv: std::sync::Condvar,
}

impl crate::verbs::KernelEvent for TestEvent {
    fn set(&self) {
        *self.set.lock().expect("event lock") += 1;
        self.cv.notify_all();
    }

    fn clear(&self) {
        *self.set.lock().expect("event lock") = 0;
    }

    fn wait(&self, timeout: Option<Duration>) -> bool {
        let g = self.set.lock().expect("event lock");
        let limit = timeout.unwrap_or(Duration::from_secs(3600));
        let (g, _) = self
            .cv
            .wait_timeout_while(g, limit, |n| *n == 0)
            .expect("event lock");
        *g > 0
    }
}

/// The no-`std` build's blocking wait (a kernel event the completion's waker sets): the
/// result completed on another thread reaches the waiter, which slept on the event (the
/// event was set exactly once, by the completion).
#[test]
fn kernel_event_wait_gets_a_result_completed_elsewhere() {
    let (done, c) = Completion::<u32>::pair();
    let ev = Arc::new(TestEvent::default());
    let event: Arc<dyn crate::verbs::KernelEvent> = ev.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(30));
        done.complete(Ok(9));
    });
    assert_eq!(
        c.wait_on_event(&event, Some(Duration::from_secs(10))),
        Ok(9)
    );
    t.join().expect("completer");
    assert_eq!(
        *ev.set.lock().expect("event lock"),
        1,
        "set once, by the completion"
    );
    assert_eq!(c.try_take(), Some(Err(VerbsError::AlreadyClaimed)));
}

/// The kernel wait's timeout: an operation still pending after it is `TimedOut`, and its
/// result can still be taken once it completes.
#[test]
fn kernel_event_wait_times_out_and_leaves_the_result() {
    let (done, c) = Completion::<u32>::pair();
    let event: Arc<dyn crate::verbs::KernelEvent> = Arc::new(TestEvent::default());
    assert_eq!(
        c.wait_on_event(&event, Some(Duration::from_millis(20))),
        Err(VerbsError::TimedOut)
    );
    done.complete(Ok(4));
    assert_eq!(c.try_take(), Some(Ok(4)));
}
