//! The Linux guest: QEMU TCG in a network namespace, and its command agent.
//!
//! The guest boots Debian's Linux 6.1 with the harness's initramfs, which mounts the host's
//! root read-only over 9p, puts tmpfs on `/tmp`, `/run` and `/var`, bind-mounts the unpacked
//! kernel's modules over `/lib/modules`, mounts a read-write 9p share of the guest's work
//! directory at [`GUEST_SHARE`] and switches root into that tree. PID 1 is then the agent
//! (`src/agent.sh`): it listens on a virtio-serial port whose QEMU end is a unix socket in the
//! work directory. A command is a bash script the host writes into the share; the agent runs
//! it in the background with a timeout, its output goes to files in the share, and the agent
//! reports the exit code on the port.

use crate::{Cache, Error, NetNs, Result, file_tail};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::net::Ipv4Addr;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The agent script the guest runs as PID 1.
pub const AGENT_SCRIPT: &str = include_str!("agent.sh");
/// Where the guest sees its read-write share (the host's [`Guest::share_dir`]).
pub const GUEST_SHARE: &str = "/run/interop";
/// How much longer than a command's timeout the host waits for the agent's report.
const REPORT_GRACE: Duration = Duration::from_secs(20);

static NEXT_GUEST: AtomicU32 = AtomicU32::new(0);

/// One NIC of the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NicConfig {
    /// The MTU of both ends (the tap and the guest's `eth<i>`): 1500 or 9000.
    pub mtu: u32,
}

/// What a boot failure's reason says when QEMU aborted on an internal assertion of its own.
const QEMU_ABORTED: &str = "QEMU aborted on an internal assertion";

/// How to boot a [`Guest`]. Start from [`GuestConfig::new`].
#[derive(Debug, Clone)]
pub struct GuestConfig {
    /// The namespace the taps and QEMU live in.
    pub netns: String,
    /// The NICs (1 or 2): NIC `i` is tap `srptap<i>` in the namespace with
    /// 192.168.(`subnet_base`+i).254/24, and `eth<i>` in the guest with .1/24.
    pub nics: Vec<NicConfig>,
    /// The third octet of NIC 0's subnet (77); two guests in one namespace need different
    /// bases (and so different tap names: see [`GuestConfig::tap_prefix`]).
    pub subnet_base: u8,
    /// The prefix of the tap names (`srptap`).
    pub tap_prefix: String,
    /// Guest memory in MiB (1024).
    pub memory_mib: u32,
    /// Virtual CPUs (2; TCG runs them on host threads).
    pub cpus: u32,
    /// Bound on the boot, from QEMU's start to the agent's first answer and the network set up.
    pub boot_timeout: Duration,
    /// Bound on [`Guest::shutdown`] before QEMU is killed.
    pub shutdown_timeout: Duration,
    /// Extra kernel command-line arguments.
    pub kernel_args: Vec<String>,
    /// Whether the boot checks each NIC with a ping from the guest to the host side (true).
    pub ping_host: bool,
}

impl GuestConfig {
    /// One 1500-byte NIC, 1 GiB, 2 CPUs, 3 minutes to boot.
    pub fn new(netns: &NetNs) -> GuestConfig {
        GuestConfig {
            netns: netns.name().to_owned(),
            nics: vec![NicConfig { mtu: 1500 }],
            subnet_base: 77,
            tap_prefix: "srptap".into(),
            memory_mib: 1024,
            cpus: 2,
            boot_timeout: Duration::from_secs(180),
            shutdown_timeout: Duration::from_secs(30),
            kernel_args: Vec::new(),
            ping_host: true,
        }
    }

    /// One NIC per entry, with that MTU.
    pub fn nics(mut self, mtus: &[u32]) -> GuestConfig {
        self.nics = mtus.iter().map(|&mtu| NicConfig { mtu }).collect();
        self
    }

    /// Guest memory in MiB.
    pub fn memory_mib(mut self, mib: u32) -> GuestConfig {
        self.memory_mib = mib;
        self
    }

    /// The boot bound.
    pub fn boot_timeout(mut self, timeout: Duration) -> GuestConfig {
        self.boot_timeout = timeout;
        self
    }
}

/// A NIC as booted: names and addresses of both ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nic {
    /// Index `i`.
    pub index: usize,
    /// The tap's name in the namespace (host side).
    pub tap: String,
    /// The guest's interface, `eth<i>`.
    pub guest_if: String,
    /// The guest NIC's MAC, `52:54:00:<base>:00:0<i+1>` (rxe's node GUID derives from it).
    pub mac: String,
    /// The MTU of both ends.
    pub mtu: u32,
    /// The host side's address, 192.168.(base+i).254.
    pub host_ip: Ipv4Addr,
    /// The guest's address, 192.168.(base+i).1.
    pub guest_ip: Ipv4Addr,
}

/// What a guest command did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// Its exit code.
    pub rc: i32,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

#[derive(Default)]
struct AgentState {
    done: HashMap<u64, i32>,
    pong: u64,
    ready: bool,
    closed: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<AgentState>,
    cond: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, AgentState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until `done` says so or the deadline passes; returns the final guard.
    fn wait_until(
        &self,
        deadline: Instant,
        mut done: impl FnMut(&AgentState) -> bool,
    ) -> MutexGuard<'_, AgentState> {
        let mut st = self.lock();
        while !done(&st) {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            st = match self.cond.wait_timeout(st, deadline - now) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
        st
    }
}

/// A booted Linux guest. Dropping it kills QEMU, removes its taps and (unless the thread is
/// panicking or `SRP_INTEROP_KEEP` is set) its work directory.
pub struct Guest {
    config: GuestConfig,
    nics: Vec<Nic>,
    dir: PathBuf,
    qemu: Child,
    writer: Mutex<UnixStream>,
    shared: Arc<Shared>,
    reader: Option<JoinHandle<()>>,
    next_id: AtomicU64,
    kernel_release: String,
    boot_time: Duration,
    keep: bool,
}

impl std::fmt::Debug for Guest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guest")
            .field("netns", &self.config.netns)
            .field("dir", &self.dir)
            .field("qemu_pid", &self.qemu.id())
            .field("kernel_release", &self.kernel_release)
            .finish_non_exhaustive()
    }
}

impl Guest {
    /// Boots a guest (running `scripts/interop-setup.sh` first if the cache is not
    /// populated): creates the taps, starts QEMU in the namespace, waits for the agent,
    /// configures `eth<i>` and (with [`GuestConfig::ping_host`]) pings each host side. Fails
    /// with the console tail when that does not finish within [`GuestConfig::boot_timeout`].
    /// A boot on which QEMU itself aborts on an internal assertion (a QEMU TCG bug seen
    /// during PCI set-up) is tried once more, with a line on stderr.
    pub fn boot(config: GuestConfig) -> Result<Guest> {
        match Self::boot_once(config.clone()) {
            // QEMU itself failed an internal assertion: one more boot, said on stderr.
            Err(Error::Boot { reason, .. }) if reason.contains(QEMU_ABORTED) => {
                eprintln!("interop: {reason}; booting the guest once more");
                Self::boot_once(config)
            }
            other => other,
        }
    }

    fn boot_once(config: GuestConfig) -> Result<Guest> {
        let cache = Cache::ensure()?;
        if config.nics.is_empty() || config.nics.len() > 4 {
            return Err(Error::Guest(format!(
                "{} NICs asked for: 1 to 4 supported",
                config.nics.len()
            )));
        }
        if usize::from(config.subnet_base) + config.nics.len() > 255 {
            return Err(Error::Guest("subnet_base too high".into()));
        }
        if let Some(nic) = config.nics.iter().find(|n| !(576..=9000).contains(&n.mtu)) {
            return Err(Error::Guest(format!("MTU {} outside 576..=9000", nic.mtu)));
        }
        let started = Instant::now();
        let dir = std::env::temp_dir().join(format!(
            "srp-interop-{}-{}",
            std::process::id(),
            NEXT_GUEST.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let share = dir.join("share");
        std::fs::create_dir_all(share.join("cmd"))
            .map_err(Error::io(format!("create {}", share.display())))?;
        std::fs::write(share.join("agent.sh"), AGENT_SCRIPT)
            .map_err(Error::io("write agent.sh"))?;

        let nics: Vec<Nic> = config
            .nics
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let subnet = config.subnet_base + i as u8;
                Nic {
                    index: i,
                    tap: format!("{}{i}", config.tap_prefix),
                    guest_if: format!("eth{i}"),
                    mac: format!("52:54:00:{:02}:00:{:02x}", config.subnet_base % 100, i + 1),
                    mtu: n.mtu,
                    host_ip: Ipv4Addr::new(192, 168, subnet, 254),
                    guest_ip: Ipv4Addr::new(192, 168, subnet, 1),
                }
            })
            .collect();
        let ns = &config.netns;
        let ip = |args: &[&str]| {
            let mut all = vec!["-n", ns.as_str()];
            all.extend_from_slice(args);
            crate::host("ip", &all)
        };
        for nic in &nics {
            let mtu = nic.mtu.to_string();
            let addr = format!("{}/24", nic.host_ip);
            let _ = ip(&["link", "del", &nic.tap]);
            ip(&["tuntap", "add", "dev", &nic.tap, "mode", "tap"])?;
            ip(&["link", "set", "dev", &nic.tap, "mtu", &mtu, "up"])?;
            ip(&["addr", "add", &addr, "dev", &nic.tap])?;
        }

        let sock = dir.join("agent.sock");
        let console = dir.join("console.log");
        let qemu_log =
            std::fs::File::create(dir.join("qemu.log")).map_err(Error::io("create qemu.log"))?;
        let qemu_err = qemu_log.try_clone().map_err(Error::io("qemu.log"))?;
        let mut append = format!(
            "console=ttyS0 panic=-1 mitigations=off srp.cache={} srp.kver={}",
            cache.dir.display(),
            cache.kernel_version
        );
        for a in &config.kernel_args {
            append.push(' ');
            append.push_str(a);
        }
        let mut args: Vec<String> = vec![
            "-name".into(),
            "srp-interop".into(),
            "-accel".into(),
            "tcg,thread=multi".into(),
            "-cpu".into(),
            "max".into(),
            "-smp".into(),
            config.cpus.to_string(),
            "-m".into(),
            config.memory_mib.to_string(),
            "-nodefaults".into(),
            "-no-user-config".into(),
            "-display".into(),
            "none".into(),
            "-no-reboot".into(),
            "-kernel".into(),
            cache.kernel.display().to_string(),
            "-initrd".into(),
            cache.initramfs.display().to_string(),
            "-append".into(),
            append,
            "-chardev".into(),
            format!("file,id=con,path={}", console.display()),
            "-serial".into(),
            "chardev:con".into(),
            "-virtfs".into(),
            "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
                .into(),
            "-virtfs".into(),
            format!(
                "local,path={},mount_tag=xfer,security_model=none,multidevs=remap",
                share.display()
            ),
            "-device".into(),
            "virtio-serial-pci,id=vser".into(),
            "-chardev".into(),
            format!("socket,id=agent,path={},server=on,wait=off", sock.display()),
            "-device".into(),
            "virtserialport,chardev=agent,name=org.srp.agent".into(),
        ];
        for nic in &nics {
            args.push("-netdev".into());
            args.push(format!(
                "tap,id=n{i},ifname={tap},script=no,downscript=no",
                i = nic.index,
                tap = nic.tap
            ));
            args.push("-device".into());
            // Fixed PCI slots: the guest names the NICs eth0, eth1 in slot order.
            args.push(format!(
                "virtio-net-pci,netdev=n{i},mac={mac},host_mtu={mtu},addr=0x{slot:x}",
                i = nic.index,
                mac = nic.mac,
                mtu = nic.mtu,
                slot = 0x10 + nic.index
            ));
        }
        for d in &cache.qemu_datadirs {
            args.push("-L".into());
            args.push(d.display().to_string());
        }
        let qemu = Command::new("ip")
            .args(["netns", "exec", ns])
            .arg(&cache.qemu)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(qemu_log)
            .stderr(qemu_err)
            .spawn()
            .map_err(Error::io(format!("start {}", cache.qemu.display())))?;

        let mut booting = Booting {
            qemu: Some(qemu),
            dir: dir.clone(),
            console: console.clone(),
            netns: ns.clone(),
            taps: nics.iter().map(|n| n.tap.clone()).collect(),
        };
        let deadline = started + config.boot_timeout;

        // QEMU creates the socket at start-up (server=on,wait=off).
        let stream = loop {
            if let Ok(s) = UnixStream::connect(&sock) {
                break s;
            }
            booting.check_alive()?;
            if Instant::now() > deadline {
                return Err(booting.fail("QEMU's agent socket did not appear"));
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let shared = Arc::new(Shared::default());
        let read_half = stream
            .try_clone()
            .map_err(Error::io("clone agent socket"))?;
        let reader = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("srp-interop-agent".into())
                .spawn(move || read_agent(read_half, &shared))
                .map_err(Error::io("spawn agent reader"))?
        };
        let writer = Mutex::new(stream);

        // Lines the guest writes before we connect are dropped by QEMU: ping until it answers.
        let mut n = 0u64;
        loop {
            n += 1;
            let sent = writer
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .write_all(format!("PING {n}\n").as_bytes());
            if sent.is_err() {
                return Err(booting.fail("agent socket closed"));
            }
            let wait_end = (Instant::now() + Duration::from_millis(500)).min(deadline);
            let up = {
                let st = shared.wait_until(wait_end, |s| s.pong >= 1 || s.closed);
                st.pong >= 1
            };
            if up {
                break;
            }
            booting.check_alive()?;
            if Instant::now() >= deadline {
                return Err(booting.fail(&format!(
                    "the agent did not answer within {:?}",
                    config.boot_timeout
                )));
            }
        }

        let qemu = booting
            .qemu
            .take()
            .ok_or_else(|| Error::Guest("no QEMU".into()))?;
        // The guest owns QEMU and the taps from here on.
        booting.taps.clear();
        let mut guest = Guest {
            config,
            nics,
            dir,
            qemu,
            writer,
            shared,
            reader: Some(reader),
            next_id: AtomicU64::new(1),
            kernel_release: String::new(),
            boot_time: Duration::ZERO,
            keep: false,
        };
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_secs(10));
        let setup = guest.network_script();
        if let Err(e) = guest.run_ok(&setup, left) {
            guest.keep_dir();
            return Err(Error::Boot {
                reason: format!("network set-up failed: {e}"),
                console: guest.console_path(),
                tail: file_tail(&guest.console_path(), 40),
            });
        }
        guest.kernel_release = guest
            .run_ok("uname -r", Duration::from_secs(30))?
            .trim()
            .into();
        guest.boot_time = started.elapsed();
        Ok(guest)
    }

    fn network_script(&self) -> String {
        let mut s = String::from("set -e\nmodprobe virtio_net\nip link set lo up\n");
        for nic in &self.nics {
            let _ = write!(
                s,
                r#"
dev=
for _ in $(seq 200); do
    for d in /sys/class/net/*; do
        [ "$(cat "$d/address")" = "{mac}" ] && dev=${{d##*/}}
    done
    [ -n "$dev" ] && break
    sleep 0.05
done
if [ "$dev" != "{ifname}" ]; then echo "NIC {mac} is '$dev', expected {ifname}" >&2; exit 1; fi
ip link set dev {ifname} mtu {mtu} up
ip addr add {ip}/24 dev {ifname}
"#,
                mac = nic.mac,
                ifname = nic.guest_if,
                mtu = nic.mtu,
                ip = nic.guest_ip
            );
        }
        if self.config.ping_host {
            for nic in &self.nics {
                let _ = writeln!(s, "ping -q -n -c 1 -w 20 {} >/dev/null", nic.host_ip);
            }
        }
        s
    }

    /// Runs `script` with bash in the guest, as root, in the host's tree, `cwd` `/tmp`, stdin
    /// `/dev/null`; returns its exit code and output, whatever the exit code. A script still
    /// running after `timeout` is killed (TERM, then KILL 5 s later) and reported as
    /// [`Error::Timeout`] with what it printed; the guest stays usable unless the command is
    /// stuck in the kernel. Output of any size is fine (it travels as files in the share).
    /// Several threads may run commands at once.
    pub fn run(&self, script: &str, timeout: Duration) -> Result<Output> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let cmd = self.share_dir().join("cmd");
        let path = |ext: &str| cmd.join(format!("{id}.{ext}"));
        std::fs::write(path("sh"), script).map_err(Error::io("write guest script"))?;
        let secs = timeout.as_secs_f64().ceil().max(1.0) as u64;
        let started = Instant::now();
        self.send(&format!("RUN {id} {secs}\n"))?;
        let deadline = started + Duration::from_secs(secs) + REPORT_GRACE;
        let (rc, closed) = {
            let mut st = self
                .shared
                .wait_until(deadline, |s| s.done.contains_key(&id) || s.closed);
            (st.done.remove(&id), st.closed)
        };
        let read = |ext: &str| {
            std::fs::read(path(ext))
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default()
        };
        let stdout = read("out");
        let stderr = read("err");
        let first_line = script.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        let summary = if script.lines().count() > 1 {
            format!("{first_line} …")
        } else {
            first_line.to_owned()
        };
        let result = match rc {
            Some(124 | 137) if started.elapsed() >= Duration::from_secs(secs) => {
                Err(Error::Timeout {
                    script: summary,
                    after: timeout,
                    responsive: true,
                    stdout,
                    stderr,
                })
            }
            Some(rc) => Ok(Output { rc, stdout, stderr }),
            None if closed => Err(Error::AgentGone {
                reason: format!("while running: {summary}"),
                tail: file_tail(&self.console_path(), 40),
            }),
            None => Err(Error::Timeout {
                script: summary,
                after: timeout,
                responsive: false,
                stdout,
                stderr,
            }),
        };
        if result.is_ok()
            || matches!(
                result,
                Err(Error::Timeout {
                    responsive: true,
                    ..
                })
            )
        {
            for ext in ["sh", "out", "err"] {
                let _ = std::fs::remove_file(path(ext));
            }
        }
        result
    }

    /// [`Guest::run`], requiring exit code 0: returns its standard output, or
    /// [`Error::Command`] with both outputs.
    pub fn run_ok(&self, script: &str, timeout: Duration) -> Result<String> {
        let out = self.run(script, timeout)?;
        if out.rc != 0 {
            let first_line = script.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            return Err(Error::Command {
                script: first_line.to_owned(),
                rc: out.rc,
                stdout: out.stdout,
                stderr: out.stderr,
            });
        }
        Ok(out.stdout)
    }

    /// The guest kernel's log.
    pub fn dmesg(&self) -> Result<String> {
        self.run_ok("dmesg", Duration::from_secs(60))
    }

    /// Powers the guest off (sysrq `o`) and waits for QEMU to exit; kills it after
    /// [`GuestConfig::shutdown_timeout`] and reports that as an error.
    pub fn shutdown(mut self) -> Result<()> {
        let _ = self.send("HALT\n");
        let end = Instant::now() + self.config.shutdown_timeout;
        loop {
            match self.qemu.try_wait() {
                Ok(Some(_)) => return Ok(()),
                Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(50)),
                _ => {
                    let _ = self.qemu.kill();
                    let _ = self.qemu.wait();
                    return Err(Error::Guest(format!(
                        "guest did not power off within {:?}; QEMU killed",
                        self.config.shutdown_timeout
                    )));
                }
            }
        }
    }

    /// The NICs as booted.
    pub fn nics(&self) -> &[Nic] {
        &self.nics
    }

    /// NIC `i`.
    pub fn nic(&self, i: usize) -> Option<&Nic> {
        self.nics.get(i)
    }

    /// The namespace the guest's taps are in.
    pub fn netns(&self) -> &str {
        &self.config.netns
    }

    /// `uname -r` of the guest, e.g. `6.1.0-56-amd64`.
    pub fn kernel_release(&self) -> &str {
        &self.kernel_release
    }

    /// How long the boot took (QEMU start to network configured).
    pub fn boot_time(&self) -> Duration {
        self.boot_time
    }

    /// QEMU's process id.
    pub fn qemu_pid(&self) -> u32 {
        self.qemu.id()
    }

    /// The host directory the guest sees read-write at [`GUEST_SHARE`]: files put here are
    /// there, and the other way round.
    pub fn share_dir(&self) -> PathBuf {
        self.dir.join("share")
    }

    /// The guest's work directory on the host (console log, QEMU log, share, socket).
    pub fn work_dir(&self) -> &Path {
        &self.dir
    }

    /// The kernel console log (serial port) on the host.
    pub fn console_path(&self) -> PathBuf {
        self.dir.join("console.log")
    }

    /// The last `n` lines of the console log.
    pub fn console_tail(&self, n: usize) -> String {
        file_tail(&self.console_path(), n)
    }

    /// Keeps the work directory after drop (the path is printed then).
    pub fn keep_dir(&mut self) {
        self.keep = true;
    }

    fn send(&self, line: &str) -> Result<()> {
        self.writer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .write_all(line.as_bytes())
            .map_err(|e| Error::AgentGone {
                reason: format!("write to the agent: {e}"),
                tail: file_tail(&self.console_path(), 40),
            })
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        let _ = self.qemu.kill();
        let _ = self.qemu.wait();
        if let Ok(s) = self.writer.lock() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        for nic in &self.nics {
            let _ = crate::host("ip", &["-n", &self.config.netns, "link", "del", &nic.tap]);
        }
        finish_dir(&self.dir, self.keep);
    }
}

/// Removes a work directory, or keeps it (and says where) when a test is failing or the user
/// asked to.
fn finish_dir(dir: &Path, keep: bool) {
    if keep || std::thread::panicking() || std::env::var_os(crate::ENV_KEEP).is_some() {
        eprintln!("srp-interop: guest work directory kept: {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// The boot's resources until the [`Guest`] owns them: a failed boot kills QEMU, removes the
/// taps and keeps the work directory for the console log.
struct Booting {
    qemu: Option<Child>,
    dir: PathBuf,
    console: PathBuf,
    netns: String,
    taps: Vec<String>,
}

impl Booting {
    fn check_alive(&mut self) -> Result<()> {
        let exited = self.qemu.as_mut().and_then(|q| q.try_wait().ok().flatten());
        match exited {
            Some(status) => {
                let log = file_tail(&self.dir.join("qemu.log"), 20);
                Err(self.fail(&format!("QEMU exited ({status}): {log}")))
            }
            None => Ok(()),
        }
    }

    fn fail(&mut self, reason: &str) -> Error {
        if let Some(mut q) = self.qemu.take() {
            let _ = q.kill();
            let _ = q.wait();
        }
        // QEMU's own internal assertions (seen under TCG: `iotlb_to_section` in
        // system/physmem.c while the guest's PCI BARs were being set up) are QEMU's bug,
        // not the guest's or ours: say so, so the boot is tried again.
        let log = file_tail(&self.dir.join("qemu.log"), 5);
        let aborted = if log.contains("Assertion") {
            format!("; {QEMU_ABORTED}: {}", log.trim())
        } else {
            String::new()
        };
        Error::Boot {
            reason: format!("{reason}{aborted} (work directory {})", self.dir.display()),
            console: self.console.clone(),
            tail: file_tail(&self.console, 40),
        }
    }
}

impl Drop for Booting {
    fn drop(&mut self) {
        if let Some(mut q) = self.qemu.take() {
            let _ = q.kill();
            let _ = q.wait();
        }
        for tap in &self.taps {
            let _ = crate::host("ip", &["-n", &self.netns, "link", "del", tap]);
        }
    }
}

/// The reader thread: turns the agent's lines into state changes.
fn read_agent(stream: UnixStream, shared: &Shared) {
    let reader = BufReader::new(stream);
    for line in reader.lines() {
        let Ok(line) = line else { break };
        let mut words = line.split_whitespace();
        let mut st = shared.lock();
        match (words.next(), words.next(), words.next()) {
            (Some("PONG"), Some(n), _) => {
                if let Ok(n) = n.parse::<u64>() {
                    st.pong = st.pong.max(n);
                }
            }
            (Some("READY"), _, _) => st.ready = true,
            (Some("DONE"), Some(id), Some(rc)) => {
                if let (Ok(id), Ok(rc)) = (id.parse(), rc.parse()) {
                    st.done.insert(id, rc);
                }
            }
            _ => {}
        }
        drop(st);
        shared.cond.notify_all();
    }
    shared.lock().closed = true;
    shared.cond.notify_all();
}
