//! The faults a drill injects and restores: an administrative path switch on the host, an
//! IOC disabled through the target's control socket, a link cut by the operator's command
//! (e.g. in network namespaces), or the target process killed and restarted by command.

use anyhow::{Context, Result, bail};
use srp_hostd::control::{HostClient, PathInfo};
use srp_target::control::{DisableMode, TargetClient};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A fault, ready to inject.
#[derive(Clone, Debug)]
pub(crate) enum Fault {
    /// `srpctl path fail <session>`, then `path restore`.
    Admin {
        /// The path's session.
        session: u32,
    },
    /// `srpctl target ioc disable <ioc>`, then `enable`.
    Ioc {
        /// The target's control socket.
        socket: PathBuf,
        /// The IOC's `[[ioc]]` name.
        ioc: String,
        /// How its sessions end.
        mode: DisableMode,
    },
    /// Shell commands that cut and restore the link.
    Link {
        /// Cuts the link.
        down: String,
        /// Restores it.
        up: String,
    },
    /// Shell commands that kill and restart the target (or one IOC's process).
    Kill {
        /// Kills it.
        kill: String,
        /// Starts it again (must return: start the daemon in the background).
        restart: String,
    },
}

impl Fault {
    /// What the fault is, for the report.
    pub(crate) fn describe(&self) -> String {
        match self {
            Fault::Admin { session } => format!("path {session} administratively failed"),
            Fault::Ioc { ioc, mode, .. } => format!(
                "IOC {ioc} disabled on the target ({})",
                match mode {
                    DisableMode::Logout => "sessions logged out",
                    DisableMode::Drop => "sessions dropped without a word",
                }
            ),
            Fault::Link { down, .. } => format!("link cut: {down}"),
            Fault::Kill { kill, .. } => format!("target killed: {kill}"),
        }
    }

    /// Injects the fault (`host`: the host daemon's control socket).
    pub(crate) fn inject(&self, host: &Path) -> Result<()> {
        match self {
            Fault::Admin { session } => {
                HostClient::connect(host)?.set_path(*session, false)?;
            }
            Fault::Ioc { socket, ioc, mode } => {
                target(socket)?.set_ioc(ioc, false, *mode)?;
            }
            Fault::Link { down, .. } => shell(down)?,
            Fault::Kill { kill, .. } => shell(kill)?,
        }
        Ok(())
    }

    /// Undoes the fault.
    pub(crate) fn restore(&self, host: &Path) -> Result<()> {
        match self {
            Fault::Admin { session } => {
                HostClient::connect(host)?.set_path(*session, true)?;
            }
            Fault::Ioc { socket, ioc, mode } => {
                target(socket)?.set_ioc(ioc, true, *mode)?;
            }
            Fault::Link { up, .. } => shell(up)?,
            Fault::Kill { restart, .. } => shell(restart)?,
        }
        Ok(())
    }
}

fn target(socket: &Path) -> Result<TargetClient> {
    TargetClient::connect(socket).with_context(|| {
        format!(
            "cannot reach the target's control socket {} (--target-socket)",
            socket.display()
        )
    })
}

/// The target IOC serving `path`: the one whose name is the path's IOC name (its
/// Device Management IDString), else whose GUID is the path's.
pub(crate) fn ioc_of(socket: &Path, path: &PathInfo) -> Result<String> {
    let iocs = target(socket)?.iocs()?;
    let guid = u64::from_str_radix(path.ioc_guid.trim_start_matches("0x"), 16).ok();
    iocs.iter()
        .find(|i| !path.ioc_name.is_empty() && i.name == path.ioc_name)
        .or_else(|| iocs.iter().find(|i| Some(i.guid) == guid))
        .map(|i| i.name.clone())
        .with_context(|| {
            format!(
                "the target at {} has no IOC named {:?} or with GUID {} (its IOCs: {})",
                socket.display(),
                path.ioc_name,
                path.ioc_guid,
                iocs.iter().map(|i| i.name.as_str()).collect::<Vec<_>>().join(", ")
            )
        })
}

/// Runs `cmd` with `sh -c`; an error unless it exits 0.
fn shell(cmd: &str) -> Result<()> {
    let status = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .status()
        .with_context(|| format!("running {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed ({status})");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_commands_report_failure() {
        let f = Fault::Link {
            down: "true".into(),
            up: "exit 3".into(),
        };
        let nowhere = Path::new("/nonexistent.sock");
        f.inject(nowhere).expect("true succeeds");
        let e = f.restore(nowhere).expect_err("exit 3 fails");
        assert!(e.to_string().contains("exit 3"), "{e}");
    }
}
