//! `srpctl demo --wire`: the messages a host and a target exchange to discover each other, log in
//! and move data, built on embedded defaults and pushed through the real codecs.
//!
//! Each message is built by one side, emitted to bytes, parsed by the other side, and
//! re-emitted; the demo fails if the parsed value differs or a single byte changes. What the
//! receiving side learns from the bytes (the IOC GUID and service ID from discovery, the port
//! identifiers from the login, the LBA from the CDB, the sense from the response) is what the
//! next step uses. No packets cross a fabric here: `srpctl demo` (the live demo) does that.

use crate::hex;
use access_layer::mad::cm::{CmPath, CmRep, CmReq, CmaHeader, RdmaPortSpace};
use access_layer::mad::dm::{DmAttr, IocProfile, IouInfo, ServiceEntries, ServiceEntry, SlotState};
use access_layer::mad::{
    AnyMad, CmMessage, CommId, DmAttribute, MadBody, MadHeader, MadStatus, Method, MgmtClass, Mtu,
    PrivateData, ServiceId, Tid,
};
use anyhow::{Context, Result, anyhow, bail, ensure};
use ib_verbs::{Gid, Guid, Lid, PKey, Psn, Qpn, Rkey};
use scsi::Lun;
use scsi::cdb::{Command, ReadWrite, RwCdb};
use scsi::sense::{Sense, SenseCode};
use scsi::status::Status;
use scsi::units::{BlockCount, Lba};
use srp::wire::cmd::{Cmd, DEFAULT_IMM_DATA_OFFSET, TaskAttr};
use srp::wire::desc::{DataDesc, DirectBuf};
use srp::wire::login::{
    BufFormats, LoginReq, LoginReqFlags, LoginRsp, LoginRspFlags, MultiChannelAction,
    MultiChannelResult,
};
use srp::wire::rsp::{Residual, Rsp};
use srp::wire::{IoClass, PortId, SolicitFlags, Tag};
use std::fmt::Debug;
use std::net::{IpAddr, Ipv4Addr};
use wirekit::WireRepr;

/// The embedded defaults: one target with one IOC and one 1 GiB LUN, one host.
struct Defaults {
    target_ip: IpAddr,
    host_ip: IpAddr,
    target_node_guid: Guid,
    ioc_guid: Guid,
    id_ext: u64,
    rdma_cm_port: u16,
    host_port_guid: Guid,
    initiator_ext: u64,
    lun: Lun,
    block_size: u32,
    capacity_blocks: u64,
    max_it_iu_len: u32,
    credits: u32,
}

impl Defaults {
    fn embedded() -> Self {
        Defaults {
            target_ip: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)),
            host_ip: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3)),
            target_node_guid: Guid(0x5352_5054_0000_0002),
            ioc_guid: Guid(0x5352_5054_0000_0002),
            id_ext: 0x5352_5054_0000_0002,
            rdma_cm_port: 5555,
            host_port_guid: Guid(0x5352_5048_0000_0003),
            initiator_ext: 0,
            lun: Lun::ZERO,
            block_size: 512,
            capacity_blocks: (1 << 30) / 512,
            max_it_iu_len: 8276,
            credits: 128,
        }
    }
}

/// Prints each step and checks each message's bytes.
struct Walk {
    dump: bool,
    messages: usize,
    bytes: usize,
}

impl Walk {
    fn step(&self, title: &str) {
        println!("\n{title}");
    }

    /// Emits `value`, parses the bytes back, re-emits them, and checks both agree.
    fn check<'a, T>(&mut self, who: &str, value: &T, buf: &'a mut Vec<u8>) -> Result<&'a [u8]>
    where
        T: WireRepr<'a> + PartialEq + Debug,
    {
        buf.clear();
        buf.resize(value.buffer_len(), 0);
        let n = value
            .emit(buf)
            .map_err(|e| anyhow!("{who}: emit failed: {e:?}"))?;
        let bytes: &'a [u8] = &buf[..n];
        let back = T::parse(bytes).map_err(|e| anyhow!("{who}: parse failed: {e:?}"))?;
        ensure!(
            &back == value,
            "{who}: decoded value differs:\n{back:#?}\nvs\n{value:#?}"
        );
        let mut again = vec![0u8; n];
        back.emit(&mut again)
            .map_err(|e| anyhow!("{who}: re-emit failed: {e:?}"))?;
        ensure!(again == bytes, "{who}: re-encoding changed the bytes");
        self.messages += 1;
        self.bytes += n;
        println!("  ok  {who}: {n} bytes, decoded and re-encoded identically");
        if self.dump {
            print!("{}", hex::dump(bytes));
        }
        Ok(bytes)
    }
}

/// Runs the walk-through; an error names the message that failed.
pub(crate) fn run(dump: bool) -> Result<()> {
    let d = Defaults::embedded();
    let mut w = Walk {
        dump,
        messages: 0,
        bytes: 0,
    };
    println!("srpctl demo --wire: SRP discovery, login and I/O on embedded defaults (wire level)");
    println!(
        "  target {} (IOC {}, LUN {} = {} MiB), host {}",
        d.target_ip,
        d.ioc_guid,
        d.lun,
        (d.capacity_blocks * u64::from(d.block_size)) >> 20,
        d.host_ip
    );
    let found = discovery(&d, &mut w)?;
    let (req_lim, max_it) = login(&d, &found, &mut w)?;
    io(&d, req_lim, max_it, &mut w)?;
    println!(
        "\n{} messages, {} bytes: every one decoded to the value that was built and re-encoded \
         to the same bytes.",
        w.messages, w.bytes
    );
    Ok(())
}

/// What the host learns from Device Management.
struct Found {
    ioc_guid: Guid,
    id_ext: u64,
    service_id: ServiceId,
    send_size: u32,
}

fn dm_get(attr: DmAttr, attr_mod: u32, tid: u64) -> MadHeader {
    MadHeader::request(
        MgmtClass::DeviceMgmt,
        1,
        Method::Get,
        Tid(tid),
        attr.into(),
        attr_mod,
    )
}

fn dm_attr<'a>(mad: &AnyMad<'a>) -> Result<DmAttribute<'a>> {
    ensure!(
        mad.header.status == MadStatus::Success,
        "DM status {:?}",
        mad.header.status
    );
    match mad.body {
        MadBody::Dm { attr, .. } => Ok(attr),
        _ => bail!("not a Device Management MAD"),
    }
}

fn discovery(d: &Defaults, w: &mut Walk) -> Result<Found> {
    w.step(
        "1. Discovery (Device Management, class 0x06, on QP1): the host asks, the target answers",
    );
    let mut buf = Vec::new();

    let mut iou = IouInfo::new(1, 16);
    iou.set_slot(1, SlotState::Present).context("slot 1")?;
    let answer = AnyMad::dm_response(
        &dm_get(DmAttr::IouInfo, 0, 1),
        MadStatus::Success,
        DmAttribute::IouInfo(iou),
    );
    let bytes = w.check("GetResp(IOUnitInfo)", &answer, &mut buf)?;
    let DmAttribute::IouInfo(got) = dm_attr(&AnyMad::parse(bytes).map_err(|e| anyhow!("{e}"))?)?
    else {
        bail!("IOUnitInfo expected")
    };
    let slots: Vec<u16> = (1..=u16::from(got.max_controllers))
        .filter(|&s| got.slot(s) == Some(SlotState::Present))
        .collect();
    println!(
        "      host: {} controller slot(s) present: {slots:?}",
        slots.len()
    );

    let mut profile = IocProfile::srp(
        d.ioc_guid,
        d.credits as u16,
        4,
        d.max_it_iu_len,
        1 << 20,
        "srp-stack SRP target",
    )
    .context("IOC profile")?;
    profile.device_version = 1;
    let answer = AnyMad::dm_response(
        &dm_get(DmAttr::IocProfile, u32::from(slots[0]), 2),
        MadStatus::Success,
        DmAttribute::IocProfile(profile),
    );
    let bytes = w.check("GetResp(IOControllerProfile, slot 1)", &answer, &mut buf)?;
    let DmAttribute::IocProfile(p) = dm_attr(&AnyMad::parse(bytes).map_err(|e| anyhow!("{e}"))?)?
    else {
        bail!("IOControllerProfile expected")
    };
    println!(
        "      host: IOC {} class {:#06x} subclass {:#06x} protocol {:#06x} v{}, send size {}, \"{}\"",
        p.guid,
        u16::from(p.io_class),
        p.io_subclass,
        p.protocol,
        p.protocol_version,
        p.send_size,
        p.id_string_str().unwrap_or("?")
    );

    let service_id = ServiceId::rdma_ip(RdmaPortSpace::Tcp, d.rdma_cm_port);
    let entries =
        ServiceEntries::new(&[ServiceEntry::srp(d.id_ext, service_id)]).context("entries")?;
    let answer = AnyMad::dm_response(
        &dm_get(DmAttr::ServiceEntries, u32::from(slots[0]) << 16, 3),
        MadStatus::Success,
        DmAttribute::ServiceEntries(entries),
    );
    let bytes = w.check("GetResp(ServiceEntries 0..0)", &answer, &mut buf)?;
    let DmAttribute::ServiceEntries(e) =
        dm_attr(&AnyMad::parse(bytes).map_err(|e| anyhow!("{e}"))?)?
    else {
        bail!("ServiceEntries expected")
    };
    let entry = e.entries[0];
    let id_ext = entry
        .srp_id_ext()
        .context("service entry is not SRP.T10:<id_ext>")?;
    println!(
        "      host: service \"{}\" id {:#018x}",
        String::from_utf8_lossy(&entry.name).trim_end_matches('\0'),
        entry.service_id.0
    );
    Ok(Found {
        ioc_guid: p.guid,
        id_ext,
        service_id: entry.service_id,
        send_size: p.send_size,
    })
}

fn login(d: &Defaults, found: &Found, w: &mut Walk) -> Result<(u32, u32)> {
    w.step("2. Login (RDMA-CM form, as Linux ib_srp dest=ip:port): CM REQ -> CM REP");
    let mut buf = Vec::new();
    let login = LoginReq {
        tag: Tag(0),
        req_it_iu_len: found.send_size,
        req_buf_fmt: BufFormats::DIRECT | BufFormats::INDIRECT,
        multi_channel: MultiChannelAction::Single,
        flags: LoginReqFlags::IMMED_REQUESTED,
        imm_data_offset: DEFAULT_IMM_DATA_OFFSET,
        initiator_port_id: PortId::new(d.initiator_ext, d.host_port_guid, IoClass::SrpR16a),
        target_port_id: PortId::new(found.id_ext, found.ioc_guid, IoClass::SrpR16a),
    };
    let mut login_bytes = [0u8; 56];
    login
        .emit_rdma_cm(&mut login_bytes)
        .map_err(|e| anyhow!("{e}"))?;
    let cma = CmaHeader {
        src_port: 40000,
        src: d.host_ip,
        dst: d.target_ip,
    };
    let private_data = cma
        .req_private_data(&login_bytes)
        .map_err(|e| anyhow!("{e}"))?;
    let path = CmPath {
        local_lid: Lid::PERMISSIVE,
        remote_lid: Lid::PERMISSIVE,
        local_gid: Gid::from_ip(d.host_ip),
        remote_gid: Gid::from_ip(d.target_ip),
        flow_label: 0,
        packet_rate: 0,
        traffic_class: 0,
        hop_limit: 64,
        sl: 0,
        subnet_local: false,
        local_ack_timeout: 14,
    };
    let mut req = CmReq::rc(
        CommId(0x1000_0001),
        found.service_id,
        d.host_port_guid,
        Qpn::new(0x11).map_err(|e| anyhow!("{e}"))?,
        Psn::new(0x00_1234).map_err(|e| anyhow!("{e}"))?,
        Mtu::Mtu1024,
        path,
        private_data,
    );
    req.responder_resources = 4;
    req.initiator_depth = 4;
    req.pkey = PKey::DEFAULT;
    let bytes = w.check(
        "CM REQ with SRP_LOGIN_REQ",
        &AnyMad::cm(Tid(0x10), CmMessage::Req(req)),
        &mut buf,
    )?;

    // The target reads the REQ back out of the bytes.
    let mad = AnyMad::parse(bytes).map_err(|e| anyhow!("{e}"))?;
    let MadBody::Cm(CmMessage::Req(got)) = mad.body else {
        bail!("CM REQ expected")
    };
    let (_, port) = got
        .service_id
        .rdma_ip_parts()
        .context("RDMA-CM service ID")?;
    let user = CmaHeader::user_data(&got.private_data.0);
    let seen = LoginReq::parse_rdma_cm(user).map_err(|e| anyhow!("{e}"))?;
    ensure!(
        seen.target_port_id == login.target_port_id,
        "target port id changed in transit"
    );
    println!(
        "      target: login on port {port} from {} for {}, IU {} bytes, {:?}",
        seen.initiator_port_id, seen.target_port_id, seen.req_it_iu_len, seen.multi_channel
    );

    let rsp = LoginRsp {
        req_lim_delta: d.credits,
        tag: seen.tag,
        max_it_iu_len: d.max_it_iu_len,
        max_ti_iu_len: seen.req_it_iu_len,
        buf_fmt: BufFormats::DIRECT | BufFormats::INDIRECT,
        multi_channel: MultiChannelResult::NoChannel,
        flags: LoginRspFlags::IMMED_SUPP,
    };
    let mut rsp_bytes = [0u8; 52];
    rsp.emit(&mut rsp_bytes).map_err(|e| anyhow!("{e}"))?;
    let rep = CmRep {
        local_comm_id: CommId(0x2000_0001),
        remote_comm_id: got.local_comm_id,
        local_qkey: ib_verbs::QKey(0),
        local_qpn: Qpn::new(0x22).map_err(|e| anyhow!("{e}"))?,
        local_eecn: 0,
        starting_psn: Psn::new(0x00_5678).map_err(|e| anyhow!("{e}"))?,
        responder_resources: 4,
        initiator_depth: 4,
        target_ack_delay: 0,
        failover_accepted: 0,
        e2e_flow_control: true,
        rnr_retry_count: 7,
        srq: false,
        local_ca_guid: d.target_node_guid,
        private_data: PrivateData::new(&rsp_bytes).map_err(|e| anyhow!("{e}"))?,
    };
    let bytes = w.check(
        "CM REP with SRP_LOGIN_RSP",
        &AnyMad::cm(Tid(0x10), CmMessage::Rep(rep)),
        &mut buf,
    )?;
    let MadBody::Cm(CmMessage::Rep(got)) = AnyMad::parse(bytes).map_err(|e| anyhow!("{e}"))?.body
    else {
        bail!("CM REP expected")
    };
    let seen = LoginRsp::parse(&got.private_data.0).map_err(|e| anyhow!("{e}"))?;
    println!(
        "      host: logged in, {} credits, max IU {} out / {} in, immediate data {}",
        seen.req_lim_delta,
        seen.max_it_iu_len,
        seen.max_ti_iu_len,
        if seen.flags.contains(LoginRspFlags::IMMED_SUPP) {
            "accepted"
        } else {
            "refused"
        }
    );
    Ok((seen.req_lim_delta, seen.max_it_iu_len))
}

fn cdb16(cmd: &Command) -> Result<[u8; 16]> {
    let mut cdb = [0u8; 16];
    cmd.emit(&mut cdb).map_err(|e| anyhow!("CDB: {e}"))?;
    Ok(cdb)
}

/// The target's side of a command: parse the CDB and answer as a 1 GiB LUN would.
fn target_answers(d: &Defaults, cmd: &Cmd<'_>) -> Result<(Status, Option<Sense>, String)> {
    let cdb: Vec<u8> = cmd.cdb_bytes().collect();
    let parsed = Command::parse(&cdb).map_err(|e| anyhow!("CDB: {e}"))?;
    let (Command::Read(rw) | Command::Write(rw)) = parsed else {
        bail!("the demo only sends READ and WRITE")
    };
    let end = rw.lba.0.checked_add(u64::from(rw.blocks.0));
    let text = format!(
        "{} LBA {} x {} blocks",
        parsed.info().map(|i| i.name).unwrap_or("?"),
        rw.lba.0,
        rw.blocks.0
    );
    if end.is_none_or(|e| e > d.capacity_blocks) {
        return Ok((
            Status::CheckCondition,
            Some(Sense::with_information(
                SenseCode::LBA_OUT_OF_RANGE,
                rw.lba.0,
            )),
            text,
        ));
    }
    Ok((Status::Good, None, text))
}

fn io(d: &Defaults, req_lim: u32, max_it: u32, w: &mut Walk) -> Result<()> {
    w.step("3. I/O (SRP_CMD -> SRP_RSP, one credit each way)");
    let mut credits = req_lim;
    let block = d.block_size;
    let payload: Vec<u8> = (0..block).map(|i| (i * 7 + 3) as u8).collect();
    let commands = [
        (
            "READ(10) 8 blocks into a registered buffer",
            Command::Read(ReadWrite {
                cdb: RwCdb::Ten,
                lba: Lba(2048),
                blocks: BlockCount(8),
                dpo: false,
                fua: false,
            }),
            false,
        ),
        (
            "WRITE(10) 1 block with FUA as immediate data",
            Command::Write(ReadWrite {
                cdb: RwCdb::Ten,
                lba: Lba(2048),
                blocks: BlockCount(1),
                dpo: false,
                fua: true,
            }),
            true,
        ),
        (
            "READ(16) past the end of the LUN",
            Command::Read(ReadWrite {
                cdb: RwCdb::Sixteen,
                lba: Lba(d.capacity_blocks),
                blocks: BlockCount(1),
                dpo: false,
                fua: false,
            }),
            false,
        ),
    ];
    for (i, (what, command, immediate)) in commands.iter().enumerate() {
        let mut buf = Vec::new();
        let len = u32::try_from(match command {
            Command::Read(rw) | Command::Write(rw) => u64::from(rw.blocks.0) * u64::from(block),
            _ => 0,
        })?;
        let desc = DataDesc::Direct(DirectBuf::new(
            0x7f00_0000_0000 + (i as u64) * 0x10_0000,
            Rkey(0x100 + i as u32),
            len,
        ));
        let (data_out, data_in, imm): (DataDesc<'_>, DataDesc<'_>, &[u8]) =
            match (command, immediate) {
                (Command::Write(_), true) => (DataDesc::Immediate, DataDesc::None, &payload),
                (Command::Write(_), false) => (desc, DataDesc::None, &[]),
                _ => (DataDesc::None, desc, &[]),
            };
        let cmd = Cmd {
            flags: SolicitFlags::empty(),
            tag: Tag(i as u64 + 1),
            lun: d.lun,
            task_attr: TaskAttr::Simple,
            cdb: cdb16(command)?,
            add_cdb: &[],
            data_out,
            data_in,
            imm_data: imm,
            remote_invalidate: false,
        };
        ensure!(
            credits > 1,
            "out of credits (one is held back for task management)"
        );
        credits -= 1;
        ensure!(
            cmd.buffer_len() <= max_it as usize,
            "SRP_CMD exceeds the negotiated IU size"
        );
        let bytes = w.check(&format!("SRP_CMD {what}"), &cmd, &mut buf)?;
        let seen = Cmd::parse(bytes).map_err(|e| anyhow!("{e}"))?;
        let (status, sense, text) = target_answers(d, &seen)?;
        println!("      target: {text} -> {status:?}");
        let mut sense_buf = Vec::new();
        if let Some(s) = &sense {
            sense_buf.resize(s.buffer_len(), 0);
            s.emit(&mut sense_buf).map_err(|e| anyhow!("sense: {e}"))?;
        }
        let rsp = Rsp {
            solicited: false,
            req_lim_delta: 1,
            tag: seen.tag,
            status,
            data_out_residual: Residual::None,
            data_in_residual: if status == Status::Good {
                Residual::None
            } else {
                Residual::Underflow(len)
            },
            resp_data: &[],
            sense: &sense_buf,
        };
        let mut rbuf = Vec::new();
        let bytes = w.check("SRP_RSP", &rsp, &mut rbuf)?;
        let got = Rsp::parse(bytes).map_err(|e| anyhow!("{e}"))?;
        credits += got.req_lim_delta;
        ensure!(
            got.tag == cmd.tag,
            "response tag differs from the command's"
        );
        if got.sense.is_empty() {
            println!("      host: tag {} {:?}", got.tag, got.status);
        } else {
            let s = Sense::parse(got.sense).map_err(|e| anyhow!("sense: {e}"))?;
            println!(
                "      host: tag {} {:?}: {} (information {:?})",
                got.tag,
                got.status,
                s.code().description().unwrap_or("unknown sense"),
                s.information()
            );
        }
    }
    ensure!(
        credits == req_lim,
        "credits did not balance: {credits} of {req_lim}"
    );
    println!("      host: {credits} credits back, as many as the login granted");
    Ok(())
}
