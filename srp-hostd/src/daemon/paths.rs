//! Exposing a session's LUNs as paths of multipath disks, and taking paths, disks and
//! sessions away.

use super::{Exposure, Shared, lock};
use crate::disk::SrpDisk;
use crate::scan::scan;
use crate::session::{Session, SessionDisk};
use mpio::{DiskIdentity, MultipathDisk, PathLabel, PathSpec};
use srp_host::BlockDevice;
use std::sync::Arc;
use std::time::Duration;

impl Shared {
    /// Removes session `id` and its disks; the block files it had.
    pub(super) fn drop_session(&self, id: u32) -> Option<Vec<String>> {
        let s = lock(&self.state).sessions.remove(&id)?;
        s.leave_suspend(self.config().login_timeout);
        let removed = self.remove_disks(&s);
        s.close();
        self.bus.remove(id);
        Some(removed)
    }

    /// Takes every path of `s` away; the disks removed with their last path.
    pub(super) fn remove_disks(&self, s: &Session) -> Vec<String> {
        let disks = std::mem::take(&mut *s.disks());
        disks
            .iter()
            .filter_map(|d| self.remove_path(s.id(), d))
            .collect()
    }

    /// A path an operator took down before (saved state) goes down again as it comes back.
    fn restore_saved_down(&self, mp: &MultipathDisk, session: u32, down: bool) {
        if down && mp.set_admin(session, false, std::time::Instant::now()) {
            tracing::info!(
                name = %mp.identity().identity,
                session,
                "path down as an operator left it (saved state)"
            );
        }
    }

    /// Scans `s` and brings its paths in line: each LUN found becomes a path of the
    /// multipath disk of its identity (created and exposed on its first path); vanished
    /// LUNs lose their path (a disk with none left disappears).
    pub(super) fn expose(&self, s: &Arc<Session>) {
        let timeout = self.config().cmd_timeout;
        let service = s.service();
        let target_port = format!("{:016x}{:016x}", service.id_ext, service.ioc_guid.0);
        let found = match scan(
            s.port(),
            self.dsm.as_ref(),
            self.config().max_luns,
            timeout,
            &target_port,
        ) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(session = s.id(), %e, "LUN scan");
                return;
            }
        };
        for why in &found.skipped {
            if s.first_note(why) {
                tracing::info!(session = s.id(), "LUN skipped: {why}");
            }
        }
        let gone: Vec<SessionDisk> = {
            let mut disks = s.disks();
            let (keep, gone) = std::mem::take(&mut *disks)
                .into_iter()
                .partition(|d| found.keeps(d.disk.info().lun, &d.disk.info().identity));
            *disks = keep;
            gone
        };
        for d in gone {
            tracing::info!(name = d.name, session = s.id(), "LUN gone from the session");
            self.remove_path(s.id(), &d);
        }
        let config = self.config();
        let portal = config
            .portals
            .iter()
            .find(|p| p.address == s.service().portal);
        for info in found.luns {
            if s.disks().iter().any(|d| d.disk.info().lun == info.lun) {
                continue;
            }
            let name = info.identity.clone();
            let lun = info.lun;
            let id = info.id.clone();
            let identity = DiskIdentity {
                identity: info.identity.clone(),
                vendor: info.vendor.clone(),
                product: info.product.clone(),
                revision: info.revision.clone(),
                block_size: info.block_size,
                blocks: info.blocks,
            };
            let disk = Arc::new(SrpDisk::new(
                s.port().clone(),
                info,
                self.config().max_transfer,
                self.srb_timeout(),
            ));
            let service = s.service();
            let spec: PathSpec = PathSpec {
                key: s.id(),
                lun,
                device: disk.clone(),
                id,
                preferred: portal.is_some_and(|p| p.preferred),
                weight: portal.map_or(1, |p| p.weight),
                label: PathLabel {
                    ioc_guid: format!("{:#018x}", service.ioc_guid.0),
                    ioc_name: service.ioc_name.clone(),
                    portal: service.portal.to_string(),
                    local: s.local().to_string(),
                },
            };
            let saved_down = lock(&self.saved).is_down(&crate::saved::PathName {
                disk: name.clone(),
                ioc_guid: spec.label.ioc_guid.clone(),
                portal: spec.label.portal.clone(),
                local: spec.label.local.clone(),
            });
            let existing = lock(&self.state).disks.get(&name).cloned();
            match existing {
                Some(mp)
                    if mp.identity().block_size == identity.block_size
                        && mp.identity().blocks == identity.blocks =>
                {
                    mp.add_path(spec);
                    tracing::info!(name, session = s.id(), "another path to the disk");
                    self.restore_saved_down(&mp, s.id(), saved_down);
                }
                Some(_) => {
                    if s.first_note(&format!("refused {lun} {name}")) {
                        tracing::warn!(
                            name,
                            session = s.id(),
                            lun,
                            "the same identity with another geometry: path refused"
                        );
                    }
                    disk.set_gone();
                    continue;
                }
                None => {
                    let mp = Arc::new(MultipathDisk::new(
                        identity,
                        self.dsm.clone(),
                        self.config().multipath,
                    ));
                    let saved = lock(&self.saved).policy(&name).map(str::to_owned);
                    if let Some(p) = saved.as_deref().and_then(mpio::Policy::parse) {
                        mp.set_policy(p);
                        tracing::info!(name, policy = p.name(), "saved policy applied");
                    }
                    mp.add_path(spec);
                    self.restore_saved_down(&mp, s.id(), saved_down);
                    if let Exposure::Files(f) = &self.exposure {
                        let dev: Arc<dyn BlockDevice> = mp.clone();
                        if let Err(e) = f.add(&name, dev) {
                            tracing::warn!(%e, name, "exposing a disk");
                            disk.set_gone();
                            continue;
                        }
                    }
                    lock(&self.state).disks.insert(name.clone(), mp);
                }
            }
            s.disks().push(SessionDisk { name, disk });
        }
    }

    /// Takes session `key`'s path `d` away from its disk; the disk's name if it had no
    /// path left and is gone.
    fn remove_path(&self, key: u32, d: &SessionDisk) -> Option<String> {
        d.disk.set_gone();
        let mp = lock(&self.state).disks.get(&d.name).cloned()?;
        if mp.remove_path(key) > 0 {
            return None;
        }
        lock(&self.state).disks.remove(&d.name);
        if let Exposure::Files(f) = &self.exposure
            && let Err(e) = f.remove(&d.name)
        {
            tracing::warn!(%e, name = d.name, "removing a block file");
        }
        tracing::info!(name = d.name, "last path gone: disk removed");
        Some(d.name.clone())
    }

    /// An SRB's timeout: long enough for the core's own command timeout and escalation,
    /// and for I/O held across a reconnect until fast_io_fail.
    fn srb_timeout(&self) -> Duration {
        let t = &self.config().timers;
        let held = t
            .fast_io_fail()
            .or(t.dev_loss())
            .unwrap_or(Duration::from_secs(60));
        self.config().cmd_timeout * 2 + held + self.config().login_timeout
    }
}
