//! A bounded pool of backend worker threads: jobs wait in a queue of fixed capacity, a full
//! queue refuses the job (the command is answered BUSY), so a slow disk slows its
//! initiators and never the completion loop. Dropping the pool closes the queue and joins
//! the threads after they finish the jobs already queued.

use super::executor::{Executor, Job};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// The pool. See the module docs.
#[derive(Debug)]
pub struct Workers {
    queue: Option<SyncSender<Job>>,
    threads: Vec<JoinHandle<()>>,
}

impl Workers {
    /// Starts `threads` workers (at least one) sharing a queue of `capacity` jobs.
    pub fn new(threads: usize, capacity: usize) -> std::io::Result<Workers> {
        let (tx, rx) = sync_channel::<Job>(capacity);
        let rx = Arc::new(Mutex::new(rx));
        let mut handles = Vec::new();
        for i in 0..threads.max(1) {
            let rx = rx.clone();
            handles.push(
                std::thread::Builder::new()
                    .name(format!("srpt-worker{i}"))
                    .spawn(move || worker(&rx))?,
            );
        }
        Ok(Workers {
            queue: Some(tx),
            threads: handles,
        })
    }
}

fn worker(rx: &Mutex<Receiver<Job>>) {
    loop {
        // Hold the lock only to take a job, not while running it.
        let job = match rx.lock() {
            Ok(guard) => guard.recv(),
            Err(poisoned) => poisoned.into_inner().recv(),
        };
        match job {
            Ok(job) => job.run(),
            Err(_) => return,
        }
    }
}

impl Executor for Workers {
    fn submit(&self, job: Job) -> Result<(), Job> {
        let Some(q) = &self.queue else {
            return Err(job);
        };
        q.try_send(job).map_err(|e| match e {
            TrySendError::Full(j) | TrySendError::Disconnected(j) => j,
        })
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.queue = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
