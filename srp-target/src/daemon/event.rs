//! What the daemon reports, for the log and for tests.

use crate::login::ChannelId;
use access_layer::mad::ServiceId;
use access_layer::mad::cm::CmRejReason;
use srp::wire::PortId;
use std::fmt;
use std::net::IpAddr;

/// One thing that happened to a login or a channel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DaemonEvent {
    /// A login was accepted and its channel created.
    Login {
        /// The new channel.
        channel: ChannelId,
        /// The IOC's name.
        ioc: String,
        /// The initiator port ID.
        initiator: PortId,
        /// "IB CM" or "RDMA-CM".
        form: &'static str,
        /// Channels of the nexus closed by MULTI-CHANNEL ACTION single.
        terminated: Vec<ChannelId>,
    },
    /// A login was refused.
    Rejected {
        /// The IOC's name, when one was found.
        ioc: Option<String>,
        /// The initiator port ID, when the login parsed.
        initiator: Option<PortId>,
        /// The SRP_LOGIN_REJ reason code.
        code: u32,
        /// Why, in words.
        reason: String,
    },
    /// A CM REQ was refused below SRP: no IOC serves its service ID (the IB CM form to an
    /// unknown IOC, or the RDMA-CM form to a port nobody listens on).
    CmRefused {
        /// The `[[port]]` it came in on.
        port: String,
        /// The sender's address.
        from: IpAddr,
        /// The service ID asked for.
        service_id: u64,
        /// The CM REJ reason sent (8: invalid service ID).
        reason: u16,
    },
    /// A channel closed.
    Logout {
        /// The channel.
        channel: ChannelId,
        /// Why (initiator logout, fault, single-channel login, shutdown, disconnect).
        reason: String,
    },
    /// A configuration reload was applied: what changed, one line each.
    Reloaded {
        /// The changes.
        changes: Vec<String>,
    },
}

impl fmt::Display for DaemonEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DaemonEvent::Login {
                channel,
                ioc,
                initiator,
                form,
                terminated,
            } => {
                write!(f, "login {channel}: {ioc} from {initiator} ({form})")?;
                if !terminated.is_empty() {
                    let t: Vec<String> = terminated.iter().map(ToString::to_string).collect();
                    write!(f, ", terminating {}", t.join(", "))?;
                }
                Ok(())
            }
            DaemonEvent::Rejected {
                ioc,
                initiator,
                code,
                reason,
            } => {
                write!(f, "login rejected ({code:#010x}): {reason}")?;
                if let Some(i) = ioc {
                    write!(f, "; ioc {i}")?;
                }
                if let Some(p) = initiator {
                    write!(f, "; initiator {p}")?;
                }
                Ok(())
            }
            DaemonEvent::CmRefused {
                port,
                from,
                service_id,
                reason,
            } if *reason == u16::from(CmRejReason::InvalidGid) => write!(
                f,
                "CM REQ from {from} on port {port} refused (CM REJ reason {reason}): its primary \
                 path names another address than the one it came from (forged or misrouted) — \
                 service ID {service_id:#018x}"
            ),
            DaemonEvent::CmRefused {
                port,
                from,
                service_id,
                reason,
            } => {
                write!(
                    f,
                    "CM REQ from {from} on port {port} refused (CM REJ reason {reason}): no IOC \
                     serves service ID {service_id:#018x}"
                )?;
                if let Some((ps, p)) = ServiceId(*service_id).rdma_ip_parts() {
                    write!(f, " (RDMA-CM {ps:?} port {p})")?;
                }
                Ok(())
            }
            DaemonEvent::Logout { channel, reason } => write!(f, "logout {channel}: {reason}"),
            DaemonEvent::Reloaded { changes } if changes.is_empty() => {
                write!(f, "reload: the file equals the running configuration")
            }
            DaemonEvent::Reloaded { changes } => write!(f, "reload: {}", changes.join("; ")),
        }
    }
}
