//! Task management through the running daemon: ABORT TASK of a WRITE whose data-out the
//! target is still reading (no SRP_RSP for it, the medium untouched, its credit back on
//! the TMF's response) and of a tag that names nothing; ABORT TASK SET, CLEAR TASK SET and
//! LOGICAL UNIT RESET, each aborting the outstanding WRITE of its LUN only; CLEAR ACA and
//! an unknown function (FUNCTION NOT SUPPORTED: the target never establishes ACA). After
//! each, the channel keeps serving verified I/O. Loopback 127.0.116.x only.

mod common;
mod host;

use common::{TempDir, pattern, read10, write10};
use host::node::{Answer, Form, In, Node, Out, Reply};
use scsi::{SenseCode, Status};
use srp::wire::Tag;
use srp::wire::rsp::TmfResponse;
use srp::wire::tsk_mgmt::TaskMgmtFunction as F;
use srp_target::config::TargetConfig;
use srp_target::daemon::{Daemon, DaemonOptions};
use std::net::{IpAddr, Ipv4Addr};

/// The large WRITE a TMF catches in flight: 256 KiB, 512 blocks at LBA 0.
const BIG: usize = 256 << 10;
const BIG_BLOCKS: u16 = (BIG / 512) as u16;

fn ip(host: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 116, host))
}

/// A daemon at 127.0.116.`t` with RAM LUN 0 and file LUN 1, and a node at `t`+1 logged in
/// in `form`, LUN 0 holding `pattern(BIG, 1)` at LBA 0.
fn rig(t: u8, form: Form) -> (Daemon, Node, TempDir) {
    let dir = TempDir::new("daemon-tmf");
    let text = format!(
        "[target]\nnode_guid = \"0x0002c90300d6c600\"\nrdma_cm_port = 5572\n\n\
         [[port]]\nname = \"p0\"\naddress = \"{}\"\n\n\
         [[lun]]\nname = \"ram\"\nram = true\nsize = \"4MiB\"\n\n\
         [[lun]]\nname = \"file\"\nfile = \"{}\"\nsize = \"1MiB\"\n\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"0x0002c90300d6c601\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"ram\", 1 = \"file\" }}\nallow = [\"any\"]\n",
        ip(t),
        dir.path().join("file.img").display(),
    );
    let config = TargetConfig::from_str(&text, "tmf.toml")
        .expect("config valid")
        .config;
    let mut options = DaemonOptions::new(providers::system());
    options.limits.window = 16;
    options.limits.max_transfer = BIG as u64;
    options.limits.max_table_entries = 64;
    options.shutdown_step = std::time::Duration::from_millis(300);
    let daemon = Daemon::start(config.clone(), options).expect("daemon starts");
    let mut node = Node::open(ip(t + 1), ip(t), 0xc001, &config.iocs[0], form, false);
    node.good(0, &write10(0, BIG_BLOCKS, false), &pattern(BIG, 1), 0);
    (daemon, node, dir)
}

/// The next `n` SRP_RSPs, in arrival order.
fn replies(node: &mut Node, n: usize) -> Vec<Reply> {
    (0..n)
        .map(|_| match node.answer(&[]) {
            Answer::Rsp(r) => r,
            Answer::Logout(reason) => panic!("T_LOGOUT {reason:?}"),
        })
        .collect()
}

/// The big WRITE of `pattern(BIG, seed)` to LUN 0 as an IU with tag `tag`.
fn big_write(node: &Node, tag: u64, seed: u8) -> Vec<u8> {
    let data = pattern(BIG, seed);
    let (iu, _) = node.cmd(
        tag,
        0,
        &write10(0, BIG_BLOCKS, false),
        Out::Direct(&data),
        In::None,
    );
    iu
}

/// The aborted WRITE got no SRP_RSP (the next answer is a new command's), never reached
/// LUN 0, and the channel serves verified I/O on both LUNs.
fn assert_aborted_and_alive(node: &mut Node) {
    assert_eq!(node.good(0, &[0; 6], &[], 0), Vec::<u8>::new(), "TUR");
    let back = node.good(0, &read10(0, BIG_BLOCKS), &[], BIG as u32);
    assert!(
        back == pattern(BIG, 1),
        "the aborted WRITE reached the medium"
    );
    node.write_read(0, 1000, 7);
    node.write_read(1, 8, 9);
}

#[test]
fn abort_task_of_an_outstanding_write_and_of_an_unknown_tag() {
    let (_daemon, mut node, _dir) = rig(1, Form::IbCm);
    // ABORT TASK naming nothing: FUNCTION COMPLETE (SAM-5 7.2: the task is not there, so
    // the function is done), one credit back.
    let r = node.tmf(0, F::AbortTask, 0xdead);
    assert_eq!(
        (r.tmf, r.credits),
        (Some(TmfResponse::Complete), 1),
        "{r:?}"
    );
    assert_eq!((r.status, r.sense.is_none()), (Status::Good, true));
    node.write_read(0, 1000, 3);

    // A 256 KiB WRITE and, right behind it, ABORT TASK of its tag: the target is still
    // reading the data-out when the TMF arrives.
    let (w, t) = (node.next_tag(), node.next_tag());
    let ius = [big_write(&node, w, 2), node.tmf_iu(t, 0, F::AbortTask, w)];
    let before = node.cred_reqs;
    node.send_all(&ius);
    let r = replies(&mut node, 1).remove(0);
    assert_eq!(
        (r.tag, r.tmf),
        (Tag(t), Some(TmfResponse::Complete)),
        "ABORT TASK answered first, nothing for the WRITE: {r:?}"
    );
    assert_eq!(
        r.credits + node.cred_reqs - before,
        2,
        "the aborted WRITE's credit comes back with the TMF's"
    );
    assert_aborted_and_alive(&mut node);
}

/// `function` on LUN 0 while a big WRITE is outstanding there and a small one on LUN 1:
/// only LUN 0's is aborted.
fn task_set_function(node: &mut Node, function: F) {
    let small = pattern(4096, 0x33);
    let (w0, w1, t) = (node.next_tag(), node.next_tag(), node.next_tag());
    // Its data-out sits after the big WRITE's.
    let at = host::node::OUT + BIG as u64 + 8192;
    let w1_cdb = write10(64, 8, false);
    let (w1_iu, _) = node.cmd_at(at, w1, 1, &w1_cdb, Out::Direct(&small), In::None);
    let ius = [
        big_write(node, w0, 5),
        w1_iu,
        node.tmf_iu(t, 0, function, 0),
    ];
    let before = node.cred_reqs;
    node.send_all(&ius);
    let mut rs = replies(node, 2);
    rs.sort_by_key(|r| r.tag.0);
    let (r1, rt) = (&rs[0], &rs[1]);
    assert_eq!(
        (r1.tag, r1.status, r1.tmf),
        (Tag(w1), Status::Good, None),
        "{function:?}: LUN 1's WRITE completes: {rs:?}"
    );
    assert_eq!(
        (rt.tag, rt.tmf),
        (Tag(t), Some(TmfResponse::Complete)),
        "{function:?}: {rs:?}"
    );
    assert_eq!(
        r1.credits + rt.credits + node.cred_reqs - before,
        3,
        "{function:?}: every credit back, the aborted WRITE's too"
    );
    let back = node.good(1, &read10(64, 8), &[], 4096);
    assert!(
        back == small,
        "{function:?}: LUN 1's WRITE not on the medium"
    );
    // LOGICAL UNIT RESET leaves BUS DEVICE RESET FUNCTION OCCURRED for every I_T nexus,
    // this one included (SAM-5; exec/ua.rs), reported once; the task set functions none.
    if function == F::LogicalUnitReset {
        let r = node.direct(0, &[0; 6], &[], 0);
        let ua = (
            Status::CheckCondition,
            Some(SenseCode::BUS_DEVICE_RESET_FUNCTION_OCCURRED),
        );
        assert_eq!(r.outcome(), ua, "{r:?}");
    }
    assert_aborted_and_alive(node);
}

#[test]
fn abort_task_set_clear_task_set_and_lun_reset_abort_their_lun_only() {
    let (_daemon, mut node, _dir) = rig(11, Form::RdmaCm(5572));
    for f in [F::AbortTaskSet, F::ClearTaskSet, F::LogicalUnitReset] {
        task_set_function(&mut node, f);
    }
}

#[test]
fn clear_aca_and_unknown_functions_are_not_supported() {
    let (_daemon, mut node, _dir) = rig(21, Form::IbCm);
    // CLEAR ACA: the target never establishes ACA (NACA is not supported), so the function
    // is answered FUNCTION NOT SUPPORTED, as the channel core documents.
    for (f, lun) in [
        (F::ClearAca, 0),
        (F::ClearAca, 1),
        (F::Unknown(0x20), 0),
        (F::Unknown(0x80), 0),
    ] {
        let r = node.tmf(lun, f, 0);
        assert_eq!(
            (r.tmf, r.credits, r.status),
            (Some(TmfResponse::NotSupported), 1, Status::Good),
            "{f:?}: {r:?}"
        );
        node.write_read(lun, 2000, 11);
    }
    // A TMF to a LUN the IOC does not export changes nothing and the channel stays.
    // FAILED, as ib_srpt answers (LIO's "LUN does not exist"; SAM-5's INCORRECT LOGICAL
    // UNIT NUMBER has no r16a code), for every LUN-addressed function.
    for f in [
        F::LogicalUnitReset,
        F::AbortTaskSet,
        F::ClearTaskSet,
        F::AbortTask,
    ] {
        let r = node.tmf(9, f, 0);
        assert_eq!(
            (r.tmf, r.credits),
            (Some(TmfResponse::Failed), 1),
            "{f:?}: {r:?}"
        );
    }
    assert_aborted_and_alive(&mut node);
}

#[test]
fn abort_task_names_a_task_of_its_own_lun_only() {
    let (_daemon, mut node, _dir) = rig(31, Form::IbCm);
    // ABORT TASK addresses the I_T_L_Q nexus (SAM-5 7.2): naming LUN 0's WRITE through
    // LUN 1 finds no task; the function completes and the WRITE goes on.
    let (w, t) = (node.next_tag(), node.next_tag());
    let ius = [big_write(&node, w, 4), node.tmf_iu(t, 1, F::AbortTask, w)];
    node.send_all(&ius);
    let mut rs = replies(&mut node, 2);
    rs.sort_by_key(|r| r.tag.0);
    assert_eq!(
        (rs[0].tag, rs[0].status, rs[1].tag, rs[1].tmf),
        (Tag(w), Status::Good, Tag(t), Some(TmfResponse::Complete)),
        "{rs:?}"
    );
    let back = node.good(0, &read10(0, BIG_BLOCKS), &[], BIG as u32);
    assert!(back == pattern(BIG, 4), "the WRITE reached the medium");
}
