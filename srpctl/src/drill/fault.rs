//! The faults a drill injects and restores: an administrative path switch on the host, an
//! IOC disabled through the target's control socket, a link cut by the operator's command
//! (e.g. in network namespaces), or the target process killed and restarted by command.

use anyhow::{Context, Result, bail};
use srp_hostd::control::{HostClient, PathInfo};
use srp_target::control::{DisableMode, TargetClient};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// A shell started before the drill opens the block file, which runs the operator's fault
/// commands. Not spawned from the drill itself: a child exec'd by a process holding the
/// FUSE block file closes its inherited descriptor, which is a FUSE FLUSH — a SYNCHRONIZE
/// CACHE that waits for a path, exactly while a kill or link cut has taken them all.
#[derive(Debug)]
pub(crate) struct Shell {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

/// What the shell prints after each command, with its exit status.
const DONE: &str = "__SRPCTL_DRILL_STATUS=";

impl Shell {
    /// Starts `sh -s`, reading commands from a pipe.
    pub(crate) fn start() -> Result<Shell> {
        let mut child = Command::new("sh")
            .arg("-s")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("starting sh for the fault commands")?;
        let (Some(input), Some(output)) = (child.stdin.take(), child.stdout.take()) else {
            bail!("sh without pipes");
        };
        Ok(Shell {
            child,
            input,
            output: BufReader::new(output),
        })
    }

    /// Runs `cmd` (in its own `sh -c`, output to stderr, no stdin); an error unless it
    /// exits 0.
    fn run(&mut self, cmd: &str) -> Result<()> {
        let quoted = format!("'{}'", cmd.replace('\'', r"'\''"));
        writeln!(
            self.input,
            "sh -c {quoted} </dev/null 1>&2; echo \"{DONE}$?\""
        )
        .and_then(|()| self.input.flush())
        .context("the fault commands' shell is gone")?;
        let mut line = String::new();
        loop {
            line.clear();
            if self.output.read_line(&mut line)? == 0 {
                bail!("the fault commands' shell exited while running {cmd:?}");
            }
            if let Some(status) = line.trim_end().strip_prefix(DONE) {
                if status == "0" {
                    return Ok(());
                }
                bail!("{cmd:?} failed (exit status {status})");
            }
        }
    }
}

impl Drop for Shell {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fault, ready to inject.
#[derive(Debug)]
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
        /// Runs them.
        shell: Shell,
    },
    /// Shell commands that kill and restart the target (or one IOC's process).
    Kill {
        /// Kills it.
        kill: String,
        /// Starts it again (must return: start the daemon in the background).
        restart: String,
        /// Runs them.
        shell: Shell,
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
    pub(crate) fn inject(&mut self, host: &Path) -> Result<()> {
        match self {
            Fault::Admin { session } => {
                HostClient::connect(host)?.set_path(*session, false)?;
            }
            Fault::Ioc { socket, ioc, mode } => {
                target(socket)?.set_ioc(ioc, false, *mode)?;
            }
            Fault::Link { down, shell, .. } => shell.run(down)?,
            Fault::Kill { kill, shell, .. } => shell.run(kill)?,
        }
        Ok(())
    }

    /// Undoes the fault.
    pub(crate) fn restore(&mut self, host: &Path) -> Result<()> {
        match self {
            Fault::Admin { session } => {
                HostClient::connect(host)?.set_path(*session, true)?;
            }
            Fault::Ioc { socket, ioc, mode } => {
                target(socket)?.set_ioc(ioc, true, *mode)?;
            }
            Fault::Link { up, shell, .. } => shell.run(up)?,
            Fault::Kill { restart, shell, .. } => shell.run(restart)?,
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
                iocs.iter()
                    .map(|i| i.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_commands_report_failure() {
        let mut f = Fault::Link {
            down: r#"test "$(echo "it's 'quoted'")" = "it's 'quoted'""#.into(),
            up: "exit 3".into(),
            shell: Shell::start().expect("sh"),
        };
        let nowhere = Path::new("/nonexistent.sock");
        f.inject(nowhere).expect("true succeeds");
        let e = f.restore(nowhere).expect_err("exit 3 fails");
        assert!(e.to_string().contains("exit status 3"), "{e}");
        // A syntax error ends only its own command's shell.
        let Fault::Link { shell, .. } = &mut f else {
            panic!("link");
        };
        assert!(shell.run("if then").is_err());
        shell.run("true").expect("the shell goes on");
    }
}
