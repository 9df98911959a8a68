//! The daemon end to end: started from a config text (a RAM LUN and a file LUN in a temp
//! dir, two IOCs), it serves a test initiator built on the access layer (GSI port, CM
//! endpoint, hca verbs) on loopback 127.0.100.x: logins in both forms (IB CM to the IOC's
//! service ID, RDMA-CM to port 5555), WRITE then READ with a data check on each LUN, an ACL
//! reject (SRP_LOGIN_REJ 0x00010003), a SINGLE re-login that ends the earlier channel with
//! T_LOGOUT reason 4, and T_LOGOUT to the live channel on shutdown.

mod common;
mod host;

use access_layer::cm::CmEvent;
use access_layer::mad::cm::RdmaPortSpace;
use access_layer::mad::{
    AnyMad, MadBody, MadHeader, MadStatus, Method, MgmtClass, ServiceId, Tid, parse_any,
};
use common::TempDir;
use hca::Guid;
use host::{DEADLINE, HOST_GUID, Host, ib_form, login_req, rdma_cm_form};
use srp::wire::login::MultiChannelAction;
use srp::wire::logout::{TLogout, TLogoutReason};
use srp::wire::{IoClass, PortId, Tag};
use srp_target::config::TargetConfig;
use srp_target::daemon::{Daemon, DaemonEvent, DaemonOptions};
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};
use wirekit::WireRepr;

const TARGET: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 100, 1));
const HOST: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 100, 2));

fn config_text(dir: &TempDir) -> String {
    format!(
        r#"
[target]
node_guid = "0x0002c90300a1b2c0"
name = "e2e"
rdma_cm_port = 5556

[[port]]
name = "p0"
address = "127.0.100.1"

[[lun]]
name = "ram0"
ram = true
size = "1MiB"

[[lun]]
name = "file0"
file = "{}"
size = "1MiB"

[[ioc]]
name = "ioc-a"
guid = "0x0002c90300a1b2c3"
ports = ["p0"]
exports = {{ 0 = "ram0", 1 = "file0" }}
allow = ["any"]

[[ioc]]
name = "ioc-b"
guid = "0x0002c90300a1b2c4"
ports = ["p0"]
exports = {{ 0 = "file0" }}
allow = ["guid:0002:c903:00be:ef02"]
"#,
        dir.path().join("file0.img").display()
    )
}

fn drain(d: &Daemon) -> Vec<DaemonEvent> {
    d.events().try_iter().collect()
}

#[test]
fn daemon_serves_both_login_forms_rejects_by_acl_and_logs_out_on_shutdown() {
    let dir = TempDir::new("daemon");
    let text = config_text(&dir);
    let config = TargetConfig::from_str(&text, "e2e.toml")
        .expect("config valid")
        .config;
    let ioc_a = config.iocs[0].clone();
    let ioc_b = config.iocs[1].clone();
    let rdma_cm_port = config.target.rdma_cm_port;
    assert_eq!(rdma_cm_port, 5556, "the config key is honoured");
    let mut options = DaemonOptions::new(providers::system());
    // Small channels: each login registers window × max transfer of bounce buffers.
    options.limits.window = 16;
    options.limits.max_transfer = 256 << 10;
    options.limits.max_table_entries = 64;
    let daemon = Daemon::start(config, options).expect("daemon starts");
    assert_eq!(daemon.started().iocs.len(), 2, "{:?}", daemon.started());
    let mut host = Host::open(HOST, TARGET);
    let me = PortId::new(0, Guid(HOST_GUID), IoClass::SrpR16a);

    // IB CM form, to ioc-a's service ID: WRITE then READ on the file LUN.
    let ep1 = host.ep(0);
    let (_c1, rsp) = host
        .login(
            &ep1,
            ioc_a.service_id,
            ib_form(&login_req(
                me,
                ioc_a.target_port_id(),
                MultiChannelAction::Single,
            )),
        )
        .expect("IB CM login accepted");
    assert_eq!(rsp.tag, Tag(0x77));
    assert!(rsp.req_lim_delta > 0);
    host.write_read(&ep1, 1, 3);

    // The ACL of ioc-b admits another GUID only: LOGIN_REJ 0x00010003.
    let ep_denied = host.ep(1);
    let rej = host
        .login(
            &ep_denied,
            ioc_b.service_id,
            ib_form(&login_req(
                me,
                ioc_b.target_port_id(),
                MultiChannelAction::Single,
            )),
        )
        .expect_err("ACL denies the login");
    assert_eq!(rej, 0x0001_0003);

    // RDMA-CM form, same nexus, SINGLE: the first channel gets T_LOGOUT reason 4.
    let ep2 = host.ep(2);
    let service = ServiceId::rdma_ip(RdmaPortSpace::Tcp, rdma_cm_port);
    host.login(
        &ep2,
        service,
        rdma_cm_form(
            &login_req(me, ioc_a.target_port_id(), MultiChannelAction::Single),
            HOST,
            TARGET,
        ),
    )
    .unwrap_or_else(|e| panic!("RDMA-CM login: {e:#x}: {:?}", drain(&daemon)));
    let iu = host.await_iu(&ep1);
    let l = TLogout::parse(&iu).expect("T_LOGOUT");
    assert_eq!(l.reason, TLogoutReason::MultiChannelAction);
    host.write_read(&ep2, 0, 9);

    let events = drain(&daemon);
    let logins = events
        .iter()
        .filter(|e| matches!(e, DaemonEvent::Login { .. }))
        .count();
    assert_eq!(logins, 2, "{events:?}");
    assert!(
        events.iter().any(|e| matches!(
            e,
            DaemonEvent::Rejected {
                code: 0x0001_0003,
                ..
            }
        )),
        "{events:?}"
    );

    // Shutdown: T_LOGOUT on the live channel, then DREQ; the host keeps answering MADs.
    let stopper = std::thread::spawn(move || daemon.shutdown());
    let iu = host.await_iu(&ep2);
    let l = TLogout::parse(&iu).expect("T_LOGOUT on shutdown");
    assert_eq!(l.reason, TLogoutReason::NoReason);
    let end = Instant::now() + DEADLINE;
    while !stopper.is_finished() {
        assert!(Instant::now() < end, "shutdown did not finish");
        host.pump();
        std::thread::sleep(Duration::from_micros(200));
    }
    let last = stopper.join().expect("shutdown");
    assert!(
        last.iter().any(
            |e| matches!(e, DaemonEvent::Logout { reason, .. } if reason.contains("shutting down"))
        ),
        "{last:?}"
    );
    assert!(
        host.events
            .iter()
            .any(|e| matches!(e, CmEvent::DisconnectRequested { .. })),
        "the target sent DREQ: {:?}",
        host.events
    );
}

/// The attribute of a DM answer, chosen by `pick`; the answer must be a success.
fn dm_attr<T>(
    m: &access_layer::mad::MadBuf,
    pick: impl FnOnce(access_layer::mad::DmAttribute<'_>) -> Option<T>,
) -> T {
    use access_layer::mad::{MadBody, MadStatus, parse_any};
    let parsed = parse_any(&m.0).expect("DM answer parses");
    assert_eq!(
        parsed.header.status,
        MadStatus::Success,
        "{:?}",
        parsed.header
    );
    let MadBody::Dm { attr, .. } = parsed.body else {
        panic!("not a DM answer")
    };
    pick(attr).expect("the attribute asked for")
}

/// Device Management on the daemon's port: IOUnitInfo lists both IOCs, each profile is the
/// IOC's, and its service entry names "SRP.T10:<id_ext>" with the CM service ID a host then
/// logs in to.
#[test]
fn device_management_describes_every_ioc_on_the_port() {
    use access_layer::mad::DmAttribute as A;
    use access_layer::mad::dm::DmAttr;
    const T: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 100, 11));
    const H: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 100, 12));
    let dir = TempDir::new("daemon-dm");
    let text = config_text(&dir).replace("127.0.100.1\"", "127.0.100.11\"");
    let config = TargetConfig::from_str(&text, "dm.toml")
        .expect("config valid")
        .config;
    let iocs = config.iocs.clone();
    let mut options = DaemonOptions::new(providers::system());
    options.limits.window = 16;
    options.limits.max_transfer = 256 << 10;
    let daemon = Daemon::start(config, options).expect("daemon starts");
    let mut host = Host::open(H, T);

    let info = dm_attr(&host.dm_get(DmAttr::IouInfo, 0, 1), |a| match a {
        A::IouInfo(i) => Some(i),
        _ => None,
    });
    assert!(info.slot(1).is_some() && info.slot(2).is_some(), "{info:?}");
    for (slot, ioc) in (1u32..).zip(&iocs) {
        let tid = 10 * u64::from(slot);
        let p = dm_attr(&host.dm_get(DmAttr::IocProfile, slot, tid), |a| match a {
            A::IocProfile(p) => Some(p),
            _ => None,
        });
        assert_eq!(p.guid, ioc.guid);
        assert_eq!(p.service_entries, 1);
        // ServiceEntries modifier: slot << 16 | last << 8 | first (entries 0..=0).
        let se = dm_attr(
            &host.dm_get(DmAttr::ServiceEntries, slot << 16, tid + 1),
            |a| match a {
                A::ServiceEntries(s) => Some(s),
                _ => None,
            },
        );
        assert_eq!(se.entries[0].srp_id_ext(), Some(ioc.id_ext));
        assert_eq!(se.entries[0].service_id, ioc.service_id);
    }

    // A Get of a class the target does not serve (a vendor class, and SA) is answered
    // "class or version not supported", echoing the TID, not left to time out.
    for (tid, class) in [
        (0x77, MgmtClass::from(0x09u8)),
        (0x78, MgmtClass::from(0x03u8)),
    ] {
        let mad = AnyMad {
            header: MadHeader::request(class, 1, Method::Get, Tid(tid), 0x0010, 0),
            body: MadBody::Raw(&[0; 232]),
        }
        .to_buf()
        .expect("request");
        let raw = host.get_raw(mad, tid);
        let answer = parse_any(&raw.0).expect("answer parses");
        assert!(answer.header.response);
        assert_eq!(answer.header.mgmt_class, class);
        assert_eq!(answer.header.status, MadStatus::BadVersion, "{answer:?}");
    }
    drop(daemon.shutdown());
}
