//! The target's control messages on the socket: service messages of the access layer's
//! control protocol ([`access_layer::ctl`]), fixed-layout and big-endian like the rest of
//! it. Names are 64-byte NUL-padded UTF-8 fields (a name may fill its field). Lists come
//! in pages: the request says where to start, the reply carries the total, the count and
//! that many fixed-size entries; the client asks again from where the page ended.

use super::model::{DisableMode, IocStatus, LoginForm, LunStatus, PortStatus, SessionStatus};
use crate::exec::counters::LuCountersSnapshot;
use crate::io::SessionCounters;
use access_layer::ctl::WireError;
use access_layer::ctl::wire::{MAX_BODY, pad_filled, padded_str, read_fixed, write_fixed};
use hca::engine::{Resources, Stats};
use srp::wire::PortId;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use wirekit::WireRepr;
use zerocopy::network_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// List the IOCs ([`ListPage`] → [`Page`] of [`IocStatus`]).
pub const LIST_IOCS: u16 = 0x0201;
/// List the HCA ports ([`ListPage`] → [`Page`] of [`PortStatus`]).
pub const LIST_PORTS: u16 = 0x0202;
/// List the LUNs ([`ListPage`] → [`Page`] of [`LunStatus`]).
pub const LIST_LUNS: u16 = 0x0203;
/// List the sessions ([`ListPage`] → [`Page`] of [`SessionStatus`]).
pub const LIST_SESSIONS: u16 = 0x0204;
/// Enable or disable an IOC ([`SetIoc`] → [`Done`]).
pub const SET_IOC: u16 = 0x0210;
/// Bring a port up or down ([`SetPort`] → [`Done`]).
pub const SET_PORT: u16 = 0x0211;
/// Act on a LUN: clear its latched flush error ([`SetLun`] → [`Done`], the count being 1
/// if one was latched).
pub const SET_LUN: u16 = 0x0212;

/// Bytes of a name field.
pub const NAME_LEN: usize = 64;

/// A fixed-size body: its length and its conversions.
pub trait Fixed: Sized {
    /// Its length on the wire.
    const LEN: usize;
    /// Parses the first [`Fixed::LEN`] bytes.
    fn parse_fixed(buf: &[u8]) -> Result<Self, WireError>;
    /// Writes [`Fixed::LEN`] bytes.
    fn emit_fixed(&self, buf: &mut [u8]) -> Result<usize, WireError>;
}

/// Implements [`Fixed`] and [`WireRepr`] through `from_raw` / `to_raw`.
macro_rules! fixed {
    ($repr:ty, $raw:ty, $len:expr, $what:expr) => {
        const _: () = assert!(size_of::<$raw>() == $len);
        impl Fixed for $repr {
            const LEN: usize = $len;
            fn parse_fixed(buf: &[u8]) -> Result<Self, WireError> {
                Self::from_raw(&read_fixed::<$raw>($what, buf)?)
            }
            fn emit_fixed(&self, buf: &mut [u8]) -> Result<usize, WireError> {
                write_fixed($what, &self.to_raw()?, buf)
            }
        }
        impl<'a> WireRepr<'a> for $repr {
            type Error = WireError;
            fn parse(buf: &'a [u8]) -> Result<Self, WireError> {
                Self::parse_fixed(buf)
            }
            fn buffer_len(&self) -> usize {
                $len
            }
            fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
                self.emit_fixed(buf)
            }
        }
    };
}

fn bad(what: &'static str, field: &'static str, value: u64, why: &'static str) -> WireError {
    WireError::BadField {
        what,
        field,
        value,
        why,
    }
}

fn flag(what: &'static str, field: &'static str, v: u8) -> Result<bool, WireError> {
    match v {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(bad(what, field, v.into(), "not 0 or 1")),
    }
}

fn name(what: &'static str, field: &'static str, bytes: &[u8]) -> Result<String, WireError> {
    let s = padded_str(what, field, bytes)?;
    if s.is_empty() {
        return Err(bad(what, field, 0, "empty"));
    }
    Ok(s)
}

/// ListPage as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct ListPageRaw {
    /// Index of the first entry wanted.
    pub start: U32,
    /// Reserved, zero.
    pub reserved: [u8; 4],
}

/// A list request: entries from `start` on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListPage {
    /// Index of the first entry wanted.
    pub start: u32,
}

impl ListPage {
    fn from_raw(r: &ListPageRaw) -> Result<Self, WireError> {
        Ok(ListPage {
            start: r.start.get(),
        })
    }
    fn to_raw(self) -> Result<ListPageRaw, WireError> {
        Ok(ListPageRaw {
            start: U32::new(self.start),
            reserved: [0; 4],
        })
    }
}
fixed!(ListPage, ListPageRaw, 8, "ListPage");

/// A list reply: `total` entries exist, this page holds `entries` from the requested
/// start. Layout: total (u32), count (u32), then `count` entries of `T::LEN` bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page<T> {
    /// Entries in the whole list.
    pub total: u32,
    /// This page's entries.
    pub entries: Vec<T>,
}

impl<T: Fixed> Page<T> {
    /// Entries that fit in one body.
    pub const PER_PAGE: usize = (MAX_BODY as usize - 8) / T::LEN;

    /// The page of `all` that starts at `start` (empty past the end).
    pub fn of(all: Vec<T>, start: u32) -> Page<T> {
        let total = u32::try_from(all.len()).unwrap_or(u32::MAX);
        let entries = all
            .into_iter()
            .skip(start as usize)
            .take(Self::PER_PAGE)
            .collect();
        Page { total, entries }
    }
}

impl<'a, T: Fixed> WireRepr<'a> for Page<T> {
    type Error = WireError;

    fn parse(buf: &'a [u8]) -> Result<Self, WireError> {
        let head: [U32; 2] = read_fixed("Page", buf)?;
        let (total, count) = (head[0].get(), head[1].get() as usize);
        if count > Self::PER_PAGE || count > total as usize {
            return Err(bad(
                "Page",
                "count",
                count as u64,
                "more than a page or the total",
            ));
        }
        let need = 8 + count * T::LEN;
        let body = buf.get(8..need).ok_or(WireError::Truncated {
            what: "Page",
            need,
            have: buf.len(),
        })?;
        let entries = body
            .chunks_exact(T::LEN)
            .map(T::parse_fixed)
            .collect::<Result<_, _>>()?;
        Ok(Page { total, entries })
    }

    fn buffer_len(&self) -> usize {
        8 + self.entries.len() * T::LEN
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let count = self.entries.len();
        if count > Self::PER_PAGE || count > self.total as usize {
            return Err(bad(
                "Page",
                "count",
                count as u64,
                "more than a page or the total",
            ));
        }
        let need = self.buffer_len();
        let have = buf.len();
        let out = buf.get_mut(..need).ok_or(WireError::BufferTooSmall {
            what: "Page",
            need,
            have,
        })?;
        let (head, mut rest) = out.split_at_mut(8);
        head[..4].copy_from_slice(&self.total.to_be_bytes());
        head[4..].copy_from_slice(&(count as u32).to_be_bytes());
        for e in &self.entries {
            let n = e.emit_fixed(rest)?;
            rest = &mut rest[n..];
        }
        Ok(need)
    }
}

/// An IOC entry as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct IocEntryRaw {
    /// Name.
    pub name: [u8; NAME_LEN],
    /// GUID.
    pub guid: U64,
    /// Identifier extension.
    pub id_ext: U64,
    /// IB CM service ID.
    pub service_id: U64,
    /// LUNs exported.
    pub luns: U32,
    /// Live sessions.
    pub sessions: U32,
    /// 1 when enabled.
    pub enabled: u8,
    /// Reserved, zero.
    pub reserved: [u8; 7],
}

impl IocStatus {
    fn from_raw(r: &IocEntryRaw) -> Result<Self, WireError> {
        Ok(IocStatus {
            name: name("IocEntry", "name", &r.name)?,
            guid: r.guid.get(),
            id_ext: r.id_ext.get(),
            service_id: r.service_id.get(),
            enabled: flag("IocEntry", "enabled", r.enabled)?,
            luns: r.luns.get(),
            sessions: r.sessions.get(),
        })
    }
    fn to_raw(&self) -> Result<IocEntryRaw, WireError> {
        Ok(IocEntryRaw {
            name: pad_filled("IocEntry", "name", &self.name)?,
            guid: U64::new(self.guid),
            id_ext: U64::new(self.id_ext),
            service_id: U64::new(self.service_id),
            luns: U32::new(self.luns),
            sessions: U32::new(self.sessions),
            enabled: self.enabled.into(),
            reserved: [0; 7],
        })
    }
}
fixed!(IocStatus, IocEntryRaw, 104, "IocEntry");

/// A port entry as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct PortEntryRaw {
    /// Name.
    pub name: [u8; NAME_LEN],
    /// IP address: IPv6, or IPv4-mapped (::ffff:a.b.c.d).
    pub ip: [u8; 16],
    /// UDP port.
    pub udp_port: U16,
    /// 1 when up.
    pub active: u8,
    /// Reserved, zero.
    pub reserved: [u8; 5],
    /// Live sessions.
    pub sessions: U32,
    /// Live QPs (GSI included).
    pub qps: U32,
    /// Live CQs.
    pub cqs: U32,
    /// Live SRQs.
    pub srqs: U32,
    /// Registered memory regions.
    pub mrs: U32,
    /// Reserved, zero.
    pub reserved2: [u8; 4],
    /// The HCA port's counters in `hca::engine::Stats::NAMES` order: datagrams received and
    /// sent first, then drops by reason, NAKs and retransmits.
    pub counters: [U64; Stats::COUNT],
}

fn count(what: &'static str, field: &'static str, n: usize) -> Result<U32, WireError> {
    u32::try_from(n)
        .map(U32::new)
        .map_err(|_| bad(what, field, n as u64, "more than 2^32 - 1"))
}

impl PortStatus {
    fn from_raw(r: &PortEntryRaw) -> Result<Self, WireError> {
        let v6 = Ipv6Addr::from(r.ip);
        let ip = v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4);
        Ok(PortStatus {
            name: name("PortEntry", "name", &r.name)?,
            address: SocketAddr::new(ip, r.udp_port.get()),
            active: flag("PortEntry", "active", r.active)?,
            sessions: r.sessions.get(),
            resources: Resources {
                qps: r.qps.get() as usize,
                cqs: r.cqs.get() as usize,
                srqs: r.srqs.get() as usize,
                mrs: r.mrs.get() as usize,
            },
            hca: Stats::from_array(r.counters.map(|c| c.get())),
        })
    }
    fn to_raw(&self) -> Result<PortEntryRaw, WireError> {
        let ip = match self.address.ip() {
            IpAddr::V4(v4) => v4.to_ipv6_mapped(),
            IpAddr::V6(v6) => v6,
        };
        let w = "PortEntry";
        Ok(PortEntryRaw {
            name: pad_filled(w, "name", &self.name)?,
            ip: ip.octets(),
            udp_port: U16::new(self.address.port()),
            active: self.active.into(),
            reserved: [0; 5],
            sessions: U32::new(self.sessions),
            qps: count(w, "qps", self.resources.qps)?,
            cqs: count(w, "cqs", self.resources.cqs)?,
            srqs: count(w, "srqs", self.resources.srqs)?,
            mrs: count(w, "mrs", self.resources.mrs)?,
            reserved2: [0; 4],
            counters: self.hca.to_array().map(U64::new),
        })
    }
}
fixed!(
    PortStatus,
    PortEntryRaw,
    112 + 8 * Stats::COUNT,
    "PortEntry"
);

/// A LUN entry as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct LunEntryRaw {
    /// Name.
    pub name: [u8; NAME_LEN],
    /// NAA designator (VPD 83h).
    pub naa: [u8; 16],
    /// Capacity in blocks.
    pub blocks: U64,
    /// Block size in bytes.
    pub block_size: U32,
    /// Bit 0: read-only; bit 1: write cache on; bit 2: a failed flush is latched (flushes
    /// and durable writes refused); others reserved, zero.
    pub flags: u8,
    /// Reserved, zero.
    pub reserved: [u8; 3],
    /// Counters: commands, reads, writes, bytes read, bytes written, CHECK CONDITIONs,
    /// RESERVATION CONFLICTs, failed flushes.
    pub counters: [U64; 8],
}

const LUN_READ_ONLY: u8 = 1;
const LUN_WRITE_CACHE: u8 = 2;
const LUN_FLUSH_FAILED: u8 = 4;

impl LunStatus {
    fn from_raw(r: &LunEntryRaw) -> Result<Self, WireError> {
        if r.flags & !(LUN_READ_ONLY | LUN_WRITE_CACHE | LUN_FLUSH_FAILED) != 0 {
            return Err(bad(
                "LunEntry",
                "flags",
                r.flags.into(),
                "reserved bits set",
            ));
        }
        let c = r.counters.map(|x| x.get());
        Ok(LunStatus {
            name: name("LunEntry", "name", &r.name)?,
            naa: r.naa,
            blocks: r.blocks.get(),
            block_size: r.block_size.get(),
            read_only: r.flags & LUN_READ_ONLY != 0,
            write_cache: r.flags & LUN_WRITE_CACHE != 0,
            flush_failed: r.flags & LUN_FLUSH_FAILED != 0,
            counters: LuCountersSnapshot {
                commands: c[0],
                reads: c[1],
                writes: c[2],
                bytes_read: c[3],
                bytes_written: c[4],
                check_conditions: c[5],
                reservation_conflicts: c[6],
                flush_errors: c[7],
            },
        })
    }
    fn to_raw(&self) -> Result<LunEntryRaw, WireError> {
        let c = &self.counters;
        let flags = if self.read_only { LUN_READ_ONLY } else { 0 }
            | if self.write_cache { LUN_WRITE_CACHE } else { 0 }
            | if self.flush_failed {
                LUN_FLUSH_FAILED
            } else {
                0
            };
        Ok(LunEntryRaw {
            name: pad_filled("LunEntry", "name", &self.name)?,
            naa: self.naa,
            blocks: U64::new(self.blocks),
            block_size: U32::new(self.block_size),
            flags,
            reserved: [0; 3],
            counters: [
                c.commands,
                c.reads,
                c.writes,
                c.bytes_read,
                c.bytes_written,
                c.check_conditions,
                c.reservation_conflicts,
                c.flush_errors,
            ]
            .map(U64::new),
        })
    }
}
fixed!(LunStatus, LunEntryRaw, 160, "LunEntry");

/// A session entry as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct SessionEntryRaw {
    /// Channel id.
    pub channel: U64,
    /// IOC name.
    pub ioc: [u8; NAME_LEN],
    /// Port name.
    pub port: [u8; NAME_LEN],
    /// Initiator port ID.
    pub initiator: [u8; 16],
    /// 0: IB CM form; 1: RDMA-CM form.
    pub form: u8,
    /// Reserved, zero.
    pub reserved: [u8; 3],
    /// Credits granted at login.
    pub window: U32,
    /// Negotiated initiator-to-target IU length.
    pub max_it_iu_len: U32,
    /// Commands in flight.
    pub in_flight: U32,
    /// Seconds since login.
    pub age_secs: U64,
    /// Counters: commands, task management, data-in bytes, data-out bytes, CHECK
    /// CONDITIONs, BUSYs, RESERVATION CONFLICTs, aborted.
    pub counters: [U64; 8],
}

impl SessionStatus {
    fn from_raw(r: &SessionEntryRaw) -> Result<Self, WireError> {
        let form = match r.form {
            0 => LoginForm::IbCm,
            1 => LoginForm::RdmaCm,
            v => return Err(bad("SessionEntry", "form", v.into(), "not 0 or 1")),
        };
        let c = r.counters.map(|x| x.get());
        Ok(SessionStatus {
            channel: r.channel.get(),
            ioc: name("SessionEntry", "ioc", &r.ioc)?,
            port: name("SessionEntry", "port", &r.port)?,
            initiator: PortId(r.initiator),
            form,
            window: r.window.get(),
            max_it_iu_len: r.max_it_iu_len.get(),
            in_flight: r.in_flight.get(),
            age_secs: r.age_secs.get(),
            counters: SessionCounters {
                commands: c[0],
                task_mgmt: c[1],
                data_in_bytes: c[2],
                data_out_bytes: c[3],
                check_conditions: c[4],
                busy: c[5],
                reservation_conflicts: c[6],
                aborted: c[7],
            },
        })
    }
    fn to_raw(&self) -> Result<SessionEntryRaw, WireError> {
        let c = &self.counters;
        Ok(SessionEntryRaw {
            channel: U64::new(self.channel),
            ioc: pad_filled("SessionEntry", "ioc", &self.ioc)?,
            port: pad_filled("SessionEntry", "port", &self.port)?,
            initiator: self.initiator.0,
            form: match self.form {
                LoginForm::IbCm => 0,
                LoginForm::RdmaCm => 1,
            },
            reserved: [0; 3],
            window: U32::new(self.window),
            max_it_iu_len: U32::new(self.max_it_iu_len),
            in_flight: U32::new(self.in_flight),
            age_secs: U64::new(self.age_secs),
            counters: [
                c.commands,
                c.task_mgmt,
                c.data_in_bytes,
                c.data_out_bytes,
                c.check_conditions,
                c.busy,
                c.reservation_conflicts,
                c.aborted,
            ]
            .map(U64::new),
        })
    }
}
fixed!(SessionStatus, SessionEntryRaw, 240, "SessionEntry");

/// SetIoc as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct SetIocRaw {
    /// The IOC's name.
    pub name: [u8; NAME_LEN],
    /// 1: enable; 0: disable.
    pub enabled: u8,
    /// When disabling: 0 = T_LOGOUT then DREQ; 1 = drop without a word.
    pub mode: u8,
    /// Reserved, zero.
    pub reserved: [u8; 6],
}

/// Enable or disable an IOC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetIoc {
    /// The IOC's name.
    pub name: String,
    /// On or off.
    pub enabled: bool,
    /// What its sessions get when turned off.
    pub mode: DisableMode,
}

impl SetIoc {
    fn from_raw(r: &SetIocRaw) -> Result<Self, WireError> {
        Ok(SetIoc {
            name: name("SetIoc", "name", &r.name)?,
            enabled: flag("SetIoc", "enabled", r.enabled)?,
            mode: match r.mode {
                0 => DisableMode::Logout,
                1 => DisableMode::Drop,
                v => return Err(bad("SetIoc", "mode", v.into(), "not 0 or 1")),
            },
        })
    }
    fn to_raw(&self) -> Result<SetIocRaw, WireError> {
        Ok(SetIocRaw {
            name: pad_filled("SetIoc", "name", &self.name)?,
            enabled: self.enabled.into(),
            mode: match self.mode {
                DisableMode::Logout => 0,
                DisableMode::Drop => 1,
            },
            reserved: [0; 6],
        })
    }
}
fixed!(SetIoc, SetIocRaw, 72, "SetIoc");

/// SetPort as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct SetPortRaw {
    /// The port's name.
    pub name: [u8; NAME_LEN],
    /// 1: up; 0: down.
    pub enabled: u8,
    /// Reserved, zero.
    pub reserved: [u8; 7],
}

/// Bring a port up or down.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetPort {
    /// The port's name.
    pub name: String,
    /// Up or down.
    pub enabled: bool,
}

impl SetPort {
    fn from_raw(r: &SetPortRaw) -> Result<Self, WireError> {
        Ok(SetPort {
            name: name("SetPort", "name", &r.name)?,
            enabled: flag("SetPort", "enabled", r.enabled)?,
        })
    }
    fn to_raw(&self) -> Result<SetPortRaw, WireError> {
        Ok(SetPortRaw {
            name: pad_filled("SetPort", "name", &self.name)?,
            enabled: self.enabled.into(),
            reserved: [0; 7],
        })
    }
}
fixed!(SetPort, SetPortRaw, 72, "SetPort");

/// SetLun as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct SetLunRaw {
    /// The LUN's name.
    pub name: [u8; NAME_LEN],
    /// 1: clear a latched flush error; 0: nothing.
    pub clear_flush_error: u8,
    /// Reserved, zero.
    pub reserved: [u8; 7],
}

/// Act on a LUN.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetLun {
    /// The LUN's name.
    pub name: String,
    /// Clear its latched flush error (the operator has dealt with the cause).
    pub clear_flush_error: bool,
}

impl SetLun {
    fn from_raw(r: &SetLunRaw) -> Result<Self, WireError> {
        if r.reserved != [0; 7] {
            return Err(bad("SetLun", "reserved", 0, "not zero"));
        }
        Ok(SetLun {
            name: name("SetLun", "name", &r.name)?,
            clear_flush_error: flag("SetLun", "clear_flush_error", r.clear_flush_error)?,
        })
    }
    fn to_raw(&self) -> Result<SetLunRaw, WireError> {
        Ok(SetLunRaw {
            name: pad_filled("SetLun", "name", &self.name)?,
            clear_flush_error: self.clear_flush_error.into(),
            reserved: [0; 7],
        })
    }
}
fixed!(SetLun, SetLunRaw, 72, "SetLun");

/// Done as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct DoneRaw {
    /// Sessions the switch ended.
    pub sessions_ended: U32,
    /// Reserved, zero.
    pub reserved: [u8; 4],
}

/// The reply to SetIoc, SetPort and SetLun.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Done {
    /// What the request ended: sessions for SetIoc and SetPort, latched flush errors (0 or
    /// 1) for SetLun.
    pub sessions_ended: u32,
}

impl Done {
    fn from_raw(r: &DoneRaw) -> Result<Self, WireError> {
        Ok(Done {
            sessions_ended: r.sessions_ended.get(),
        })
    }
    fn to_raw(self) -> Result<DoneRaw, WireError> {
        Ok(DoneRaw {
            sessions_ended: U32::new(self.sessions_ended),
            reserved: [0; 4],
        })
    }
}
fixed!(Done, DoneRaw, 8, "Done");

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
