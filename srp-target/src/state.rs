//! The target's saved state on disk (`[target] state_dir`): what must survive a restart and
//! is not configuration: saved mode pages, persistent reservations under APTPL. Every file is replaced atomically and
//! durably: written to a temporary file beside it, `fsync`ed, renamed over the old one, and
//! the directory `fsync`ed, so a crash leaves either the old contents or the new, never a
//! torn or missing file.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

/// Replaces `path` with `bytes`, atomically and durably (see the module doc). Creates the
/// directory (mode 0700) if missing; the file is mode 0600.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "a state file needs a directory",
            )
        })?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "a state file needs a name"))?;
    let tmp = dir.join(format!(".{}.tmp", name.to_string_lossy()));
    let written = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)?;
        File::open(dir)?.sync_all()
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Removes `path` durably (the directory `fsync`ed after); a missing file is fine.
pub fn remove_durably(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    }
    match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => File::open(dir)?.sync_all(),
        None => Ok(()),
    }
}

/// The contents of `path`, or `None` if it does not exist.
pub fn read_if_present(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("srpt-state-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn replaces_whole_and_leaves_no_temporary() {
        let dir = scratch("replace");
        let p = dir.join("a.mode");
        assert_eq!(read_if_present(&p).expect("read"), None);
        write_atomically(&p, b"one").expect("write");
        write_atomically(&p, b"two, longer").expect("rewrite");
        assert_eq!(
            read_if_present(&p).expect("read"),
            Some(b"two, longer".to_vec())
        );
        let names: Vec<_> = std::fs::read_dir(&dir)
            .expect("ls")
            .filter_map(|e| e.ok().map(|e| e.file_name()))
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("a.mode")]);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&p).expect("stat").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_path_without_a_directory_is_refused() {
        assert!(write_atomically(Path::new("bare"), b"x").is_err());
    }
}
