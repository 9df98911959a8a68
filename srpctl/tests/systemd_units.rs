//! Issue #17's acceptance, the steps of docs/operators-guide.md under a real systemd: this
//! machine's systemd (252) booted as PID 1 of a PID and mount namespace of the test's own
//! (/run a fresh tmpfs; /etc/systemd/system, /usr/local, /etc/srp and /var/lib/srp-* bound
//! to temporary directories, so the machine's own are untouched), the network shared
//! (loopback 127.0.150.x only). In it:
//! 1. `srpctl install` puts the binary, the units, the pages and completions in place and
//!    runs `systemctl daemon-reload`;
//! 2. a target and a host configuration are written, a drop-in turns metrics on, and
//!    `systemctl enable --now srp-target@t srp-host@h` starts both — Type=notify, so each
//!    start returns only once the daemon said READY (the host: logged in, disk exposed);
//! 3. a verifying workload writes and reads back the host's block file the whole time;
//! 4. metrics are scraped from both daemons' `/metrics`;
//! 5. a LUN is added and the ACL changed in target.toml, `systemctl reload srp-target@t`
//!    applies them (the host's sweep then exposes the new disk);
//! 6. metrics are scraped again: the reload counted, the new LUN present, the workload's
//!    writes counted by both daemons; no I/O error anywhere;
//! 7. `systemctl stop` logs both out in order (exit status 0), and the namespace goes.
//!
//! Needs root, systemd, FUSE and unshare/nsenter (CI has them); bounded in time, and the
//! namespace is killed even on failure.

mod process;

use process::{SRPCTL, output_within};
use std::io::{Read as _, Write as _};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const SYSTEMD: &str = "/lib/systemd/systemd";

/// Directories bound over the machine's inside the namespace.
const BOUND: [&str; 5] = [
    "/etc/systemd/system",
    "/usr/local",
    "/etc/srp",
    "/var/lib/srp-target",
    "/var/lib/srp-host",
];

/// Units a booting systemd would start that touch what the namespace shares with the
/// machine (its /dev, /proc/sys, kernel modules, users, swap, clock, packages): masked.
const MASKED: &[&str] = &[
    "systemd-tmpfiles-setup.service",
    "systemd-tmpfiles-setup-dev.service",
    "systemd-tmpfiles-clean.service",
    "systemd-tmpfiles-clean.timer",
    "systemd-sysctl.service",
    "systemd-modules-load.service",
    "kmod-static-nodes.service",
    "systemd-udevd.service",
    "systemd-udev-trigger.service",
    "systemd-udevd-control.socket",
    "systemd-udevd-kernel.socket",
    "systemd-sysusers.service",
    "systemd-random-seed.service",
    "systemd-journal-flush.service",
    "systemd-update-utmp.service",
    "systemd-hwdb-update.service",
    "systemd-binfmt.service",
    "proc-sys-fs-binfmt_misc.automount",
    "systemd-machine-id-commit.service",
    "systemd-firstboot.service",
    "systemd-timesyncd.service",
    "systemd-networkd-wait-online.service",
    "ldconfig.service",
    "swap.target",
    "timers.target",
];

/// systemd as PID 1 of its own namespaces; killed (with everything in them) on drop.
struct Booted {
    child: Child,
    pid1: u32,
    dir: PathBuf,
    made: Vec<PathBuf>,
}

impl Booted {
    fn start(dir: &Path) -> Booted {
        let mut made = Vec::new();
        let units = dir.join("bound0");
        std::fs::create_dir_all(&units).expect("unit dir");
        for m in MASKED {
            std::os::unix::fs::symlink("/dev/null", units.join(m)).expect("mask");
        }
        std::fs::write(
            units.join("srp-test.target"),
            "[Unit]\nDescription=The test's boot target: nothing else\nDefaultDependencies=no\n",
        )
        .expect("target");
        // The binds first: their sources may live under /tmp (a clone made with mktemp),
        // which the namespace's own /tmp then hides — a bind already made stays.
        let mut script = String::from("set -e\n");
        for (i, at) in BOUND.iter().enumerate() {
            let src = dir.join(format!("bound{i}"));
            std::fs::create_dir_all(&src).expect("bound source");
            // The mount point itself on the machine: made if missing, removed at the end.
            if !Path::new(at).exists() {
                std::fs::create_dir_all(at).expect("mount point");
                made.push(PathBuf::from(at));
            }
            script.push_str(&format!("mount --bind {} {at}\n", src.display()));
        }
        // Fresh /run, /tmp and /var/tmp; the build's directory (the srpctl under test, the
        // test's files) kept visible at its own path when it lies under /tmp or /var/tmp (a
        // clone made with mktemp): held at /run/build across the new /tmp, bound back.
        let build = Path::new(SRPCTL)
            .ancestors()
            .nth(2)
            .unwrap_or(Path::new("/"))
            .display()
            .to_string();
        script.push_str(&format!(
            "mount -t tmpfs tmpfs /run\nmkdir /run/build\nmount --bind {build} /run/build\n\
             mount -t tmpfs tmpfs /tmp\nmount -t tmpfs tmpfs /var/tmp\n\
             case {build} in /tmp/*|/var/tmp/*) mkdir -p {build}; mount --bind /run/build {build} ;; esac\n\
             umount /run/build\n"
        ));
        script.push_str(&format!(
            "exec {SYSTEMD} --system --unit=srp-test.target --log-target=console\n"
        ));
        let log = std::fs::File::create(dir.join("systemd.log")).expect("log");
        let child = Command::new("unshare")
            .args([
                "--pid",
                "--fork",
                "--mount",
                "--mount-proc",
                "--propagation",
                "private",
            ])
            .args(["sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("unshare (util-linux)");
        // systemd is the unshare's child's exec: find it by its parent.
        let end = Instant::now() + Duration::from_secs(30);
        let pid1 = loop {
            let out = output_within(
                {
                    let mut c = Command::new("pgrep");
                    c.args(["-P", &child.id().to_string()]);
                    c
                },
                5,
            );
            if let Some(p) = String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .next()
                .and_then(|p| p.parse().ok())
            {
                break p;
            }
            assert!(Instant::now() < end, "systemd did not start");
            std::thread::sleep(Duration::from_millis(100));
        };
        let b = Booted {
            child,
            pid1,
            dir: dir.to_path_buf(),
            made,
        };
        b.wait_running();
        b
    }

    /// `cmd args` inside the namespaces; its output, which must be a success.
    fn run(&self, cmd: &str, args: &[&str]) -> String {
        let out = self.try_run(cmd, args);
        assert!(
            out.status.success(),
            "{cmd} {args:?}: {}\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn try_run(&self, cmd: &str, args: &[&str]) -> std::process::Output {
        let mut c = Command::new("nsenter");
        c.args(["-t", &self.pid1.to_string(), "-m", "-p", "--", cmd]);
        c.args(args);
        output_within(c, 90)
    }

    fn wait_running(&self) {
        let end = Instant::now() + Duration::from_secs(60);
        loop {
            let out = self.try_run("systemctl", &["is-system-running"]);
            let state = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            if state == "running" || state == "degraded" {
                return;
            }
            assert!(
                Instant::now() < end,
                "systemd is {state:?} after 60 s; its log: {}",
                std::fs::read_to_string(self.dir.join("systemd.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// A path of the namespace's file system, as this process reaches it.
    fn path(&self, inside: &str) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root{inside}", self.pid1))
    }

    /// The machine path bound at `at` inside.
    fn bound(&self, at: &str) -> PathBuf {
        let i = BOUND
            .iter()
            .position(|b| *b == at)
            .expect("a bound directory");
        self.dir.join(format!("bound{i}"))
    }

    fn show(&self, unit: &str, prop: &str) -> String {
        self.run("systemctl", &["show", "-P", prop, unit])
            .trim()
            .to_owned()
    }
}

impl Drop for Booted {
    fn drop(&mut self) {
        // SIGKILL to a PID namespace's init ends every process in it; the mounts go with
        // the namespace.
        let _ = Command::new("kill")
            .args(["-9", &self.pid1.to_string()])
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
        for m in self.made.iter().rev() {
            let _ = std::fs::remove_dir(m);
        }
    }
}

/// `GET /metrics` at `addr`: every sample by series.
fn scrape(addr: &str) -> std::collections::BTreeMap<String, f64> {
    let mut c = std::net::TcpStream::connect(addr).expect("metrics listener");
    c.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n")
        .expect("request");
    let mut all = String::new();
    c.read_to_string(&mut all).expect("response");
    let (head, body) = all.split_once("\r\n\r\n").expect("HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (s, v) = l.rsplit_once(' ')?;
            Some((s.to_owned(), v.parse().ok()?))
        })
        .collect()
}

fn sum(samples: &std::collections::BTreeMap<String, f64>, prefix: &str) -> f64 {
    samples
        .iter()
        .filter(|(k, _)| k.starts_with(prefix))
        .map(|(_, v)| v)
        .sum()
}

fn target_toml(extra: &str, exports: &str, allow: &str) -> String {
    format!(
        "[target]\nnode_guid = \"0x0002c90300ad0000\"\nname = \"t\"\n\n\
         [[port]]\nname = \"p0\"\naddress = \"127.0.150.1\"\n\n\
         [[port]]\nname = \"p1\"\naddress = \"127.0.150.2\"\n\n\
         [[lun]]\nname = \"vol1\"\nfile = \"/var/lib/srp-target/vol1.img\"\nsize = \"16MiB\"\n\n\
         {extra}\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"0x0002c90300ad00a1\"\nports = [\"p0\"]\n\
         exports = {exports}\nallow = {allow}\n\n\
         [[ioc]]\nname = \"ioc-b\"\nguid = \"0x0002c90300ad00b1\"\nports = [\"p1\"]\n\
         exports = {exports}\nallow = {allow}\n"
    )
}

const HOST_TOML: &str = "[host]\nname = \"h\"\nsweep_interval = \"1s\"\n\n\
    [[portal]]\naddress = \"127.0.150.1\"\nlocal = [\"127.0.150.11\"]\n\n\
    [[portal]]\naddress = \"127.0.150.2\"\nlocal = [\"127.0.150.12\"]\n";

/// Writes and reads back 4 KiB blocks of `file` until `stop`, each write verified; counts
/// the writes and every error (which fails the test).
fn workload(
    file: PathBuf,
    stop: Arc<AtomicBool>,
    writes: Arc<AtomicU64>,
    errors: Arc<AtomicU64>,
    issued: Arc<AtomicU64>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&file)
            .expect("the disk's block file");
        let mut round = 0u64;
        while !stop.load(Ordering::Relaxed) {
            round += 1;
            issued.fetch_add(1, Ordering::Relaxed);
            let block = round % 1024;
            let data: Vec<u8> = (0..4096u64)
                .map(|i| (i ^ round.wrapping_mul(31)) as u8)
                .collect();
            let ok = f.write_all_at(&data, block * 4096).is_ok() && f.sync_data().is_ok();
            let mut back = vec![0u8; 4096];
            let same = ok && f.read_exact_at(&mut back, block * 4096).is_ok() && back == data;
            if same {
                writes.fetch_add(1, Ordering::Relaxed);
            } else {
                errors.fetch_add(1, Ordering::Relaxed);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    })
}

#[test]
fn the_operators_guide_under_systemd() {
    assert!(
        Path::new(SYSTEMD).exists(),
        "{SYSTEMD} is needed (scripts/test.sh installs systemd)"
    );
    // The bound directories' sources (under target/, wherever the clone is: /tmp too).
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("systemd-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let sd = Booted::start(&dir);
    // 1. Install.
    let installed = sd.run(SRPCTL, &["install"]);
    assert!(
        installed.contains("/etc/systemd/system/srp-target@.service"),
        "{installed}"
    );
    assert!(
        installed.contains("systemctl daemon-reload: done"),
        "{installed}"
    );
    assert!(
        sd.bound("/usr/local")
            .join("share/man/man1/srpctl-target-reload.1")
            .exists()
    );
    // 2. Configure and start.
    let etc = sd.bound("/etc/srp");
    std::fs::write(
        etc.join("target/t.toml"),
        target_toml("", "{ 0 = \"vol1\" }", "[\"any\"]"),
    )
    .expect("target.toml");
    std::fs::write(etc.join("host/h.toml"), HOST_TOML).expect("host.toml");
    for (unit, addr) in [
        ("srp-target@t", "127.0.150.100:9571"),
        ("srp-host@h", "127.0.150.100:9572"),
    ] {
        let d = sd
            .bound("/etc/systemd/system")
            .join(format!("{unit}.service.d"));
        std::fs::create_dir_all(&d).expect("drop-in dir");
        std::fs::write(
            d.join("metrics.conf"),
            format!("[Service]\nEnvironment=SRPCTL_METRICS={addr}\n"),
        )
        .expect("drop-in");
    }
    sd.run("systemctl", &["daemon-reload"]);
    sd.run("systemctl", &["enable", "--now", "srp-target@t"]);
    sd.run("systemctl", &["enable", "--now", "srp-host@h"]);
    for unit in ["srp-target@t", "srp-host@h"] {
        assert_eq!(sd.show(unit, "Type"), "notify");
        assert_eq!(sd.show(unit, "ActiveState"), "active", "{unit}");
        assert_eq!(sd.show(unit, "SubState"), "running", "{unit}");
        assert!(
            !sd.show(unit, "StatusText").is_empty(),
            "{unit}: READY had a status"
        );
        assert_ne!(sd.show(unit, "WatchdogUSec"), "0", "{unit}: a watchdog");
    }
    // 3. The host's disk, written and verified from now on.
    let disks = sd.path("/run/srp-host/h/disks");
    let first: Vec<PathBuf> = std::fs::read_dir(&disks)
        .expect("the disks directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    assert_eq!(first.len(), 1, "one disk over two paths: {first:?}");
    let stop = Arc::new(AtomicBool::new(false));
    let (writes, errors) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let issued = Arc::new(AtomicU64::new(0));
    let load = workload(
        first[0].clone(),
        stop.clone(),
        writes.clone(),
        errors.clone(),
        issued.clone(),
    );
    std::thread::sleep(Duration::from_secs(2));
    // 4. Metrics before.
    let t0 = scrape("127.0.150.100:9571");
    let h0 = scrape("127.0.150.100:9572");
    assert_eq!(t0["srp_target_reloads_total"], 0.0);
    assert_eq!(t0["srp_target_ioc_sessions{ioc=\"ioc-a\"}"], 1.0);
    assert_eq!(sum(&h0, "srp_host_disk_paths_usable{"), 2.0);
    // A write in flight now may have reached both daemons before the scrapes and be
    // counted by the workload only after: it is in `done` but in neither delta.
    let w0 = writes.load(Ordering::Relaxed);
    let in_flight = issued.load(Ordering::Relaxed) - w0 - errors.load(Ordering::Relaxed);
    // 5. A LUN added, the ACL changed (the host's own addresses, by entry): reload.
    std::fs::write(
        etc.join("target/t.toml"),
        target_toml(
            "[[lun]]\nname = \"vol2\"\nfile = \"/var/lib/srp-target/vol2.img\"\nsize = \"8MiB\"\n\n",
            "{ 0 = \"vol1\", 1 = \"vol2\" }",
            "[\"addr:127.0.150.11\", \"addr:127.0.150.12\"]",
        ),
    )
    .expect("target.toml changed");
    sd.run("systemctl", &["reload", "srp-target@t"]);
    let end = Instant::now() + Duration::from_secs(30);
    while std::fs::read_dir(&disks).map_or(0, |d| d.count()) < 2 {
        assert!(Instant::now() < end, "the new LUN's disk did not appear");
        std::thread::sleep(Duration::from_millis(200));
    }
    let config = sd.run(
        SRPCTL,
        &["target", "config", "--socket", "/run/srp-target/t.sock"],
    );
    assert!(
        config.contains("vol2") && config.contains("addr:127.0.150.11"),
        "{config}"
    );
    std::thread::sleep(Duration::from_secs(2));
    // 6. Metrics after. The workload's count is read between the scrapes' ends: a write it
    // counted after the first scrape and before the second is in both daemons' deltas.
    let w1 = writes.load(Ordering::Relaxed);
    let t1 = scrape("127.0.150.100:9571");
    let h1 = scrape("127.0.150.100:9572");
    assert_eq!(t1["srp_target_reloads_total"], 1.0);
    assert_eq!(t1["srp_target_reload_refusals_total"], 0.0);
    assert_eq!(
        t1["srp_target_lun_size_bytes{lun=\"vol2\"}"],
        8.0 * 1024.0 * 1024.0
    );
    assert_eq!(t1["srp_target_ioc_luns{ioc=\"ioc-a\"}"], 2.0);
    let done = (w1 - w0 - in_flight) as f64;
    assert!(
        done > 10.0,
        "the workload ran through the reload: {done} writes"
    );
    let target_writes = t1["srp_target_lun_writes_total{lun=\"vol1\"}"]
        - t0["srp_target_lun_writes_total{lun=\"vol1\"}"];
    let host_writes =
        sum(&h1, "srp_host_disk_writes_total{") - sum(&h0, "srp_host_disk_writes_total{");
    assert!(
        host_writes >= done,
        "host counted {host_writes} writes for {done}"
    );
    assert!(
        target_writes >= done,
        "target counted {target_writes} writes for {done}"
    );
    assert_eq!(sum(&h1, "srp_host_disk_errors_total{"), 0.0);
    stop.store(true, Ordering::Relaxed);
    load.join().expect("workload");
    assert_eq!(
        errors.load(Ordering::Relaxed),
        0,
        "no I/O error through the reload"
    );
    // 7. Orderly stop.
    sd.run("systemctl", &["stop", "srp-host@h", "srp-target@t"]);
    for unit in ["srp-target@t", "srp-host@h"] {
        assert_eq!(
            sd.show(unit, "ExecMainStatus"),
            "0",
            "{unit} exited cleanly"
        );
        assert_eq!(sd.show(unit, "NRestarts"), "0", "{unit} never restarted");
    }
    drop(sd);
    let _ = std::fs::remove_dir_all(&dir);
}
