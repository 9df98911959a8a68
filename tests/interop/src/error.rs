//! The harness's error type.

use std::path::PathBuf;
use std::time::Duration;

/// Everything the harness can fail with. Guest-side failures carry what the guest printed
/// (and boot failures the console tail) so a test failure explains itself.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The cache is missing or incomplete, or `scripts/interop-setup.sh` failed.
    #[error("interop setup: {0}")]
    Setup(String),
    /// A host-side I/O operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A host command (`ip`, `dumpcap`, …) failed.
    #[error("host command `{cmd}` failed: {detail}")]
    Host {
        /// The command line.
        cmd: String,
        /// Its exit status and standard error.
        detail: String,
    },
    /// The guest did not come up (the agent did not answer in time, or QEMU exited).
    #[error("guest did not boot: {reason}\n--- console tail ({}) ---\n{tail}", console.display())]
    Boot {
        /// Why the boot was abandoned.
        reason: String,
        /// The full console log (kept on failure).
        console: PathBuf,
        /// The last lines of the console log.
        tail: String,
    },
    /// A guest command ran out of time. `responsive` tells whether the agent still reported
    /// (the command was killed in the guest) or not (the guest may be wedged).
    #[error(
        "guest command timed out after {after:?} (agent {}): {script}\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
        if *responsive { "killed it" } else { "did not report back" }
    )]
    Timeout {
        /// The first line of the script.
        script: String,
        /// The timeout that expired.
        after: Duration,
        /// Whether the agent reported the kill.
        responsive: bool,
        /// Whatever the command printed before it was stopped.
        stdout: String,
        /// Its standard error so far.
        stderr: String,
    },
    /// A guest command exited non-zero where success was required.
    #[error(
        "guest command exited {rc}: {script}\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}"
    )]
    Command {
        /// The first line of the script.
        script: String,
        /// Its exit code.
        rc: i32,
        /// Its standard output.
        stdout: String,
        /// Its standard error.
        stderr: String,
    },
    /// The agent connection closed (QEMU exited or the guest crashed).
    #[error("guest agent is gone: {reason}\n--- console tail ---\n{tail}")]
    AgentGone {
        /// What was going on.
        reason: String,
        /// The last lines of the console log.
        tail: String,
    },
    /// An SRP login (write to `add_target`) failed; `dmesg` holds the kernel's lines since the
    /// attempt, `reason` the one that explains it best.
    #[error("SRP login failed: {reason}\n--- dmesg since the login ---\n{dmesg}")]
    Login {
        /// The most telling line (a reject reason, a failed step).
        reason: String,
        /// Everything the kernel logged since the attempt began.
        dmesg: String,
    },
    /// A guest-side step did not reach the expected state (a device did not appear, …).
    #[error("{0}")]
    Guest(String),
}

/// The harness's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An [`Error::Io`] naming what was being done.
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let what = what.into();
        move |source| Error::Io { what, source }
    }
}
