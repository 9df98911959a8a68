//! The setting of the daemon_pr and daemon_preempt tests: a running daemon whose two IOCs
//! export one file LUN (as LUN 0 through ioc-a, as LUN 3 through ioc-b), and a [`Channel`]
//! per initiator logged in to one of them.
#![allow(dead_code, unreachable_pub)]

use super::{Ep, Host, ib_form, login_req};
use crate::common::{TempDir, pr_out};
use hca::Guid;
use scsi::Status;
use srp::wire::login::MultiChannelAction;
use srp::wire::{IoClass, PortId};
use srp_target::config::{IocConfig, TargetConfig};
use srp_target::daemon::{Daemon, DaemonOptions};
use std::net::IpAddr;

/// The configuration: port p0 at `target`, node GUID `guid`, ioc-a and ioc-b at `guid + 1`
/// and `guid + 2`, the LUN's file in `dir`.
pub fn config_text(dir: &TempDir, target: IpAddr, guid: u64) -> String {
    format!(
        "[target]\nnode_guid = \"{guid:#018x}\"\n\n\
         [[port]]\nname = \"p0\"\naddress = \"{target}\"\n\n\
         [[lun]]\nname = \"shared\"\nfile = \"{}\"\nsize = \"1MiB\"\n\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"{:#018x}\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"shared\" }}\nallow = [\"any\"]\n\n\
         [[ioc]]\nname = \"ioc-b\"\nguid = \"{:#018x}\"\nports = [\"p0\"]\n\
         exports = {{ 3 = \"shared\" }}\nallow = [\"any\"]\n",
        dir.path().join("shared.img").display(),
        guid + 1,
        guid + 2,
    )
}

/// Starts the daemon of [`config_text`] with a window of 8, 64 KiB transfers and 16 table
/// entries; its configuration (`iocs[0]` is ioc-a, `iocs[1]` ioc-b).
pub fn start(dir: &TempDir, target: IpAddr, guid: u64) -> (Daemon, TargetConfig) {
    let text = config_text(dir, target, guid);
    let config = TargetConfig::from_str(&text, "shared_lun.toml")
        .expect("valid")
        .config;
    let mut options = DaemonOptions::new(providers::system());
    options.limits.window = 8;
    options.limits.max_transfer = 64 << 10;
    options.limits.max_table_entries = 16;
    let daemon = Daemon::start(config.clone(), options).expect("daemon starts");
    (daemon, config)
}

/// One initiator's channel to the shared LUN, numbered `lun` through its IOC.
pub struct Channel {
    pub host: Host,
    pub ep: Ep,
    pub lun: u32,
    pub tag: u64,
}

impl Channel {
    /// A host at `local` with its own GUID, logged in to `ioc` at `target` (IB CM form).
    pub fn log_in(local: IpAddr, target: IpAddr, guid: u64, ioc: &IocConfig, lun: u32) -> Channel {
        let mut host = Host::open_as(local, target, guid);
        let ep = host.ep(0);
        let me = PortId::new(0, Guid(guid), IoClass::SrpR16a);
        let req = login_req(me, ioc.target_port_id(), MultiChannelAction::Single);
        host.login(&ep, ioc.service_id, ib_form(&req))
            .unwrap_or_else(|code| panic!("login rejected: {code:#x}"));
        Channel {
            host,
            ep,
            lun,
            tag: 0,
        }
    }

    /// Sends `cdb` with the next tag; the status and the data-in.
    pub fn run(&mut self, cdb: &[u8], data_out: &[u8], data_in: u32) -> (Status, Vec<u8>) {
        self.tag += 1;
        self.host
            .command(&self.ep, self.tag, self.lun, cdb, data_out, data_in)
    }

    /// PERSISTENT RESERVE OUT `action` with `key` and `sa_key`, reservation type `kind`.
    pub fn pr(&mut self, action: u8, kind: u8, key: u64, sa_key: u64) -> Status {
        let (cdb, params) = pr_out(action, kind, key, sa_key, 0);
        self.run(&cdb, &params, 0).0
    }
}
