//! Issue #17: a changed target.toml applied to the running daemon, with the access-layer
//! initiator logged in. A LUN added and exported (the hosts of that IOC get REPORTED LUNS
//! DATA HAS CHANGED, REPORT LUNS lists it, I/O runs on it); an ACL narrowed (the host it no
//! longer admits is logged out and refused, the other goes on); a LUN grown (CAPACITY DATA
//! HAS CHANGED, the new blocks served) and never shrunk; an ALUA state changed; an IOC
//! added (listened on, logins served) and removed (its sessions logged out); and every
//! reload that cannot be applied — a file that is not valid, a change that takes a restart,
//! a new LUN that cannot be opened — refused with its reasons while the running target
//! stays exactly as it was: same configuration, same LUNs, no unit attention, sessions and
//! I/O untouched. Over the control socket too (`srpctl target reload` / `config`).
//! Loopback 127.0.148.x only.

mod common;
mod host;

use common::{TempDir, pattern, read10, write10};
use host::node::{Answer, Form, Node};
use scsi::SenseCode;
use srp_target::config::TargetConfig;
use srp_target::control::{ClientError, ControlError, TargetClient};
use srp_target::daemon::{Daemon, DaemonOptions};
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

const HOST_A: u64 = 0x0002_c903_00ab_0a01;
const HOST_B: u64 = 0x0002_c903_00ab_0b01;

fn ip(host: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 148, host))
}

/// The target.toml of these tests, with `extra` LUNs, `exports` for ioc-a, its `allow`
/// list, vol1's `size`, and `more` appended.
struct Text<'a> {
    size: &'a str,
    extra: &'a str,
    exports: &'a str,
    allow: &'a str,
    alua: &'a str,
    more: &'a str,
}

impl Default for Text<'_> {
    fn default() -> Self {
        Text {
            size: "1MiB",
            extra: "",
            exports: "{ 0 = \"vol1\" }",
            allow: "[\"guid:0x0002c90300ab0a01\", \"guid:0x0002c90300ab0b01\"]",
            alua: "active/optimized",
            more: "",
        }
    }
}

/// Fields drop in order: the daemon (and its control socket in `dir`) before `dir`.
struct Rig {
    daemon: Daemon,
    dir: TempDir,
    t: u8,
    file: PathBuf,
}

/// The file's text for the rig in `dir` on 127.0.148.`addr`.
fn text_for(dir: &Path, addr: u8, t: &Text<'_>) -> String {
    format!(
        "[target]\nnode_guid = \"0x0002c90300ab0000\"\nstate_dir = \"{state}\"\n\
             control_socket = \"{sock}\"\n\n\
             [[port]]\nname = \"p0\"\naddress = \"{addr}\"\n\n\
             [[lun]]\nname = \"vol1\"\nfile = \"{vol1}\"\nsize = \"{size}\"\n\n{extra}\n\
             [[ioc]]\nname = \"ioc-a\"\nguid = \"0x0002c90300ab00a1\"\nports = [\"p0\"]\n\
             alua = \"{alua}\"\nexports = {exports}\nallow = {allow}\n{more}",
        state = dir.join("state").display(),
        sock = dir.join("target.sock").display(),
        addr = ip(addr),
        vol1 = dir.join("vol1.img").display(),
        size = t.size,
        extra = t.extra,
        alua = t.alua,
        exports = t.exports,
        allow = t.allow,
        more = t.more,
    )
}

impl Rig {
    fn text(&self, t: &Text<'_>) -> String {
        text_for(self.dir.path(), self.t, t)
    }

    fn new(t: u8) -> Rig {
        let dir = TempDir::new("daemon-reload");
        let file = dir.path().join("target.toml");
        std::fs::write(&file, text_for(dir.path(), t, &Text::default())).expect("write config");
        let config = TargetConfig::from_path(&file).expect("valid").config;
        let mut options = DaemonOptions::new(providers::system());
        options.limits.window = 8;
        options.limits.max_transfer = 64 << 10;
        options.shutdown_step = std::time::Duration::from_millis(300);
        options.control_socket = Some(config.target.control_socket.clone());
        options.config_path = Some(file.clone());
        let daemon = Daemon::start(config, options).expect("daemon starts");
        Rig {
            daemon,
            dir,
            t,
            file,
        }
    }

    fn write(&self, t: &Text<'_>) {
        std::fs::write(&self.file, self.text(t)).expect("write config");
    }

    fn config(&self) -> TargetConfig {
        TargetConfig::from_path(&self.file).expect("valid").config
    }

    fn node(&self, host: u8, guid: u64, ioc: usize) -> Node {
        Node::open(
            ip(host),
            ip(self.t),
            guid,
            &self.config().iocs[ioc],
            Form::IbCm,
            false,
        )
    }

    fn client(&self) -> TargetClient {
        TargetClient::connect(self.dir.path().join("target.sock")).expect("control socket")
    }
}

fn report_luns(n: &mut Node) -> Vec<u64> {
    let cdb = [0xa0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0];
    let d = n.good(0, &cdb, &[], 256);
    let len = u32::from_be_bytes([d[0], d[1], d[2], d[3]]) as usize;
    d[8..8 + len]
        .chunks(8)
        .map(|c| u64::from_be_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

fn capacity(n: &mut Node, lun: u32) -> u64 {
    let cdb = [0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0];
    let d = n.good(lun, &cdb, &[], 32);
    u64::from_be_bytes(d[0..8].try_into().expect("8 bytes")) + 1
}

/// The next command's answer is CHECK CONDITION with `code` (the unit attention).
fn unit_attention(n: &mut Node, lun: u32, code: SenseCode) {
    n.check(lun, &[0, 0, 0, 0, 0, 0], &[], 0, code);
}

fn logged_out(n: &mut Node) {
    let tag = n.next_tag();
    let (iu, segs) = n.cmd(
        tag,
        0,
        &[0, 0, 0, 0, 0, 0],
        host::node::Out::None,
        host::node::In::None,
    );
    n.host.send(&n.ep, &iu);
    match n.answer(&segs) {
        Answer::Logout(_) => {}
        Answer::Rsp(r) => {
            // The command raced the logout: the T_LOGOUT follows.
            assert!(matches!(n.answer(&[]), Answer::Logout(_)), "{r:?}");
        }
    }
}

#[test]
fn a_lun_added_and_an_acl_narrowed_apply_live() {
    let rig = Rig::new(1);
    let mut a = rig.node(2, HOST_A, 0);
    let mut b = rig.node(3, HOST_B, 0);
    a.write_read(0, 0, 1);
    b.write_read(0, 8, 2);
    let before = rig.client().running_config().expect("config");
    assert!(!before.contains("vol2"));
    rig.write(&Text {
        extra: "[[lun]]\nname = \"vol2\"\nram = true\nsize = \"2MiB\"\nblock_size = 4096\n",
        exports: "{ 0 = \"vol1\", 1 = \"vol2\" }",
        allow: "[\"guid:0x0002c90300ab0a01\"]",
        ..Text::default()
    });
    let report = rig.client().reload().expect("reloaded");
    assert_eq!(report.sessions_ended, 1, "{report:?}");
    assert_eq!(
        report.changes,
        [
            "lun vol2 added: ram (2097152 bytes)",
            "ioc ioc-a: exports LUN 0 = vol1, LUN 1 = vol2",
            "ioc ioc-a: ACL changed; sessions it no longer admits are logged out",
        ]
    );
    // A: told, then sees and uses the new LUN; its data on LUN 0 is as it was.
    unit_attention(&mut a, 0, SenseCode::REPORTED_LUNS_DATA_HAS_CHANGED);
    assert_eq!(report_luns(&mut a), [0, 0x0001_0000_0000_0000]);
    assert_eq!(capacity(&mut a, 1), 512);
    let data = pattern(4096, 9);
    a.good(1, &write10(3, 1, false), &data, 0);
    assert_eq!(a.good(1, &read10(3, 1), &[], 4096), data);
    assert_eq!(a.good(0, &read10(0, 8), &[], 4096), pattern(4096, 1));
    // B: logged out, and refused from now on.
    logged_out(&mut b);
    let refused = Node::try_open(
        ip(4),
        ip(1),
        HOST_B,
        &rig.config().iocs[0],
        Form::IbCm,
        false,
    );
    assert!(refused.is_err(), "the narrowed ACL refuses host B");
    // The running configuration is the file's.
    let after = rig.client().running_config().expect("config");
    let shown = TargetConfig::from_str(&after, "shown")
        .expect("valid")
        .config;
    assert_eq!(shown, rig.config());
    // The same file again: nothing to do.
    assert!(rig.daemon.reload().expect("reloaded").changes.is_empty());
}

#[test]
fn a_refused_reload_leaves_the_running_target_untouched() {
    let rig = Rig::new(10);
    let mut a = rig.node(11, HOST_A, 0);
    a.write_read(0, 0, 3);
    let mut c = rig.client();
    let config = c.running_config().expect("config");
    let luns = c.luns().expect("luns").len();
    let untouched = |a: &mut Node, c: &mut TargetClient| {
        assert_eq!(c.running_config().expect("config"), config);
        assert_eq!(c.luns().expect("luns").len(), luns);
        assert_eq!(c.sessions().expect("sessions").len(), 1);
        // No unit attention: the next command runs, and the data is there.
        assert_eq!(a.good(0, &read10(0, 8), &[], 4096), pattern(4096, 3));
        assert_eq!(report_luns(a), [0]);
    };
    // A file that is not valid.
    std::fs::write(&rig.file, "[target\nnode_guid = 1").expect("write");
    match c.reload() {
        Err(ClientError::Refused(ControlError::InvalidConfig(why))) => {
            assert!(why.contains("target.toml"), "{why}");
        }
        other => panic!("{other:?}"),
    }
    untouched(&mut a, &mut c);
    // A valid file with a change that takes a restart, beside one that would not: the
    // port's address. Nothing of it is applied: the new LUN's file is not even created.
    let vol3 = rig.dir.path().join("vol3.img");
    let text = rig
        .text(&Text {
            extra: &format!(
                "[[lun]]\nname = \"vol3\"\nfile = \"{}\"\nsize = \"1MiB\"\n",
                vol3.display()
            ),
            exports: "{ 0 = \"vol1\", 1 = \"vol3\" }",
            ..Text::default()
        })
        .replace(
            &format!("address = \"{}\"", ip(10)),
            "address = \"127.0.148.99\"",
        );
    std::fs::write(&rig.file, text).expect("write");
    match c.reload() {
        Err(ClientError::Refused(ControlError::ReloadRefused(why))) => {
            assert_eq!(why.len(), 1, "{why:?}");
            assert!(why[0].starts_with("port p0: changed"), "{why:?}");
        }
        other => panic!("{other:?}"),
    }
    assert!(!vol3.exists(), "nothing of a refused reload is opened");
    untouched(&mut a, &mut c);
    // A new LUN that cannot be opened (a file without a size that does not exist).
    rig.write(&Text {
        extra: &format!("[[lun]]\nname = \"vol3\"\nfile = \"{}\"\n", vol3.display()),
        exports: "{ 0 = \"vol1\", 1 = \"vol3\" }",
        ..Text::default()
    });
    match c.reload() {
        Err(ClientError::Refused(ControlError::ReloadRefused(why))) => {
            assert!(why[0].contains("vol3"), "{why:?}");
        }
        other => panic!("{other:?}"),
    }
    untouched(&mut a, &mut c);
    // A shrink, and an IOC moved from its place.
    rig.write(&Text {
        size: "512KiB",
        ..Text::default()
    });
    match rig.daemon.reload() {
        Err(ControlError::ReloadRefused(why)) => {
            assert!(why[0].starts_with("lun vol1.size: shrinking"), "{why:?}");
        }
        other => panic!("{other:?}"),
    }
    untouched(&mut a, &mut c);
    // After all of it, the original file applies as a no-op and the session goes on.
    rig.write(&Text::default());
    assert!(c.reload().expect("reloaded").changes.is_empty());
    a.write_read(0, 16, 4);
}

#[test]
fn a_grown_lun_and_a_new_alua_state_are_announced() {
    let rig = Rig::new(20);
    let mut a = rig.node(21, HOST_A, 0);
    assert_eq!(capacity(&mut a, 0), 2048);
    rig.write(&Text {
        size: "2MiB",
        alua: "active/non-optimized",
        ..Text::default()
    });
    let report = rig.daemon.reload().expect("reloaded");
    assert_eq!(
        report.changes,
        [
            "lun vol1 grown from 1048576 to 2097152 bytes",
            "ioc ioc-a: ALUA state ActiveNonOptimized"
        ]
    );
    unit_attention(&mut a, 0, SenseCode::CAPACITY_DATA_HAS_CHANGED);
    unit_attention(&mut a, 0, SenseCode::ASYMMETRIC_ACCESS_STATE_CHANGED);
    assert_eq!(capacity(&mut a, 0), 4096);
    assert_eq!(
        std::fs::metadata(rig.dir.path().join("vol1.img"))
            .expect("file")
            .len(),
        2 << 20
    );
    // The new blocks are served, the old ones kept.
    a.write_read(0, 4000, 5);
    // REPORT TARGET PORT GROUPS shows the new state.
    let rtpg = [0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0];
    let d = a.good(0, &rtpg, &[], 256);
    assert_eq!(d[4] & 0x0f, 1, "active/non-optimized");
    // And the file, as the daemon now runs it, reads back to the same configuration.
    let shown = rig.client().running_config().expect("config");
    assert_eq!(
        TargetConfig::from_str(&shown, "shown")
            .expect("valid")
            .config,
        rig.config()
    );
}

#[test]
fn an_ioc_added_serves_logins_and_removed_logs_its_sessions_out() {
    let rig = Rig::new(30);
    let mut a = rig.node(31, HOST_A, 0);
    // The LU learns an I_T nexus by its commands: this one will be told.
    a.write_read(0, 0, 8);
    let ioc_b = "[[lun]]\nname = \"vol2\"\nram = true\nsize = \"1MiB\"\n";
    let more = "\n[[ioc]]\nname = \"ioc-b\"\nguid = \"0x0002c90300ab00b1\"\nports = [\"p0\"]\n\
                exports = { 0 = \"vol2\" }\nallow = [\"any\"]\n";
    rig.write(&Text {
        extra: ioc_b,
        more,
        ..Text::default()
    });
    let report = rig.daemon.reload().expect("reloaded");
    assert_eq!(
        report.changes,
        [
            "lun vol2 added: ram (1048576 bytes)",
            "ioc ioc-b added (relative target port 2)"
        ]
    );
    // A new target port group: hosts of ioc-a are told.
    unit_attention(&mut a, 0, SenseCode::ASYMMETRIC_ACCESS_STATE_CHANGED);
    let mut b = rig.node(32, HOST_B, 1);
    b.write_read(0, 0, 6);
    assert_eq!(rig.client().iocs().expect("iocs").len(), 2);
    // Removed again: its session is logged out, ioc-a's goes on.
    rig.write(&Text::default());
    let report = rig.daemon.reload().expect("reloaded");
    assert_eq!(report.sessions_ended, 1);
    logged_out(&mut b);
    unit_attention(&mut a, 0, SenseCode::ASYMMETRIC_ACCESS_STATE_CHANGED);
    a.write_read(0, 0, 7);
    assert_eq!(rig.client().iocs().expect("iocs").len(), 1);
}

#[test]
fn a_daemon_without_a_file_cannot_reload() {
    let dir = TempDir::new("daemon-reload-nofile");
    let text = format!(
        "[target]\nnode_guid = \"0x0002c90300ab1000\"\nstate_dir = \"{}\"\n\
         [[port]]\nname = \"p0\"\naddress = \"{}\"\n\
         [[lun]]\nname = \"r\"\nram = true\nsize = \"64KiB\"\n\
         [[ioc]]\nname = \"i\"\nguid = \"0x0002c90300ab10a1\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"r\" }}\nallow = [\"any\"]\n",
        dir.path().join("state").display(),
        ip(40)
    );
    let config = TargetConfig::from_str(&text, "mem").expect("valid").config;
    let daemon =
        Daemon::start(config.clone(), DaemonOptions::new(providers::system())).expect("starts");
    assert_eq!(daemon.reload(), Err(ControlError::NoConfigFile));
    // What it can do: apply a configuration handed to it.
    let mut grown = config;
    grown.target.guards.max_channels = 7;
    let r = daemon.apply(grown).expect("applied");
    assert_eq!(
        r.changes,
        ["channel guards changed (idle_probe, max_channels…)"]
    );
}
