//! A bounded pool of backend worker threads, fair between logical units: each LU has its
//! own queue of fixed capacity (a full one refuses the job, and the command is answered
//! BUSY), at most [`Workers::per_lu_limit`] workers run one LU's jobs at a time, and LUs
//! with work take turns (round robin). So a slow or stuck disk holds at most its share of
//! the workers and fills only its own queue: its initiators slow down or see BUSY, while
//! other LUs' commands keep running — and the completion loop never waits for any of them.
//! Dropping the pool stops taking jobs and joins the threads after they finish the jobs
//! already queued. A job whose backend never blocks ([`crate::backend::Backend::never_blocks`]:
//! RAM, a tmpfs file) is no worker's: it runs at once on the submitting thread, its result
//! queued like any other, saving two thread hops per command — unless it is a copy, whose
//! other LU may be a slow disk and whose size is up to a quarter GiB per segment.

use super::executor::{Executor, Job};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

/// Which LU a job is for: the address of its shared `LogicalUnit`.
type LuKey = usize;

fn key(job: &Job) -> LuKey {
    Arc::as_ptr(&job.lu) as usize
}

/// One LU's queued jobs and how many of its jobs are running.
#[derive(Default)]
struct LuQueue {
    jobs: VecDeque<Job>,
    running: usize,
    /// In the round-robin order.
    scheduled: bool,
}

#[derive(Default)]
struct State {
    queues: HashMap<LuKey, LuQueue>,
    /// LUs with a queued job and a free share of workers, in turn order.
    order: VecDeque<LuKey>,
    closed: bool,
}

impl State {
    /// Puts `k` in the turn order if it has work and room to run more.
    fn schedule(&mut self, k: LuKey, limit: usize) -> bool {
        let Some(q) = self.queues.get_mut(&k) else {
            return false;
        };
        if q.scheduled || q.jobs.is_empty() || q.running >= limit {
            return false;
        }
        q.scheduled = true;
        self.order.push_back(k);
        true
    }
}

struct Shared {
    state: Mutex<State>,
    ready: Condvar,
    capacity: usize,
    limit: usize,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The pool. See the module docs.
pub struct Workers {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Workers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workers")
            .field("threads", &self.threads.len())
            .field("capacity", &self.shared.capacity)
            .field("per_lu_limit", &self.shared.limit)
            .finish()
    }
}

impl Workers {
    /// Starts `threads` workers (at least one); each LU queues at most `capacity` jobs and
    /// runs on at most half the workers (at least one).
    pub fn new(threads: usize, capacity: usize) -> std::io::Result<Workers> {
        let threads = threads.max(1);
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            ready: Condvar::new(),
            capacity,
            limit: threads.div_ceil(2),
        });
        let mut handles = Vec::new();
        for i in 0..threads {
            let s = shared.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("srpt-worker{i}"))
                .spawn(move || worker(&s));
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    // Stop the ones already started before reporting.
                    drop(Workers {
                        shared,
                        threads: handles,
                    });
                    return Err(e);
                }
            }
        }
        Ok(Workers {
            shared,
            threads: handles,
        })
    }

    /// How many workers one LU's jobs may occupy at once.
    pub fn per_lu_limit(&self) -> usize {
        self.shared.limit
    }
}

fn worker(s: &Shared) {
    let mut st = s.lock();
    loop {
        let Some(k) = st.order.pop_front() else {
            if st.closed {
                return;
            }
            st = s.ready.wait(st).unwrap_or_else(PoisonError::into_inner);
            continue;
        };
        let Some(q) = st.queues.get_mut(&k) else {
            continue;
        };
        q.scheduled = false;
        let Some(job) = q.jobs.pop_front() else {
            continue;
        };
        q.running += 1;
        // Its next job waits for the next turn, behind the other LUs'.
        if st.schedule(k, s.limit) {
            s.ready.notify_one();
        }
        drop(st);
        job.run();
        st = s.lock();
        let idle = match st.queues.get_mut(&k) {
            Some(q) => {
                q.running -= 1;
                q.running == 0 && q.jobs.is_empty()
            }
            None => false,
        };
        if idle {
            st.queues.remove(&k);
        } else if st.schedule(k, s.limit) {
            s.ready.notify_one();
        }
    }
}

impl Executor for Workers {
    fn submit(&self, job: Job) -> Result<(), Job> {
        // A backend that never blocks runs on the caller's thread (the loop), unless a copy
        // holds a range of the LU: a writer there would have to wait (or answer BUSY).
        if job.lu.backend().never_blocks()
            && !crate::exec::copy::moves_between_lus(&job.cdb)
            && !job.lu.has_holds()
        {
            job.run_inline();
            return Ok(());
        }
        let s = &self.shared;
        let mut st = s.lock();
        if st.closed {
            return Err(job);
        }
        let k = key(&job);
        let q = st.queues.entry(k).or_default();
        if q.jobs.len() >= s.capacity {
            return Err(job);
        }
        q.jobs.push_back(job);
        if st.schedule(k, s.limit) {
            s.ready.notify_one();
        }
        Ok(())
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.ready.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
