//! What an operator changed at run time that must outlive a restart (as multipathd keeps
//! its wwids and a policy set with `multipathd` stays for the device): each disk's
//! load-balance policy set by `srpctl policy set`, and each path taken down by `srpctl path
//! fail`, recorded in `<state_dir>/paths.json` and applied again when the disk or the path
//! comes back — after a daemon restart, or after a login that was lost.
//!
//! A path is named by what outlives a session: the disk's identity, the IOC's GUID, the
//! portal and the local address (session numbers are new at every login). The file is
//! written as [`crate::persist`] writes the persistent logins — a temporary file synced
//! and renamed — and one that does not parse is kept aside (`paths.json.bad`), logged at
//! error level, and the daemon starts without it.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The file's name in the state directory.
pub const FILE: &str = "paths.json";

/// A path as it outlives its session.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PathName {
    /// The disk's identity (`naa.…`).
    pub disk: String,
    /// The IOC's GUID (`0x…`).
    pub ioc_guid: String,
    /// The portal address.
    pub portal: String,
    /// The local address.
    pub local: String,
}

/// The recorded state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
struct Contents {
    /// Disk identity → policy name.
    policies: BTreeMap<String, String>,
    /// Paths an operator took down.
    paths_down: BTreeSet<PathName>,
}

/// The saved state and where it lives.
#[derive(Debug)]
pub struct SavedPaths {
    path: PathBuf,
    contents: Contents,
}

impl SavedPaths {
    /// The state kept in `state_dir` (none yet: empty).
    pub fn load(state_dir: &Path) -> SavedPaths {
        let path = state_dir.join(FILE);
        let contents = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                let bad = path.with_extension("json.bad");
                let kept = std::fs::rename(&path, &bad).is_ok();
                tracing::error!(file = %path.display(), %e, kept_aside = kept,
                    "the saved policies and path states do not parse; starting without them");
                Contents::default()
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Contents::default(),
            Err(e) => {
                tracing::error!(file = %path.display(), %e,
                    "cannot read the saved policies and path states; starting without them");
                Contents::default()
            }
        };
        SavedPaths { path, contents }
    }

    /// The policy saved for disk `identity`.
    pub fn policy(&self, identity: &str) -> Option<&str> {
        self.contents.policies.get(identity).map(String::as_str)
    }

    /// Whether path `p` was taken down by an operator.
    pub fn is_down(&self, p: &PathName) -> bool {
        self.contents.paths_down.contains(p)
    }

    /// Records disk `identity`'s policy.
    pub fn set_policy(&mut self, identity: &str, policy: &str) -> std::io::Result<()> {
        self.contents
            .policies
            .insert(identity.to_owned(), policy.to_owned());
        self.write()
    }

    /// Records path `p` down (`down`) or back in service.
    pub fn set_down(&mut self, p: PathName, down: bool) -> std::io::Result<()> {
        let changed = if down {
            self.contents.paths_down.insert(p)
        } else {
            self.contents.paths_down.remove(&p)
        };
        if changed { self.write() } else { Ok(()) }
    }

    fn write(&self) -> std::io::Result<()> {
        crate::persist::write_json(&self.path, &self.contents)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(local: &str) -> PathName {
        PathName {
            disk: "naa.6001405aa".into(),
            ioc_guid: "0x0002c90300a1b2c3".into(),
            portal: "192.0.2.10".into(),
            local: local.into(),
        }
    }

    #[test]
    fn what_is_saved_comes_back_and_a_bad_file_is_kept_aside() {
        let dir = std::env::temp_dir().join(format!("srp-hostd-saved-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut s = SavedPaths::load(&dir);
        assert_eq!(s.policy("naa.6001405aa"), None);
        s.set_policy("naa.6001405aa", "least-queue-depth")
            .expect("write");
        s.set_down(name("192.0.2.20"), true).expect("write");
        s.set_down(name("192.0.2.21"), true).expect("write");
        s.set_down(name("192.0.2.21"), false).expect("write");
        let again = SavedPaths::load(&dir);
        assert_eq!(again.policy("naa.6001405aa"), Some("least-queue-depth"));
        assert!(again.is_down(&name("192.0.2.20")));
        assert!(!again.is_down(&name("192.0.2.21")));
        std::fs::write(dir.join(FILE), b"{ not json").expect("garble");
        let fresh = SavedPaths::load(&dir);
        assert_eq!(fresh.policy("naa.6001405aa"), None);
        assert!(dir.join("paths.json.bad").exists(), "kept aside");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
