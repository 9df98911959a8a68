//! Checks across entries of one kind: port addresses, LUN backing paths, IOC GUIDs and
//! service IDs must each be unique. (Names are checked as entries are declared.)

use super::error::{ConfigErrorKind as E, KeyPath, Sink};
use super::{Backing, IocConfig, LunConfig, PortConfig};
use std::collections::HashMap;
use std::path::Path;

/// Two ports cannot listen on one address.
pub(super) fn unique_addresses(ports: &[Option<PortConfig>], paths: &[KeyPath], sink: &mut Sink) {
    let mut first: HashMap<std::net::SocketAddr, &KeyPath> = HashMap::new();
    for (p, path) in ports.iter().zip(paths) {
        let Some(p) = p else { continue };
        if let Some(prev) = first.get(&p.address) {
            let (addr, first) = (p.address.to_string(), prev.to_string());
            sink.key(&path.key("address"), E::DuplicateAddress { addr, first });
        } else {
            first.insert(p.address, path);
        }
    }
}

/// Two LUNs on one path would corrupt each other. Paths compare by components (so
/// `/a//b` is `/a/b`); symlinks are not resolved, as that would touch the file system.
pub(super) fn unique_backings(luns: &[Option<LunConfig>], paths: &[KeyPath], sink: &mut Sink) {
    let mut first: HashMap<&Path, &KeyPath> = HashMap::new();
    let mut images: HashMap<(&Path, String), &KeyPath> = HashMap::new();
    for (l, path) in luns.iter().zip(paths) {
        let (key, p) = match l.as_ref().map(|l| &l.backing) {
            Some(Backing::File { path: p, .. }) => ("file", p.as_path()),
            Some(Backing::Device { path: p }) => ("device", p.as_path()),
            // One image of one cluster (by its configuration file), one LUN.
            Some(Backing::Rbd(b)) => {
                if let Some(prev) = images.get(&(b.conf.as_path(), b.name())) {
                    let (shown, first) = (format!("rbd {}", b.name()), prev.to_string());
                    sink.key(&path.key("rbd"), E::DuplicateBacking { path: shown, first });
                } else {
                    images.insert((b.conf.as_path(), b.name()), path);
                }
                continue;
            }
            _ => continue,
        };
        if let Some(prev) = first.get(p) {
            let (shown, first) = (p.display().to_string(), prev.to_string());
            sink.key(&path.key(key), E::DuplicateBacking { path: shown, first });
        } else {
            first.insert(p, path);
        }
    }
}

/// IOC GUIDs and CM service IDs must be unique. A duplicate (GUID, id_ext) target port ID
/// needs a duplicate GUID, so the GUID check covers it.
pub(super) fn unique_ioc_ids(iocs: &[Option<IocConfig>], paths: &[KeyPath], sink: &mut Sink) {
    let mut guids = HashMap::new();
    let mut services = HashMap::new();
    for (ioc, path) in iocs.iter().zip(paths) {
        let Some(ioc) = ioc else { continue };
        if let Some(prev) = guids.get(&ioc.guid) {
            let (guid, first) = (ioc.guid.to_string(), KeyPath::to_string(prev));
            sink.key(&path.key("guid"), E::DuplicateGuid { guid, first });
            // Its default service ID would repeat the same complaint.
            continue;
        }
        guids.insert(ioc.guid, path.clone());
        if let Some(prev) = services.get(&ioc.service_id) {
            let (id, first) = (ioc.service_id.0, KeyPath::to_string(prev));
            sink.key(&path.key("service_id"), E::DuplicateServiceId { id, first });
        } else {
            services.insert(ioc.service_id, path.clone());
        }
    }
}
