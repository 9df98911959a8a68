//! `srpctl install`: puts srpctl where systemd and the shell find it — the binary, the
//! `srp-target@` and `srp-host@` units ([`units`]), the manual pages, the bash, zsh and
//! fish completions and the configuration directories with an example each — then has
//! systemd re-read its units. `--root` installs into a staging tree instead (a package
//! build, a container image), where nothing is reloaded.

mod units;

use anyhow::{Context, Result, bail};
use clap_complete::Shell;
use std::path::{Path, PathBuf};

/// Where to install.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct Options {
    /// Install beneath this directory instead of `/` (a staging tree: paths inside the
    /// installed files are written as if it were `/`, and systemd is not reloaded).
    #[arg(long, default_value = "/")]
    pub(crate) root: PathBuf,
    /// The prefix of the binary, manual pages and completions.
    #[arg(long, default_value = "/usr/local")]
    pub(crate) prefix: PathBuf,
    /// Where the units go.
    #[arg(long, default_value = "/etc/systemd/system")]
    pub(crate) unit_dir: PathBuf,
    /// The configuration directory: target/NAME.toml and host/NAME.toml beneath it.
    #[arg(long, default_value = "/etc/srp")]
    pub(crate) config_dir: PathBuf,
    /// Do not run `systemctl daemon-reload` afterwards.
    #[arg(long)]
    pub(crate) no_daemon_reload: bool,
}

/// `path` (absolute) beneath `root`.
fn under(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// Writes `bytes` to `path` through a temporary file and a rename (a running binary or a
/// unit being read is never seen half-written), with `mode`.
fn put(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let tmp = path.with_extension("srpctl-install");
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("chmod {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("installing {}", path.display()))?;
    println!("{}", path.display());
    Ok(())
}

/// The example host configuration installed beside the target's.
const HOST_EXAMPLE: &str = "\
# An example host daemon configuration (docs/host.md has every key).
# Copy it to NAME.toml in this directory and run: systemctl enable --now srp-host@NAME
[host]
name = \"srp-host\"

[[portal]]
address = \"192.0.2.10\"   # the target's port address
";

/// Installs everything [`Options`] says; prints each file written.
pub(crate) fn run(o: &Options, cli: clap::Command) -> Result<()> {
    for p in [&o.prefix, &o.unit_dir, &o.config_dir] {
        if !p.is_absolute() {
            bail!("{}: must be an absolute path", p.display());
        }
    }
    let bin = o.prefix.join("bin").join("srpctl");
    let me = std::env::current_exe().context("finding this srpctl binary")?;
    let image = std::fs::read(&me).with_context(|| format!("reading {}", me.display()))?;
    put(&under(&o.root, &bin), &image, 0o755)?;
    let (bin_s, conf_s) = (bin.to_string_lossy(), o.config_dir.to_string_lossy());
    let units = under(&o.root, &o.unit_dir);
    put(
        &units.join("srp-target@.service"),
        units::target(&bin_s, &conf_s).as_bytes(),
        0o644,
    )?;
    put(
        &units.join("srp-host@.service"),
        units::host(&bin_s, &conf_s).as_bytes(),
        0o644,
    )?;
    let man = under(&o.root, &o.prefix.join("share/man/man1"));
    for page in crate::man::write_pages(cli.clone(), &man)? {
        println!("{}", page.display());
    }
    let share = under(&o.root, &o.prefix.join("share"));
    for (shell, dir) in [
        (Shell::Bash, "bash-completion/completions"),
        (Shell::Zsh, "zsh/site-functions"),
        (Shell::Fish, "fish/vendor_completions.d"),
    ] {
        if let Some(p) = crate::man::completions(cli.clone(), shell, Some(&share.join(dir)))? {
            println!("{}", p.display());
        }
    }
    let conf = under(&o.root, &o.config_dir);
    for (dir, name, text) in [
        (
            "target",
            "example.toml.sample",
            include_str!("../../../srp-target/examples/target.toml"),
        ),
        ("host", "example.toml.sample", HOST_EXAMPLE),
    ] {
        put(&conf.join(dir).join(name), text.as_bytes(), 0o644)?;
    }
    let live = o.root == Path::new("/") && Path::new("/run/systemd/system").exists();
    if live && !o.no_daemon_reload {
        let status = std::process::Command::new("systemctl")
            .arg("daemon-reload")
            .status()
            .context("running systemctl daemon-reload")?;
        if !status.success() {
            bail!("systemctl daemon-reload failed ({status})");
        }
        println!("systemctl daemon-reload: done");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_name_the_installed_binary_and_config_and_each_capability() {
        let t = units::target("/opt/srp/bin/srpctl", "/etc/srp");
        assert!(t.contains("ExecStart=/opt/srp/bin/srpctl target run -c /etc/srp/target/%i.toml"));
        assert!(t.contains("Type=notify") && t.contains("WatchdogSec="));
        assert!(t.contains("ExecReload=/bin/kill -HUP $MAINPID"));
        assert!(t.contains("ProtectSystem=full") && t.contains("PrivateTmp=yes"));
        let h = units::host("/usr/local/bin/srpctl", "/etc/srp");
        assert!(h.contains("ExecStart=/usr/local/bin/srpctl host run -c /etc/srp/host/%i.toml"));
        // The host's FUSE mount must be seen outside the service: no mount namespace.
        for fence in [
            "ProtectSystem",
            "PrivateTmp",
            "ProtectHome",
            "ReadOnlyPaths",
        ] {
            assert!(!h.contains(fence), "{fence} in the host unit");
        }
        // Every capability kept is explained in the comment above it.
        for unit in [&t, &h] {
            let line = unit
                .lines()
                .find(|l| l.starts_with("CapabilityBoundingSet="))
                .expect("bounded");
            for cap in line["CapabilityBoundingSet=".len()..].split_whitespace() {
                assert!(
                    unit.matches(cap).count() >= 2,
                    "{cap} kept without a reason"
                );
            }
        }
    }
}
