//! The harness itself, with none of the project's code: a Linux 6.1 guest boots under QEMU
//! in a namespace, runs commands (exit codes, both outputs, large output, the share, a
//! timeout that leaves the guest usable), reaches the host side of its taps, and leaves no
//! namespace or QEMU behind, whether it is shut down or dropped by a panicking test.
//! Opt-in: `SRP_INTEROP=1` (tests/interop/README.md).

use srp_interop::{Capture, Error, Guest, GuestConfig, NetNs, Watchdog, skip_unless_enabled};
use std::path::Path;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(60);

fn gone(ns: &str, qemu_pid: u32) {
    assert!(!NetNs::exists(ns), "namespace {ns} left behind");
    // QEMU was our grandchild's exec (ip netns exec); once killed and reaped it is gone.
    let end = Instant::now() + Duration::from_secs(10);
    while Path::new(&format!("/proc/{qemu_pid}")).exists() {
        assert!(Instant::now() < end, "QEMU (pid {qemu_pid}) left behind");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn boots_runs_commands_and_shuts_down() {
    skip_unless_enabled!();
    let _watchdog = Watchdog::new(
        "boots_runs_commands_and_shuts_down",
        Duration::from_secs(600),
    );
    let ns = NetNs::new().expect("namespace");
    let ns_name = ns.name().to_owned();
    let started = Instant::now();
    let guest = Guest::boot(GuestConfig::new(&ns)).expect("boot");
    eprintln!(
        "booted {} in {:?} (agent up, eth0 configured, host pinged)",
        guest.kernel_release(),
        guest.boot_time()
    );
    let qemu_pid = guest.qemu_pid();

    // The stock 6.1 kernel, and QEMU inside our namespace.
    let uname = guest.run("uname -r", T).expect("uname");
    assert_eq!(uname.rc, 0);
    assert!(uname.stdout.trim().starts_with("6.1."), "{uname:?}");
    assert!(
        ns.pids().contains(&(qemu_pid as i32)),
        "QEMU not in the namespace"
    );

    // Exit codes and both outputs come back as they are.
    let out = guest.run("echo out; echo err >&2; exit 7", T).expect("run");
    assert_eq!(
        (out.rc, out.stdout.as_str(), out.stderr.as_str()),
        (7, "out\n", "err\n")
    );
    assert!(matches!(
        guest.run_ok("false", T),
        Err(Error::Command { rc: 1, .. })
    ));

    // Large output: 4 MiB of base64 arrives whole.
    let big = guest
        .run_ok("head -c 3145728 /dev/zero | base64 -w 76", T)
        .expect("large output");
    assert_eq!(big.len(), 4_194_304 + 4_194_304 / 76 + 1);

    // The host's tools are there (read-only root over 9p), and the share goes both ways.
    std::fs::write(guest.share_dir().join("from-host"), "hello guest\n").expect("write share");
    let seen = guest
        .run_ok(
            "cat /run/interop/from-host; sg_inq --version >/dev/null 2>&1 && echo sg3; \
             fio --version; echo back > /run/interop/from-guest",
            T,
        )
        .expect("share and tools");
    assert!(seen.starts_with("hello guest\nsg3\nfio-"), "{seen}");
    assert_eq!(
        std::fs::read_to_string(guest.share_dir().join("from-guest")).expect("read share"),
        "back\n"
    );
    let ro = guest.run("touch /usr/should-fail", T).expect("run");
    assert_ne!(ro.rc, 0, "the host's root must be read-only in the guest");

    // A command that outlives its timeout is killed, reported, and the guest stays usable;
    // one that ignores SIGTERM is killed 5 s later.
    let t0 = Instant::now();
    match guest.run("echo before; sleep 600", Duration::from_secs(3)) {
        Err(Error::Timeout {
            responsive: true,
            stdout,
            ..
        }) => assert_eq!(stdout, "before\n"),
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    match guest.run("trap '' TERM; sleep 600", Duration::from_secs(2)) {
        Err(Error::Timeout {
            responsive: true, ..
        }) => {}
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert_eq!(
        guest.run_ok("echo still here", T).expect("after timeouts"),
        "still here\n"
    );
    assert_eq!(
        guest
            .run_ok("pgrep -x sleep | wc -l", T)
            .expect("pgrep")
            .trim(),
        "0",
        "timed-out commands must be gone"
    );

    // Commands from several threads at once.
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let g = &guest;
                s.spawn(move || g.run_ok(&format!("sleep 1; echo {i}"), T))
            })
            .collect();
        for (i, h) in handles.into_iter().enumerate() {
            let out = h.join().expect("thread").expect("parallel run");
            assert_eq!(out, format!("{i}\n"));
        }
    });

    // The host side of the tap reaches the guest, and a capture on the tap sees it.
    let nic = guest.nic(0).expect("nic 0").clone();
    let pcap = guest.work_dir().join("ping.pcapng");
    let capture = Capture::start(&ns, &nic.tap, &pcap, Some("icmp")).expect("capture");
    let ping = ns
        .command("ping")
        .args(["-q", "-n", "-c", "2", "-w", "20", &nic.guest_ip.to_string()])
        .output()
        .expect("ping");
    assert!(ping.status.success(), "{ping:?}");
    let pcap = capture.stop();
    let frames = std::process::Command::new("tshark")
        .args([
            "-r",
            &pcap.display().to_string(),
            "-Y",
            "icmp.type == 0",
            "-T",
            "fields",
            "-e",
            "ip.src",
        ])
        .output()
        .expect("tshark");
    let replies = String::from_utf8_lossy(&frames.stdout);
    assert_eq!(
        replies.lines().count(),
        2,
        "echo replies on the tap: {replies}"
    );
    assert!(
        replies.lines().all(|l| l == nic.guest_ip.to_string()),
        "{replies}"
    );
    let mtu = guest
        .run_ok("cat /sys/class/net/eth0/mtu /sys/class/net/eth0/address", T)
        .expect("eth0");
    assert_eq!(mtu, format!("1500\n{}\n", nic.mac));

    let dmesg = guest.dmesg().expect("dmesg");
    assert!(dmesg.contains("Linux version 6.1."), "{dmesg}");

    guest.shutdown().expect("shutdown");
    drop(ns);
    gone(&ns_name, qemu_pid);
    eprintln!("whole test: {:?}", started.elapsed());
}

#[test]
fn two_nics_jumbo_and_cleanup_after_a_panic() {
    skip_unless_enabled!();
    let _watchdog = Watchdog::new(
        "two_nics_jumbo_and_cleanup_after_a_panic",
        Duration::from_secs(600),
    );
    // Keep the deliberate panic's message and backtrace out of the log; others still print.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let deliberate = info
            .payload()
            .downcast_ref::<&str>()
            .is_some_and(|m| m.starts_with("deliberate:"));
        if !deliberate {
            default_hook(info);
        }
    }));
    let seen = std::sync::Mutex::new(None);
    let result = std::panic::catch_unwind(|| {
        let ns = NetNs::new().expect("namespace");
        let guest = Guest::boot(GuestConfig::new(&ns).nics(&[9000, 1500])).expect("boot");
        *seen.lock().expect("lock") = Some((
            ns.name().to_owned(),
            guest.qemu_pid(),
            guest.work_dir().to_owned(),
        ));
        let links = guest
            .run_ok(
                "for i in eth0 eth1; do echo $i $(cat /sys/class/net/$i/mtu) $(cat /sys/class/net/$i/address); done; \
                 ip -4 -o addr show | awk '{print $2, $4}'",
                T,
            )
            .expect("links");
        assert!(links.contains("eth0 9000 52:54:00:77:00:01\n"), "{links}");
        assert!(links.contains("eth1 1500 52:54:00:77:00:02\n"), "{links}");
        assert!(links.contains("eth0 192.168.77.1/24\n"), "{links}");
        assert!(links.contains("eth1 192.168.78.1/24\n"), "{links}");
        // Jumbo frames pass unfragmented on NIC 0.
        let ping = ns
            .command("ping")
            .args([
                "-q",
                "-n",
                "-c",
                "1",
                "-w",
                "20",
                "-M",
                "do",
                "-s",
                "8972",
                "192.168.77.1",
            ])
            .output()
            .expect("ping");
        assert!(ping.status.success(), "{ping:?}");
        panic!("deliberate: the guest and the namespace must still go away");
    });
    assert!(result.is_err());
    let (ns, pid, dir) = seen.lock().expect("lock").take().expect("booted");
    gone(&ns, pid);
    // A panicking test keeps the work directory (console log) on purpose; this one is ours.
    let _ = std::fs::remove_dir_all(dir);
}
