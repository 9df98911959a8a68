//! `srpctl man` and `srpctl completions`: manual pages and shell completion scripts made
//! from the clap definitions (`Cli::command()`), so they say what `--help` says.
//!
//! Pages are named as git's and cargo's are: `srpctl.1`, then one per subcommand path,
//! nested ones too (`srpctl-target-run.1`). Hidden subcommands get none.

use anyhow::{Context, Result};
use clap_complete::Shell;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Writes the page of `cmd` (the whole command line) and of every visible subcommand into
/// `out` (created if missing); returns the files written, parents first.
pub(crate) fn write_pages(cmd: clap::Command, out: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let source = format!(
        "{} {}",
        cmd.get_name(),
        cmd.get_version().unwrap_or_default()
    );
    let mut cmd = cmd.disable_help_subcommand(true);
    // Gives every subcommand its display name (`srpctl-target-run`) and usage line.
    cmd.build();
    let mut written = Vec::new();
    write_tree(&cmd, out, &source, &mut written)?;
    Ok(written)
}

/// Writes the page of `cmd`, then those of its visible subcommands.
fn write_tree(
    cmd: &clap::Command,
    out: &Path,
    source: &str,
    written: &mut Vec<PathBuf>,
) -> Result<()> {
    let man = clap_mangen::Man::new(cmd.clone()).source(source);
    let path = out.join(man.get_filename());
    let mut page = Vec::new();
    man.render(&mut page)
        .with_context(|| format!("rendering {}", path.display()))?;
    std::fs::write(&path, page).with_context(|| format!("writing {}", path.display()))?;
    written.push(path);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_tree(sub, out, source, written)?;
    }
    Ok(())
}

/// The completion script of `cmd` for `shell`: printed, or written into `out` (created if
/// missing) under the name the shell looks for (`srpctl.bash`, `_srpctl`, `srpctl.fish`,
/// …), whose path is returned.
pub(crate) fn completions(
    mut cmd: clap::Command,
    shell: Shell,
    out: Option<&Path>,
) -> Result<Option<PathBuf>> {
    let name = cmd.get_name().to_owned();
    match out {
        None => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut cmd, name, &mut script);
            std::io::stdout()
                .lock()
                .write_all(&script)
                .context("writing the completions to stdout")?;
            Ok(None)
        }
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            let path =
                clap_complete::generate_to(shell, &mut cmd, name, dir).with_context(|| {
                    format!("writing the {shell} completions into {}", dir.display())
                })?;
            Ok(Some(path))
        }
    }
}
