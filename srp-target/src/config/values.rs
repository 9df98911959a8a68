//! Parsers for single values: names, 64-bit identifiers, the OUI, port addresses, sizes,
//! block sizes, ALUA states and LUN numbers. Each returns the reason on failure; the caller
//! knows the key path.

use super::LoginForms;
use super::error::ConfigErrorKind as E;
use super::file::IntOrText;
use crate::backend::BlockSize;
use crate::lu::{AluaState, Oui};
use ib_verbs::Guid;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

/// The RoCEv2 UDP destination port (IANA), used when an address gives none.
pub const ROCE_V2_UDP_PORT: u16 = 4791;

/// The largest size accepted: the largest file offset (`off_t` is signed 64-bit).
pub const MAX_SIZE_BYTES: u64 = i64::MAX as u64;

/// A port, IOC or LUN name: 1 to 64 of `A-Z a-z 0-9 . _ - :`. Names appear in logs, the
/// control socket and (for LUNs) the identity hash, so they stay plain.
pub(super) fn name(text: &str) -> Result<String, E> {
    let ok = (1..=64).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-_:".contains(&b));
    if ok {
        Ok(text.to_owned())
    } else {
        Err(E::BadName(text.to_owned()))
    }
}

/// A 64-bit identifier: 16 hex digits, optionally `0x`-prefixed and colon-grouped, as
/// [`Guid`]'s parser accepts (`0x0002c90300a1b2c3`, `0002:c903:00a1:b2c3`).
pub(super) fn id64(what: &'static str, text: &str) -> Result<u64, E> {
    text.parse::<Guid>().map(|g| g.0).map_err(|_| E::BadId64 {
        what,
        text: text.to_owned(),
    })
}

/// A node or IOC GUID: as [`id64`], and not 0.
pub(super) fn guid(text: &str) -> Result<Guid, E> {
    match id64("GUID", text)? {
        0 => Err(E::ZeroGuid),
        v => Ok(Guid(v)),
    }
}

/// A 24-bit OUI: an integer (`0x001405`) or a string `"0x001405"` / `"00:14:05"` / `"00-14-05"`.
pub(super) fn oui(value: &IntOrText) -> Result<Oui, E> {
    let parsed = match value {
        IntOrText::Int(v) => u32::try_from(*v).ok(),
        IntOrText::Text(t) => {
            let body = t.strip_prefix("0x").unwrap_or(t);
            let digits: String = body.chars().filter(|c| *c != ':' && *c != '-').collect();
            (digits.len() == 6 || t.starts_with("0x"))
                .then(|| u32::from_str_radix(&digits, 16).ok())
                .flatten()
        }
    };
    parsed.and_then(Oui::new).ok_or_else(|| {
        E::BadOui(match value {
            IntOrText::Int(v) => v.to_string(),
            IntOrText::Text(t) => format!("{t:?}"),
        })
    })
}

/// A port address: `ip` (UDP port 4791) or `ip:port`, IPv6 as `[addr]:port` or bare. Host
/// names are not resolved: the daemon must not depend on DNS to start.
pub(super) fn address(text: &str) -> Result<SocketAddr, E> {
    let bad = |why| E::BadAddress {
        text: text.to_owned(),
        why,
    };
    let addr = match (text.parse::<SocketAddr>(), text.parse::<IpAddr>()) {
        (Ok(a), _) => a,
        (_, Ok(ip)) => SocketAddr::new(ip, ROCE_V2_UDP_PORT),
        _ => {
            return Err(bad(
                "expected an IP address, optionally with :port (host names are not resolved)",
            ));
        }
    };
    if addr.port() == 0 {
        return Err(bad(
            "UDP port 0 cannot be listened on by name; omit the port for 4791",
        ));
    }
    if addr.ip().is_unspecified() || addr.ip().is_multicast() {
        return Err(bad("a port needs the unicast address of one interface"));
    }
    Ok(addr)
}

/// A size: an integer or a string of digits with an optional unit, binary (KiB MiB GiB
/// TiB) or decimal (KB MB GB TB), e.g. `4096`, `"64MiB"`, `"10 GB"`.
pub(super) fn size(value: &IntOrText) -> Result<u64, E> {
    let (bytes, shown) = match value {
        IntOrText::Int(v) => (
            u64::try_from(*v).map_err(|_| E::BadSize(v.to_string()))?,
            None,
        ),
        IntOrText::Text(t) => (size_text(t)?, Some(t)),
    };
    match bytes {
        0 => Err(E::ZeroSize),
        b if b > MAX_SIZE_BYTES => Err(E::SizeTooLarge(match shown {
            Some(t) => format!("{t:?}"),
            None => b.to_string(),
        })),
        b => Ok(b),
    }
}

/// The text form, through the one size parser of both configurations.
fn size_text(text: &str) -> Result<u64, E> {
    opskit::units::parse_size(text).map_err(|e| match e {
        opskit::units::SizeError::Syntax(_) => E::BadSize(text.to_owned()),
        opskit::units::SizeError::TooLarge(_) => E::SizeTooLarge(format!("{text:?}")),
    })
}

/// `block_size`: 512 or 4096.
pub(super) fn block_size(value: i64) -> Result<BlockSize, E> {
    match value {
        512 => Ok(BlockSize::B512),
        4096 => Ok(BlockSize::B4096),
        v => Err(E::BadBlockSize(v)),
    }
}

/// `physical_block_size`: the logical `block_size` times 2^n, n in 0..=15 (READ
/// CAPACITY(16)'s LOGICAL BLOCKS PER PHYSICAL BLOCK EXPONENT is 4 bits).
pub(super) fn physical_block_size(value: i64, block_size: BlockSize) -> Result<u32, E> {
    let bs = block_size.bytes();
    let bad = || E::BadPhysicalBlockSize {
        value,
        block_size: bs,
    };
    let v = u32::try_from(value).map_err(|_| bad())?;
    if v < bs || v % bs != 0 || !(v / bs).is_power_of_two() || v / bs > 1 << 15 {
        return Err(bad());
    }
    Ok(v)
}

/// `rdma_cm_port`: a TCP port number, 1..=65535.
pub(super) fn rdma_cm_port(value: i64) -> Result<u16, E> {
    u16::try_from(value)
        .ok()
        .filter(|p| *p != 0)
        .ok_or(E::BadRdmaCmPort(value))
}

/// `idle_probe`: a duration (`"10s"`), `"0s"` to never probe; at least 100 ms otherwise.
pub(super) fn idle_probe(text: &str) -> Result<Option<std::time::Duration>, E> {
    match opskit::units::parse_duration(text) {
        Ok(d) if d.is_zero() => Ok(None),
        Ok(d) if d >= std::time::Duration::from_millis(100) => Ok(Some(d)),
        Ok(_) => Err(E::BadValue {
            key: "idle_probe",
            why: format!("{text:?} is under 100ms; write \"0s\" to turn probing off"),
        }),
        Err(why) => Err(E::BadValue {
            key: "idle_probe",
            why,
        }),
    }
}

/// A P_Key: 16 bits in hex (`"0x8001"`), bit 15 the full-membership bit; the partition
/// (the low 15 bits) is not 0.
pub(super) fn pkey(text: &str) -> Result<ib_verbs::PKey, E> {
    text.parse().map_err(|e: ib_verbs::IdError| E::BadValue {
        key: "pkey",
        why: e.to_string(),
    })
}

/// A verbs provider: `"soft"` or `"rdma-core"`.
pub(super) fn provider(text: &str) -> Result<access_layer::verbs::ProviderKind, E> {
    text.parse().map_err(|why| E::BadValue {
        key: "provider",
        why,
    })
}

/// A device port number or GID index: `min ..= 255`.
pub(super) fn small(key: &'static str, value: i64, min: u8) -> Result<u8, E> {
    u8::try_from(value)
        .ok()
        .filter(|n| *n >= min)
        .ok_or_else(|| E::BadValue {
            key,
            why: format!("{value} is not a number from {min} to 255"),
        })
}

/// A channel count: 1 ..= 65536.
pub(super) fn count(key: &'static str, value: i64) -> Result<usize, E> {
    usize::try_from(value)
        .ok()
        .filter(|n| (1..=65536).contains(n))
        .ok_or_else(|| E::BadValue {
            key,
            why: format!("{value} is not a count from 1 to 65536"),
        })
}

/// `login_forms`: a non-empty list of `"ib-cm"` and `"rdma-cm"`.
pub(super) fn login_forms(list: &[String]) -> Result<LoginForms, E> {
    let bad = || E::BadLoginForms(format!("{list:?}"));
    let mut f = LoginForms {
        ib_cm: false,
        rdma_cm: false,
    };
    for form in list {
        match form.as_str() {
            "ib-cm" => f.ib_cm = true,
            "rdma-cm" => f.rdma_cm = true,
            _ => return Err(bad()),
        }
    }
    if f.ib_cm || f.rdma_cm {
        Ok(f)
    } else {
        Err(bad())
    }
}

/// `control_socket`: an absolute path that fits a Unix socket address (`sun_path`, 108
/// bytes with its NUL).
pub(super) fn socket_path(text: &str) -> Result<PathBuf, E> {
    let p = Path::new(text);
    if p.is_absolute() && text.len() <= 107 && !text.contains('\0') {
        Ok(p.to_path_buf())
    } else {
        Err(E::BadSocketPath(text.to_owned()))
    }
}

/// `state_dir`: an absolute path.
pub(super) fn absolute_dir(text: &str) -> Result<PathBuf, E> {
    let p = Path::new(text);
    if p.is_absolute() && !text.contains('\0') {
        Ok(p.to_path_buf())
    } else {
        Err(E::RelativePath(text.to_owned()))
    }
}

/// `control_group`: a group name or numeric ID that exists on this host, as its ID.
pub(super) fn group(text: &str) -> Result<u32, E> {
    let found = match text.parse::<u32>() {
        Ok(gid) => nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid)),
        Err(_) => nix::unistd::Group::from_name(text),
    };
    match found {
        Ok(Some(g)) => Ok(g.gid.as_raw()),
        _ => Err(E::UnknownGroup(text.to_owned())),
    }
}

/// An ALUA state an operator may configure (SPC-4 table 163; transitioning is transient,
/// the target's to report, not a configuration).
pub(super) fn alua(text: &str) -> Result<AluaState, E> {
    match text {
        "active/optimized" => Ok(AluaState::ActiveOptimized),
        "active/non-optimized" => Ok(AluaState::ActiveNonOptimized),
        "standby" => Ok(AluaState::Standby),
        "unavailable" => Ok(AluaState::Unavailable),
        _ => Err(E::BadAlua(text.to_owned())),
    }
}

/// A LUN number written as a table key (`"3"`), encoded single-level.
pub(super) fn lun_key(text: &str) -> Result<(u32, scsi::Lun), E> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(E::BadLunNumber(text.to_owned()));
    }
    let n = text
        .parse::<u32>()
        .map_err(|_| E::BadLunNumber(text.to_owned()))?;
    Ok((n, scsi::Lun::from_number(n)?))
}

/// A LUN number written as a TOML integer (`lun = 3`), encoded single-level.
pub(super) fn lun_int(value: i64) -> Result<(u32, scsi::Lun), E> {
    let n = u32::try_from(value).map_err(|_| E::BadLunNumber(value.to_string()))?;
    Ok((n, scsi::Lun::from_number(n)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> IntOrText {
        IntOrText::Text(s.to_owned())
    }

    #[test]
    fn sizes() {
        let cases: [(&str, u64); 11] = [
            ("4096", 4096),
            ("512B", 512),
            ("64MiB", 64 << 20),
            ("64 MiB", 64 << 20),
            ("1GiB", 1 << 30),
            ("2TiB", 2 << 40),
            ("4KiB", 4096),
            ("10KB", 10_000),
            ("3MB", 3_000_000),
            ("1GB", 1_000_000_000),
            ("2TB", 2_000_000_000_000),
        ];
        for (t, want) in cases {
            assert_eq!(size(&text(t)).ok(), Some(want), "{t}");
        }
        assert_eq!(size(&IntOrText::Int(8192)).ok(), Some(8192));
        for bad in ["", "MiB", "1.5GiB", "64mib", "64 XB", "-1", "0x100"] {
            assert!(matches!(size(&text(bad)), Err(E::BadSize(_))), "{bad}");
        }
        assert!(matches!(size(&IntOrText::Int(-1)), Err(E::BadSize(_))));
        assert!(matches!(size(&text("0GiB")), Err(E::ZeroSize)));
        assert!(matches!(size(&IntOrText::Int(0)), Err(E::ZeroSize)));
        assert!(matches!(size(&text("8388608TiB")), Err(E::SizeTooLarge(_))));
        assert!(matches!(
            size(&text("99999999999999999999")),
            Err(E::SizeTooLarge(_))
        ));
        assert_eq!(size(&text("8388607TiB")).ok(), Some(8_388_607 << 40));
    }

    #[test]
    fn ids_and_guids() {
        assert_eq!(
            id64("id_ext", "0x0002c90300a1b2c3").ok(),
            Some(0x0002_c903_00a1_b2c3)
        );
        assert_eq!(
            id64("id_ext", "0002:c903:00a1:b2c3").ok(),
            Some(0x0002_c903_00a1_b2c3)
        );
        assert!(id64("id_ext", "0x1").is_err());
        assert!(matches!(guid("0x0000000000000000"), Err(E::ZeroGuid)));
    }

    #[test]
    fn ouis() {
        for t in ["0x001405", "00:14:05", "00-14-05", "001405"] {
            assert_eq!(oui(&text(t)).map(Oui::get).ok(), Some(0x001405), "{t}");
        }
        assert_eq!(
            oui(&IntOrText::Int(0x001405)).map(Oui::get).ok(),
            Some(0x001405)
        );
        for t in ["1405", "0x1000000", "zz:14:05"] {
            assert!(oui(&text(t)).is_err(), "{t}");
        }
        assert!(oui(&IntOrText::Int(-1)).is_err());
    }

    #[test]
    fn addresses() {
        let a = address("192.0.2.10").ok();
        assert_eq!(a, "192.0.2.10:4791".parse().ok());
        assert_eq!(
            address("192.0.2.10:5000").ok(),
            "192.0.2.10:5000".parse().ok()
        );
        assert_eq!(address("fe80::1").ok(), "[fe80::1]:4791".parse().ok());
        assert_eq!(address("[fe80::1]:7").ok(), "[fe80::1]:7".parse().ok());
        for bad in [
            "host.example",
            "192.0.2.10:0",
            "0.0.0.0",
            "224.0.0.1",
            "192.0.2.300",
        ] {
            assert!(address(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn lun_numbers() {
        assert_eq!(lun_key("0").map(|l| l.0).ok(), Some(0));
        assert_eq!(lun_key("16383").map(|l| l.0).ok(), Some(16383));
        assert!(matches!(lun_key("16384"), Err(E::LunNumber(_))));
        assert!(matches!(lun_key("99999999999"), Err(E::BadLunNumber(_))));
        assert!(matches!(lun_key("x"), Err(E::BadLunNumber(_))));
        assert!(matches!(lun_key("-1"), Err(E::BadLunNumber(_))));
        assert!(matches!(lun_int(-1), Err(E::BadLunNumber(_))));
        assert!(matches!(lun_int(20000), Err(E::LunNumber(_))));
    }

    #[test]
    fn names_and_enums() {
        assert!(name("vol-1.a_b:c").is_ok());
        for bad in ["", "has space", "é", &"x".repeat(65)] {
            assert!(name(bad).is_err(), "{bad}");
        }
        assert_eq!(block_size(4096).ok(), Some(BlockSize::B4096));
        assert!(block_size(1024).is_err());
        assert_eq!(physical_block_size(4096, BlockSize::B512).ok(), Some(4096));
        assert_eq!(physical_block_size(512, BlockSize::B512).ok(), Some(512));
        assert_eq!(
            physical_block_size(4096 << 15, BlockSize::B4096).ok(),
            Some(4096 << 15)
        );
        for bad in [0, 256, 1536, 3072, 512 << 16, -4096] {
            assert!(physical_block_size(bad, BlockSize::B512).is_err(), "{bad}");
        }
        assert!(physical_block_size(512, BlockSize::B4096).is_err());
        assert_eq!(alua("standby").ok(), Some(AluaState::Standby));
        assert!(alua("transitioning").is_err());
    }
}
