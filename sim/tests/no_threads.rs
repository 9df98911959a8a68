//! A simulated run starts no thread and never sleeps: the target's loop, its devices and
//! their completion dispatchers, the initiator's ports and multipath all run on the
//! caller's thread (this binary holds one test, so the process has the harness's thread
//! and this one).

#[test]
fn a_run_starts_no_thread() {
    let before = srp_sim::world::thread_count();
    let started = std::time::Instant::now();
    let report = srp_sim::run(&srp_sim::Scenario::new(6)).unwrap_or_else(|f| panic!("{f}"));
    assert_eq!(
        report.threads, before,
        "threads appeared during the run: {report:?}"
    );
    // Ten virtual seconds with faults, in far less real time: nothing waited for a clock.
    assert!(
        report.virtual_time > std::time::Duration::from_secs(9),
        "{report:?}"
    );
    eprintln!(
        "{:?} virtual in {:?} real, {} threads",
        report.virtual_time,
        started.elapsed(),
        report.threads
    );
}
