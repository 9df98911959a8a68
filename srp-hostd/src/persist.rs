//! The persistent logins (the iSCSI initiator's `PersistentLogins`): logins an operator
//! asked to keep, recorded in `<state_dir>/persistent-logins.json` and established again
//! at every start of the daemon (and at every sweep while one has no session).
//!
//! Contract: [`PersistentLogins::load`] reads the file (none yet: an empty list); a file
//! that does not parse is not overwritten — it is renamed `persistent-logins.json.bad`,
//! the reason logged at error level, and the list starts empty. [`PersistentLogins::add`]
//! and [`PersistentLogins::remove`] write the whole list to a temporary file, sync it and
//! rename it over the old one: a crash leaves the old list or the new one, never a mix.

use crate::control::LoginSpec;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The file's name in the state directory.
pub const FILE: &str = "persistent-logins.json";

/// The list and where it lives.
#[derive(Debug)]
pub struct PersistentLogins {
    path: PathBuf,
    logins: Vec<LoginSpec>,
}

impl PersistentLogins {
    /// The list kept in `state_dir` (see the module contract).
    pub fn load(state_dir: &Path) -> PersistentLogins {
        let path = state_dir.join(FILE);
        let logins = match std::fs::read(&path) {
            Ok(bytes) => match serde_json::from_slice::<Vec<LoginSpec>>(&bytes) {
                Ok(v) => v,
                Err(e) => {
                    let bad = path.with_extension("json.bad");
                    let kept = std::fs::rename(&path, &bad).is_ok();
                    tracing::error!(
                        file = %path.display(),
                        %e,
                        kept_as = %if kept { bad.display().to_string() } else { "(not renamed)".into() },
                        "the persistent logins do not parse; starting without them"
                    );
                    Vec::new()
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => {
                tracing::error!(file = %path.display(), %e, "cannot read the persistent logins; starting without them");
                Vec::new()
            }
        };
        if !logins.is_empty() {
            tracing::info!(count = logins.len(), file = %path.display(), "persistent logins loaded");
        }
        PersistentLogins { path, logins }
    }

    /// The logins, in the order they were added.
    pub fn list(&self) -> &[LoginSpec] {
        &self.logins
    }

    /// Records `spec` (persistent set) unless the same login is there; writes the file.
    pub fn add(&mut self, spec: &LoginSpec) -> std::io::Result<()> {
        if self.logins.iter().any(|l| l.same_login(spec)) {
            return Ok(());
        }
        let mut spec = spec.clone();
        spec.persistent = true;
        self.logins.push(spec);
        let saved = self.save();
        if saved.is_err() {
            self.logins.pop();
        }
        saved
    }

    /// Forgets login `index`; writes the file. `None` if there is no such index.
    pub fn remove(&mut self, index: usize) -> Option<std::io::Result<LoginSpec>> {
        if index >= self.logins.len() {
            return None;
        }
        let gone = self.logins.remove(index);
        Some(match self.save() {
            Ok(()) => Ok(gone),
            Err(e) => {
                self.logins.insert(index, gone);
                Err(e)
            }
        })
    }

    /// Writes the list ([`write_json`]).
    fn save(&self) -> std::io::Result<()> {
        write_json(&self.path, &self.logins)
    }
}

/// Writes `value` as JSON to `path` so that a crash leaves the old file or the new one,
/// never a mix: a temporary file beside it, synced, renamed over it, the directory synced.
pub(crate) fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("json.tmp");
    let body = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(&body)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("srp-persist-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn logins_are_kept_across_loads_once_each_and_forgotten() {
        let d = dir("keep");
        let mut p = PersistentLogins::load(&d);
        assert!(p.list().is_empty());
        let mut spec = LoginSpec::to("127.0.0.9".parse().expect("ip"));
        spec.ioc_guid = Some("0x2".into());
        p.add(&spec).expect("saved");
        p.add(&spec).expect("the same login is not added twice");
        let again = PersistentLogins::load(&d);
        assert_eq!(again.list().len(), 1);
        assert!(again.list()[0].persistent && again.list()[0].same_login(&spec));
        let mut again = again;
        assert!(again.remove(3).is_none());
        let gone = again.remove(0).expect("index 0").expect("saved");
        assert!(gone.same_login(&spec));
        assert!(PersistentLogins::load(&d).list().is_empty());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_garbled_file_is_set_aside_not_overwritten() {
        let d = dir("bad");
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::write(d.join(FILE), b"{not json").expect("write");
        let p = PersistentLogins::load(&d);
        assert!(p.list().is_empty());
        assert_eq!(
            std::fs::read(d.join("persistent-logins.json.bad")).expect("kept"),
            b"{not json"
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}
