//! Both daemons' control sockets refuse other users (issue #14, Deliver 8): the target
//! daemon and the host daemon, real processes on loopback 127.0.144.x, serve their sockets
//! with mode 0600 (0660 and group-owned with `control_group`), and `srpctl` run as `nobody`
//! is refused by each — by the file mode, and, with the mode opened by hand, by the peer
//! credentials check — while root is served. Needs root (to run as another user) and FUSE;
//! bounded; the daemons are stopped even on failure.

#[path = "../../srp-host/tests/common/mod.rs"]
mod block;
mod process;

use block::{TempDir, bounded};
use process::{HostProcess, TargetProcess};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const NOBODY: u32 = 65_534;

fn target_config(dir: &Path, group: &str) -> PathBuf {
    let cfg = dir.join("target.toml");
    let text = format!(
        "[target]\nnode_guid = \"0x0002c90300e4e000\"\nname = \"ctl\"\n\
         control_socket = \"{}\"\n{group}\n\n\
         [[port]]\nname = \"p0\"\naddress = \"127.0.144.1\"\n\n\
         [[lun]]\nname = \"vol\"\nram = true\nsize = \"4MiB\"\n\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"0x0002c90300e4e001\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"vol\" }}\nallow = [\"any\"]\n",
        dir.join("target.sock").display(),
    );
    std::fs::write(&cfg, text).expect("write target config");
    cfg
}

fn host_config(dir: &Path) -> (PathBuf, PathBuf) {
    let cfg = dir.join("host.toml");
    let disks = dir.join("disks");
    let text = format!(
        "[host]\nname = \"ctl-host\"\nnode_guid = \"0x0002c90300e4e100\"\n\
         disks_dir = \"{}\"\ncontrol_socket = \"{}\"\n\n\
         [[portal]]\naddress = \"127.0.144.1\"\nlocal = [\"127.0.144.2\"]\n",
        disks.display(),
        dir.join("host.sock").display()
    );
    std::fs::write(&cfg, text).expect("write host config");
    (cfg, disks)
}

/// `srpctl` copied where `nobody` may run it (the build tree may be private).
fn srpctl_for_nobody(dir: &Path) -> PathBuf {
    let exe = dir.join("srpctl");
    std::fs::copy(env!("CARGO_BIN_EXE_srpctl"), &exe).expect("copy srpctl");
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    exe
}

/// Runs `exe args` as `uid` (bounded); returns (success, stdout + stderr).
fn run_as(exe: &Path, uid: u32, args: &[&str]) -> (bool, String) {
    let mut child = Command::new(exe)
        .args(args)
        .uid(uid)
        .gid(uid)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run srpctl");
    let end = Instant::now() + Duration::from_secs(20);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > end {
            let _ = child.kill();
            panic!("srpctl {args:?} did not finish within 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Asserts root is served on `socket` and `nobody` is refused, by mode then by credentials.
fn check(exe: &Path, socket: &Path, command: &str) {
    let s = socket.to_str().expect("UTF-8");
    let args: Vec<&str> = command.split(' ').chain(["-s", s]).collect();
    let meta = std::fs::symlink_metadata(socket).expect("the socket exists");
    assert_eq!(meta.mode() & 0o777, 0o600, "{s}: owner only");
    let (ok, out) = run_as(exe, 0, &args);
    assert!(ok, "root is served on {s}: {out}");
    let (ok, out) = run_as(exe, NOBODY, &args);
    assert!(!ok, "nobody was served on {s}: {out}");
    assert!(
        out.contains("Permission denied") || out.contains("PermissionDenied"),
        "{s}: refused by the file's mode: {out}"
    );
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let (ok, out) = run_as(exe, NOBODY, &args);
    assert!(!ok, "nobody was served on {s} with the mode open: {out}");
    assert!(
        out.contains("PermissionDenied"),
        "{s}: refused by its credentials: {out}"
    );
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600)).expect("chmod");
}

#[test]
fn other_users_are_refused_by_both_daemons_sockets() {
    if std::fs::metadata("/proc/self").map(|m| m.uid()).ok() != Some(0) {
        eprintln!("SKIP: needs root to run a client as another user");
        return;
    }
    bounded(120, || {
        let dir = TempDir::new("ctl-access");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        let exe = srpctl_for_nobody(dir.path());
        let target_cfg = target_config(dir.path(), "");
        let (host_cfg, disks) = host_config(dir.path());
        let target = TargetProcess::start(&target_cfg);
        let host = HostProcess::start(&host_cfg, &disks);
        check(&exe, &dir.path().join("target.sock"), "target iocs");
        check(&exe, &dir.path().join("host.sock"), "sessions");
        host.stop();
        drop(target);
        // With a control group: group-owned, mode 0660, its members served.
        let target_cfg = target_config(dir.path(), "control_group = \"65534\"");
        let target = TargetProcess::start(&target_cfg);
        let socket = dir.path().join("target.sock");
        let meta = std::fs::symlink_metadata(&socket).expect("the socket exists");
        assert_eq!(meta.mode() & 0o777, 0o660);
        assert_eq!(meta.gid(), NOBODY, "owned by group 65534");
        let (ok, out) = run_as(
            &exe,
            NOBODY,
            &["target", "iocs", "-s", socket.to_str().expect("UTF-8")],
        );
        assert!(ok, "a member of the control group is served: {out}");
        drop(target);
    });
}
