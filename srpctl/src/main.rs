//! `srpctl`: the operator's command line for the SRP storage stack.
//!
//! Today: `decode` (any SRP IU, RDMA-CM login, CDB, sense data or MAD, field by field),
//! `demo` (a real target daemon and host daemon on loopback, in process: one LUN behind two
//! IOCs, one multipath disk over two paths, I/O verified over both paths and through each
//! alone; `--wire`: the message-by-message walk-through, every message of discovery, login
//! and I/O encoded, decoded and checked), `target check` (validate a target configuration
//! and show what it exports), `target run` (the target daemon), `target
//! iocs|ports|luns|sessions` and `target ioc|port|lun` (a running target's control socket),
//! `host run|check` (the host daemon),
//! `login|logout|persistent|sessions|targets|portals|disks|paths`, `policy set` and `path
//! fail|restore` (a running host's control socket), `drill failover` (a verifying workload
//! through a fault on one path), `discover` (a portal's IOCs, as ibsrpdm), `bench hca`,
//! `bench disk`, `bench copy`, `man` and `completions` (manual pages and shell completion
//! scripts from these definitions). The daemons' log: [`log`] (`SRPCTL_LOG`,
//! `SRPCTL_LOG_FORMAT`).

/// `println!` for what a daemon reports while it runs: a stdout that was closed (a reader
/// that went away, `| head`) loses the line instead of killing the daemon with EPIPE.
macro_rules! daemon_say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// The system allocator with a count, off until `bench disk` measures allocations per I/O.
#[global_allocator]
static ALLOCATOR: ib_verbs::mem::CountingAlloc = ib_verbs::mem::CountingAlloc;

mod bench;
mod counters;
mod decode;
mod demo;
mod devices;
mod discover;
mod drill;
mod hex;
mod host;
mod host_ctl;
mod install;
mod log;
mod man;
mod metrics_http;
mod notify;
mod table;
mod target;
mod target_ctl;

use anyhow::Result;
use clap::{CommandFactory, Parser, Subcommand};
use std::path::PathBuf;

/// Command line for the SRP (SCSI RDMA Protocol) target, initiator and multipath stack.
#[derive(Parser, Debug)]
#[command(name = "srpctl", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Decode wire bytes field by field (SRP IU, RDMA-CM login, CDB, sense data, MAD).
    Decode {
        /// What the bytes are.
        #[arg(value_enum)]
        kind: decode::Kind,
        /// A file of raw bytes, or `-` to read hex text from stdin.
        file: Option<PathBuf>,
        /// The bytes as hex text (spaces, colons, `0x` and `#` comments allowed).
        #[arg(long)]
        hex: Option<String>,
        /// Immediate-data offset negotiated at login, for SRP_CMD.
        #[arg(long, default_value_t = srp::wire::cmd::DEFAULT_IMM_DATA_OFFSET)]
        imm_offset: u16,
    },
    /// Run a real SRP target and host on loopback, with I/O verified over two paths.
    ///
    /// In this process, on embedded defaults: a target daemon serves a 64 MiB file-backed
    /// LUN through two IOCs (127.0.200.1 and 127.0.200.4); a host daemon sweeps both portals
    /// over Device Management and logs in to each from its own address: one multipath disk
    /// over two paths. 8 MiB are written through the disk (its FUSE block file when run as
    /// root with /dev/fuse, else the disk in process), flushed and read back round robin
    /// over both paths, then read again through each path alone (the other one
    /// administratively failed); the target's backing file must hold the same bytes. Exits
    /// non-zero on any mismatch or error; everything lives in a temporary directory removed
    /// at the end.
    ///
    /// With --wire: the message-by-message walk-through instead, every message of
    /// discovery, login and I/O built, encoded, decoded and re-encoded, byte for byte
    /// checked (nothing crosses a fabric).
    Demo {
        /// Instead of the live run, walk through every message of discovery, login and I/O
        /// at the wire level: built, encoded, decoded and checked byte for byte.
        #[arg(long)]
        wire: bool,
        /// With --wire: also print every message as a hex dump.
        #[arg(long, requires = "wire")]
        dump: bool,
    },
    /// The SRP host daemon: run it, or check its configuration.
    Host {
        #[command(subcommand)]
        what: HostWhat,
    },
    /// A running host daemon's sessions and disks; login and logout.
    #[command(flatten)]
    HostCtl(host_ctl::HostCtl),
    /// Ask a portal's Device Management agent what it serves (as ibsrpdm): its IOCs with
    /// their profiles and SRP service entries.
    Discover {
        /// The portal: the target port's IP address.
        portal: std::net::IpAddr,
        /// The local address to ask from (a soft RoCE port is opened there for the query);
        /// default: the address the kernel routes to the portal from.
        #[arg(long)]
        local: Option<std::net::IpAddr>,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 5.0)]
        timeout: f64,
        /// The partition to ask on (a P_Key in hex): a target lists the IOCs exported on it.
        #[arg(long, default_value = "0xffff")]
        partition: ib_verbs::PKey,
        /// Print JSON.
        #[arg(long, conflicts_with = "login_strings")]
        json: bool,
        /// Print Linux ib_srp add_target strings, one per SRP service: the RDMA-CM form
        /// (`dest=<portal>:<port>`, what Linux over RoCE logs in with), or with --ib-cm the
        /// IB CM form ibsrpdm -c prints (`dgid=…,service_id=…`, which needs a subnet manager).
        #[arg(long)]
        login_strings: bool,
        /// The target's RDMA-CM port in --login-strings.
        #[arg(long, default_value_t = 5555, requires = "login_strings")]
        rdma_cm_port: u16,
        /// --login-strings in the IB CM form.
        #[arg(long, requires = "login_strings")]
        ib_cm: bool,
    },
    /// The RDMA devices rdma-core sees (ports, states, MTUs, GID tables, how a host can
    /// fence there): what `provider = "rdma-core"` configurations name.
    Devices {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Drills an operator runs against a live host (and target): `drill failover`.
    Drill {
        #[command(subcommand)]
        what: drill::Drill,
    },
    /// The SRP target appliance: check or run a configuration; a running target's lists
    /// and switches (its control socket).
    Target {
        #[command(subcommand)]
        what: TargetWhat,
    },
    /// Benchmarks (reported next to peers measured in the same run).
    Bench {
        #[command(subcommand)]
        what: BenchWhat,
    },
    /// The passive side of `bench hca` (started by it).
    #[command(hide = true)]
    BenchPeer {
        /// Address of the peer's HCA port.
        #[arg(long)]
        addr: std::net::IpAddr,
        /// Send every packet as its own datagram (no UDP GSO/GRO).
        #[arg(long)]
        no_gso: bool,
    },
    /// Write the manual pages: srpctl.1 and one page per subcommand, nested ones too
    /// (srpctl-target-run.1), as git and cargo name theirs.
    Man {
        /// The directory to write them into (created if missing).
        #[arg(long)]
        out: PathBuf,
    },
    /// Install srpctl for systemd: the binary, the srp-target@ and srp-host@ units
    /// (Type=notify, watchdog, hardened), the manual pages, the bash, zsh and fish
    /// completions and /etc/srp/{target,host}/ with an example each; then
    /// `systemctl daemon-reload`.
    Install(install::Options),
    /// Print the shell completion script for SHELL, or write it into a directory.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
        /// Write the script into this directory, under the name the shell looks for
        /// (srpctl.bash, _srpctl, srpctl.fish, srpctl.elv, _srpctl.ps1), instead of printing it.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

/// `srpctl host …`.
#[derive(Subcommand, Debug)]
enum HostWhat {
    /// Run the host daemon in the foreground: sweep the portals (again every sweep
    /// interval), log in, expose every logical unit as one block file over all its paths,
    /// serve the control socket; on SIGINT/SIGTERM remove the block files, log out and
    /// stop.
    Run {
        /// The host configuration (host.toml).
        #[arg(short, long)]
        config: PathBuf,
        /// Serve Prometheus metrics on this address (`GET /metrics`; e.g.
        /// 127.0.0.1:9572). Off unless given.
        #[arg(long, env = "SRPCTL_METRICS")]
        metrics: Option<std::net::SocketAddr>,
    },
    /// Have a running host daemon re-read its configuration file and take it (what SIGHUP
    /// to `host run` does): portals added are swept at once, removed ones no longer (their
    /// sessions stay until logged out); timers, sizes, driver, login form, multipath and
    /// rules apply from now on. A change of its name, GUID, initiator_ext or paths is
    /// refused with the reason, and nothing changes.
    Reload(host_ctl::HostCtlArgs),
    /// A running host daemon's metrics in the Prometheus text format (or JSON samples with
    /// --json), read over its control socket: disks, paths, sessions, HCA counters.
    Metrics(host_ctl::HostCtlArgs),
    /// Power a running host daemon's SRP stack down or up, in the original stack's order:
    /// `suspend` drains every session's driver (StorPort: StopAdapter; iSCSI model: its
    /// power IRP) and logs it out, then takes its HCA down; `resume` brings each HCA up,
    /// then its driver, which logs in again. I/O that arrives while suspended is held and
    /// completes after the resume; no login, sweep or failover happens in between.
    Power {
        /// `suspend` or `resume`.
        state: host_ctl::PowerArg,
        #[command(flatten)]
        at: host_ctl::HostCtlArgs,
    },
    /// Validate a host configuration and show what it would run.
    Check {
        /// The host configuration (host.toml).
        #[arg(short, long)]
        config: PathBuf,
        /// Print the summary as a JSON array of lines.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
enum TargetWhat {
    /// Validate a configuration file as the daemon does and show what it would export
    /// (IOCs, ports, ACLs, LUNs with the identity hosts will see); every error is listed
    /// as `file: key: reason`.
    Check {
        /// The configuration file (see docs/target.md).
        #[arg(short, long)]
        config: PathBuf,
        /// Print the validated configuration as JSON (every default spelled out, as
        /// `target config` shows a running one) instead of the summary.
        #[arg(long)]
        json: bool,
    },
    /// Run the target daemon in the foreground: serve logins and the control socket until
    /// SIGINT or SIGTERM.
    ///
    /// Opens every LUN, binds every port, answers Device Management queries, serves logins
    /// (IB CM to each IOC's service ID, RDMA-CM to `--rdma-cm-port`) and the control
    /// socket; on SIGINT or SIGTERM sends SRP_T_LOGOUT and a DREQ on every channel and
    /// exits. Logins, rejects and logouts are logged to stderr with their reasons.
    Run {
        /// The configuration file (see docs/target.md).
        #[arg(short, long)]
        config: PathBuf,
        /// The RDMA-CM TCP port logins in the RDMA-CM form name (Linux ib_srp
        /// `dest=ip:port`); overrides `[target] rdma_cm_port` (default 5555).
        #[arg(long)]
        rdma_cm_port: Option<u16>,
        /// Serve the control socket here; overrides `[target] control_socket` (default
        /// /run/srp-target/NAME.sock).
        #[arg(long)]
        control_socket: Option<PathBuf>,
        /// Serve Prometheus metrics on this address (`GET /metrics`; e.g.
        /// 127.0.0.1:9571). Off unless given.
        #[arg(long, env = "SRPCTL_METRICS")]
        metrics: Option<std::net::SocketAddr>,
    },
    /// A running target's I/O controllers: GUID, service ID, state, LUNs, sessions.
    Iocs(CtlArgs),
    /// A running target's HCA ports: address, state, sessions, live QPs/CQs/MRs, packets.
    Ports(CtlArgs),
    /// A running target's LUNs: identity (NAA), size, mode, command counters.
    Luns(CtlArgs),
    /// A running target's sessions: IOC, port, initiator, login form, in flight,
    /// per-session counters.
    Sessions(CtlArgs),
    /// Have a running target re-read its configuration file and apply what changed, without
    /// a restart (what SIGHUP to `target run` does).
    ///
    /// Live: LUNs added, removed or grown (a file with a size); an IOC's exports, ACL,
    /// `enabled`, `alua` and `nexus_from_any_address`; IOCs added after the others or
    /// removed from the end; the channel guards. Hosts get REPORTED LUNS DATA HAS CHANGED,
    /// CAPACITY DATA HAS CHANGED or ASYMMETRIC ACCESS STATE CHANGED; sessions no longer
    /// admitted get SRP_T_LOGOUT. Anything else (ports, identities, block sizes, a shrink)
    /// is refused with its reason and nothing at all is applied.
    Reload(CtlArgs),
    /// A running target's configuration as TOML of the target.toml schema, every default
    /// spelled out (or JSON with --json): what it runs now, reloads included.
    Config(CtlArgs),
    /// A running target's metrics in the Prometheus text format (or JSON samples with
    /// --json), read over its control socket: LUNs (with latency histograms), sessions,
    /// IOCs, ports, every HCA counter, the daemon's logins, rejects and reloads.
    Metrics(CtlArgs),
    /// Enable or disable an IOC at run time. Disabled, it refuses logins, drops out of
    /// discovery, and its sessions get SRP_T_LOGOUT then a DREQ (or, with --drop, end
    /// without a word, as if the controller died).
    Ioc {
        #[command(subcommand)]
        what: IocSwitch,
    },
    /// Bring an HCA port down (nothing in or out; its sessions end without a word) or up.
    Port {
        #[command(subcommand)]
        what: PortSwitch,
    },
    /// Act on a LUN: clear a latched flush error.
    Lun {
        #[command(subcommand)]
        what: LunSwitch,
    },
}

#[derive(Subcommand, Debug)]
enum LunSwitch {
    /// After a failed flush the LUN refuses every flush and durable write (data
    /// acknowledged before it may be lost); once the cause is dealt with, serve them again.
    ClearFlushError {
        /// The LUN's name.
        name: String,
        #[command(flatten)]
        at: CtlSocket,
    },
}

/// Which target's control socket.
#[derive(clap::Args, Debug, Clone)]
struct CtlSocket {
    /// The control socket's path (default: the one --config names, else
    /// /run/srp-target/target.sock, an unnamed target's).
    #[arg(short, long, conflicts_with = "config")]
    socket: Option<PathBuf>,
    /// The target's configuration file: its `[target] control_socket`.
    #[arg(short, long)]
    config: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
struct CtlArgs {
    #[command(flatten)]
    at: CtlSocket,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand, Debug)]
enum IocSwitch {
    /// Accept logins again.
    Enable {
        /// The IOC's name.
        name: String,
        #[command(flatten)]
        at: CtlSocket,
    },
    /// Refuse logins and end the IOC's sessions.
    Disable {
        /// The IOC's name.
        name: String,
        /// End sessions without SRP_T_LOGOUT or DREQ (failover drills).
        #[arg(long)]
        drop: bool,
        #[command(flatten)]
        at: CtlSocket,
    },
}

#[derive(Subcommand, Debug)]
enum PortSwitch {
    /// Bring the port up.
    Up {
        /// The port's name.
        name: String,
        #[command(flatten)]
        at: CtlSocket,
    },
    /// Take the port down.
    Down {
        /// The port's name.
        name: String,
        #[command(flatten)]
        at: CtlSocket,
    },
}

fn ctl_path(at: &CtlSocket) -> Result<PathBuf> {
    target_ctl::socket_path(at.socket.as_deref(), at.config.as_deref())
}

fn target_command(what: TargetWhat) -> Result<()> {
    use target_ctl::List;
    let list = |a: CtlArgs, what: List| target_ctl::list(&ctl_path(&a.at)?, what, a.json);
    match what {
        TargetWhat::Check { config, json } => target::check(&config, json),
        TargetWhat::Run {
            config,
            rdma_cm_port,
            control_socket,
            metrics,
        } => {
            log::init(tracing::Level::INFO);
            target::run(&config, rdma_cm_port, control_socket, metrics)
        }
        TargetWhat::Iocs(a) => list(a, List::Iocs),
        TargetWhat::Ports(a) => list(a, List::Ports),
        TargetWhat::Luns(a) => list(a, List::Luns),
        TargetWhat::Sessions(a) => list(a, List::Sessions),
        TargetWhat::Reload(a) => target_ctl::reload(&ctl_path(&a.at)?, a.json),
        TargetWhat::Config(a) => target_ctl::config(&ctl_path(&a.at)?, a.json),
        TargetWhat::Metrics(a) => target_ctl::metrics(&ctl_path(&a.at)?, a.json),
        TargetWhat::Ioc {
            what: IocSwitch::Enable { name, at },
        } => target_ctl::set_ioc(&ctl_path(&at)?, &name, true, false),
        TargetWhat::Ioc {
            what: IocSwitch::Disable { name, drop, at },
        } => target_ctl::set_ioc(&ctl_path(&at)?, &name, false, drop),
        TargetWhat::Port {
            what: PortSwitch::Up { name, at },
        } => target_ctl::set_port(&ctl_path(&at)?, &name, true),
        TargetWhat::Port {
            what: PortSwitch::Down { name, at },
        } => target_ctl::set_port(&ctl_path(&at)?, &name, false),
        TargetWhat::Lun {
            what: LunSwitch::ClearFlushError { name, at },
        } => target_ctl::clear_flush_error(&ctl_path(&at)?, &name),
    }
}

#[derive(Subcommand, Debug)]
enum BenchWhat {
    /// Soft HCA: RDMA WRITE/READ bandwidth and SEND ping-pong latency between two
    /// processes on loopback, next to iperf3 TCP on loopback, and the SRP-shaped transport
    /// ceiling at `bench disk`'s three points.
    Hca {
        /// Seconds per measured point.
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        /// Rounds (medians are reported).
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Transfer sizes in bytes.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "4096,16384,65536,262144,1048576"
        )]
        sizes: Vec<u32>,
        /// Path MTU in bytes (256..4096).
        #[arg(long, default_value_t = 4096)]
        mtu: usize,
        /// Operations kept in flight.
        #[arg(long, default_value_t = 16)]
        depth: usize,
        /// This side's address.
        #[arg(long, default_value = "127.0.0.2")]
        local: std::net::IpAddr,
        /// The peer process's address.
        #[arg(long, default_value = "127.0.0.3")]
        peer: std::net::IpAddr,
        /// Skip the iperf3 TCP reference.
        #[arg(long)]
        no_iperf: bool,
        /// Send every packet as its own datagram (no UDP GSO/GRO).
        #[arg(long)]
        no_gso: bool,
        /// The SRP-shaped ceiling's peer reads each answer's data from this file first
        /// (sequentially, straight into registered memory): the ceiling of a target serving
        /// a file, as `bench disk`'s target and nbdkit's file plugin do.
        #[arg(long)]
        backend_file: Option<std::path::PathBuf>,
    },
    /// Block I/O at library level: a target daemon with a /dev/shm file LUN and the SRP
    /// initiator's port driven directly, in process (the StorPort miniport, or with
    /// --driver the iSCSI-model driver): 4k random read at --depth (IOPS), 128k sequential
    /// read at --depth (MiB/s), 4k QD1 latency; medians of interleaved rounds (peers:
    /// scripts/bench-disk.sh).
    Disk(bench::disk::Options),
    /// Copy offload: --size-mib (1 GiB) copied within a LU by EXTENDED COPY and by ODX
    /// tokens, next to the same copy by the initiator's READ and WRITE, in one run, each
    /// copy checked against its source (medians of rounds).
    Copy(bench::copy::Options),
    /// WRITE ATOMIC's cost: QD1 WRITE ATOMIC(16) through the target's intent log next to
    /// the plain WRITE(16) of the same durability (write cache on, and FUA), on a file LU
    /// in --dir (a real filesystem: /var/tmp), medians of interleaved rounds.
    Atomic(bench::atomic::Options),
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Decode {
            kind,
            file,
            hex,
            imm_offset,
        } => {
            let bytes = hex::read_input(hex.as_deref(), file.as_deref())?;
            let text = decode::decode(kind, &bytes, imm_offset)?;
            print!("{text}");
            Ok(())
        }
        Command::Demo { wire, dump } => {
            log::init(tracing::Level::WARN);
            demo::run(wire, dump)
        }
        Command::Host { what } => match what {
            HostWhat::Run { config, metrics } => {
                log::init(tracing::Level::INFO);
                host::run(&config, metrics)
            }
            HostWhat::Check { config, json } => host::check(&config, json),
            HostWhat::Metrics(at) => host_ctl::metrics(&at),
            HostWhat::Reload(at) => host_ctl::reload(&at),
            HostWhat::Power { state, at } => host_ctl::power(state, &at),
        },
        Command::Target { what } => target_command(what),
        Command::HostCtl(cmd) => host_ctl::run(cmd),
        Command::Drill { what } => drill::run(what),
        Command::Devices { json } => devices::run(json),
        Command::Discover {
            portal,
            local,
            timeout,
            partition,
            json,
            login_strings,
            rdma_cm_port,
            ib_cm,
        } => {
            let timeout = std::time::Duration::try_from_secs_f64(timeout)
                .map_err(|_| anyhow::anyhow!("--timeout must be a positive number of seconds"))?;
            let strings = login_strings.then_some(if ib_cm {
                discover::LoginStrings::IbCm
            } else {
                discover::LoginStrings::RdmaCm(rdma_cm_port)
            });
            discover::run(portal, local, partition, timeout, json, strings)
        }
        Command::Bench {
            what:
                BenchWhat::Hca {
                    seconds,
                    rounds,
                    sizes,
                    mtu,
                    depth,
                    local,
                    peer,
                    no_iperf,
                    no_gso,
                    backend_file,
                },
        } => {
            let mtu = ib_verbs::PathMtu::for_link_mtu(mtu + 80)
                .filter(|m| m.bytes() == Some(mtu))
                .ok_or_else(|| anyhow::anyhow!("--mtu must be 256, 512, 1024, 2048 or 4096"))?;
            let o = bench::transport::Options {
                seconds,
                rounds,
                sizes,
                local,
                peer,
                mtu,
                depth,
                iperf: !no_iperf,
                gso: !no_gso,
                backend_file,
            };
            bench::transport::run(&o)
        }
        Command::Bench {
            what: BenchWhat::Disk(o),
        } => {
            log::init(tracing::Level::WARN);
            bench::disk::run(&o)
        }
        Command::Bench {
            what: BenchWhat::Copy(o),
        } => {
            log::init(tracing::Level::WARN);
            bench::copy::run(&o)
        }
        Command::Bench {
            what: BenchWhat::Atomic(o),
        } => {
            log::init(tracing::Level::WARN);
            bench::atomic::run(&o)
        }
        Command::BenchPeer { addr, no_gso } => bench::peer::run(addr, 64 << 20, !no_gso),
        Command::Man { out } => {
            for page in man::write_pages(Cli::command(), &out)? {
                println!("{}", page.display());
            }
            Ok(())
        }
        Command::Install(o) => install::run(&o, Cli::command()),
        Command::Completions { shell, out } => {
            if let Some(path) = man::completions(Cli::command(), shell, out.as_deref())? {
                println!("{}", path.display());
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
