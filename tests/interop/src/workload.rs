//! Workloads the checks run in the guest: fio write+verify (in the foreground or in the
//! background while something else happens), and the ext4 round trip.

use crate::{Error, Guest, Result};
use std::time::{Duration, Instant};

/// A fio write+verify job.
#[derive(Debug, Clone)]
pub struct Fio {
    /// The device or file.
    pub target: String,
    /// `write`, `randwrite`, ….
    pub rw: String,
    /// Block size or range (`4k`, `4k-1m`).
    pub bs: String,
    /// Bytes written (`64M`).
    pub size: String,
    /// Queue depth.
    pub iodepth: u32,
    /// Jobs (each on its own region, `offset_increment`).
    pub numjobs: u32,
    /// Extra options.
    pub extra: Vec<String>,
    /// Write for this long (passes over the region again and again), verifying as it goes
    /// and at the end; `None`: one pass.
    pub runtime_secs: Option<u32>,
}

impl Fio {
    /// A `rw` job of `bs` blocks over `size` bytes of `target`, depth 16, crc32c verify
    /// (also every 128 blocks while writing), fatal on the first mismatch.
    pub fn new(target: &str, rw: &str, bs: &str, size: &str) -> Fio {
        Fio {
            target: target.into(),
            rw: rw.into(),
            bs: bs.into(),
            size: size.into(),
            iodepth: 16,
            numjobs: 1,
            extra: Vec::new(),
            runtime_secs: None,
        }
    }

    /// A job that writes for `secs` seconds (for faults injected while it runs).
    pub fn for_secs(mut self, secs: u32) -> Fio {
        self.runtime_secs = Some(secs);
        self
    }

    /// The command line, terse output to `out` (or stdout).
    pub fn command(&self, out: Option<&str>) -> String {
        let bs = if self.bs.contains('-') {
            format!("--bsrange={} --bs_unaligned=0", self.bs)
        } else {
            format!("--bs={}", self.bs)
        };
        let mut c = format!(
            "fio --name=verify --filename={} --rw={} {bs} --size={} --ioengine=libaio \
             --iodepth={} --numjobs={} --offset_increment={} --direct=1 --verify=crc32c \
             --do_verify=1 --verify_backlog=128 --verify_fatal=1 --randrepeat=0 \
             --output-format=terse --terse-version=3 --group_reporting",
            self.target, self.rw, self.size, self.iodepth, self.numjobs, self.size
        );
        if let Some(t) = self.runtime_secs {
            c.push_str(&format!(" --time_based --runtime={t}"));
        }
        for e in &self.extra {
            c.push(' ');
            c.push_str(e);
        }
        if let Some(o) = out {
            c.push_str(&format!(" --output={o}"));
        }
        c
    }

    /// Runs it to the end; the detail line, or an error with fio's output.
    pub fn run(&self, guest: &Guest, timeout: Duration) -> Result<String> {
        let t = Instant::now();
        let out = guest.run(&self.command(None), timeout)?;
        check_terse(&out.stdout, &out.stderr, out.rc)?;
        Ok(format!(
            "fio {} {} {}: 0 errors, verified ({:.1} s)",
            self.rw,
            self.bs,
            self.size,
            t.elapsed().as_secs_f64()
        ))
    }

    /// Starts it in the background; [`Background::finish`] waits for it.
    pub fn start(&self, guest: &Guest) -> Result<Background> {
        let tag = format!("fio-{}", unique());
        let out = format!("/tmp/{tag}.out");
        let script = format!(
            "( {} > /tmp/{tag}.log 2>&1; echo $? > /tmp/{tag}.rc ) >/dev/null 2>&1 &\n\
             echo $! > /tmp/{tag}.pid",
            self.command(Some(&out))
        );
        guest.run_ok(&script, Duration::from_secs(30))?;
        Ok(Background {
            tag,
            started: Instant::now(),
        })
    }
}

/// A fio job running in the guest's background.
#[derive(Debug)]
pub struct Background {
    tag: String,
    started: Instant,
}

impl Background {
    /// Waits up to `timeout` for it to end; the detail line, or an error with its output.
    pub fn finish(self, guest: &Guest, timeout: Duration) -> Result<String> {
        let t = &self.tag;
        let script = format!(
            "end=$(( $(date +%s) + {secs} ))\n\
             while [ ! -e /tmp/{t}.rc ]; do\n\
               [ $(date +%s) -lt $end ] || {{ echo 'fio still running' >&2; kill $(cat /tmp/{t}.pid) 2>/dev/null; exit 9; }}\n\
               sleep 0.5\n\
             done\n\
             cat /tmp/{t}.out 2>/dev/null; cat /tmp/{t}.log >&2; exit $(cat /tmp/{t}.rc)",
            secs = timeout.as_secs()
        );
        let out = guest.run(&script, timeout + Duration::from_secs(30))?;
        check_terse(&out.stdout, &out.stderr, out.rc)?;
        Ok(format!(
            "background fio: 0 errors, verified ({:.1} s)",
            self.started.elapsed().as_secs_f64()
        ))
    }

    /// Whether it is still running.
    pub fn running(&self, guest: &Guest) -> bool {
        guest
            .run(
                &format!("[ ! -e /tmp/{}.rc ]", self.tag),
                Duration::from_secs(30),
            )
            .is_ok_and(|o| o.rc == 0)
    }
}

/// fio's terse (v3) output: field 5 is the read error count, field 6 onwards the read
/// stats; the write error count is field 46 (the job's `total_err` is in the 'error' field,
/// number 5).
fn check_terse(stdout: &str, stderr: &str, rc: i32) -> Result<()> {
    let line = stdout.lines().find(|l| l.starts_with("3;"));
    let errors = line.and_then(|l| l.split(';').nth(4));
    if rc != 0 || errors != Some("0") {
        return Err(Error::Guest(format!(
            "fio failed (exit {rc}, error field {errors:?}):\n{stdout}\n{stderr}"
        )));
    }
    Ok(())
}

/// mkfs.ext4, mount, files written and checksummed, sync, umount, e2fsck, mount again and
/// the checksums compared, umount: on `dev` in the guest.
pub fn ext4_round_trip(guest: &Guest, dev: &str) -> Result<String> {
    ext4_script(guest, &format!("D={dev}"), "")
}

/// [`ext4_round_trip`] on a loop device over `file` in the guest (a block file of our
/// host's, say).
pub fn ext4_round_trip_loop(guest: &Guest, file: &str) -> Result<String> {
    ext4_script(
        guest,
        &format!(
            "D=$(losetup -f --show {file})\ntrap 'umount $M 2>/dev/null || true; losetup -d $D || true' EXIT"
        ),
        " (loop device on the block file)",
    )
}

fn ext4_script(guest: &Guest, device: &str, what: &str) -> Result<String> {
    let t = Instant::now();
    let script = format!(
        r#"set -euo pipefail
M=/tmp/ext4-{n}
mkdir -p $M
{device}
mkfs.ext4 -q -F $D
mount $D $M
dd if=/dev/urandom of=$M/big bs=1M count=24 status=none
mkdir -p $M/tree
for i in $(seq 200); do head -c $((i * 97)) /dev/urandom > $M/tree/f$i; done
(cd $M && find . -type f -print0 | sort -z | xargs -0 sha256sum) > /tmp/ext4-{n}.sum
sync
umount $M
e2fsck -fn $D
mount $D $M
(cd $M && sha256sum -c --quiet /tmp/ext4-{n}.sum)
umount $M
echo files: $(wc -l < /tmp/ext4-{n}.sum)
"#,
        n = unique()
    );
    let out = guest.run_ok(&script, Duration::from_secs(600))?;
    let files = out
        .lines()
        .find_map(|l| l.strip_prefix("files: "))
        .unwrap_or("?");
    Ok(format!(
        "mkfs.ext4, {files} files, umount, e2fsck clean, checksums match after remount{what} ({:.1} s)",
        t.elapsed().as_secs_f64()
    ))
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}
