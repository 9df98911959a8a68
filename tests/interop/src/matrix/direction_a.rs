//! Direction A: Linux ib_srp (the guest) against a target, ours or LIO ([`Side`]), over
//! RDMA-CM. The checks of issue #12's deliverable 2, in order; each is named `A.<what>` and
//! runs the same way against either side, so a comparison shows any check LIO passes and
//! we fail.

use super::Matrix;
use super::side::{LUN_MIB, Side};
use crate::linux::{RxeDevice, SrpLogin, SrpSession, setup_rxe, srp_login, srp_logout};
use crate::ours::WorkDir;
use crate::workload::{Fio, ext4_round_trip};
use crate::{Capture, Error, Guest, GuestConfig, NetNs, Result};
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(120);
const FIO_T: Duration = Duration::from_secs(900);

/// Which target direction A runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Against {
    /// `srpctl target run` in the namespace, on our software HCA.
    Ours,
    /// `srpctl target run` in the guest, on its rxe devices through rdma-core.
    OursRdmaCore,
    /// LIO + ib_srpt in the guest.
    Lio,
}

impl Against {
    /// `ours` or `lio`.
    pub fn label(self) -> &'static str {
        match self {
            Against::Ours => "ours",
            Against::OursRdmaCore => "ours-rdma-core",
            Against::Lio => "lio",
        }
    }
}

/// What every check needs.
struct Run<'a> {
    guest: &'a Guest,
    ns: &'a NetNs,
    side: &'a Side,
    rxe: &'a [RxeDevice],
}

impl Run<'_> {
    fn login(&self, k: usize, options: &[&str]) -> Result<SrpSession> {
        let mut l: SrpLogin = self.side.login(k, &self.rxe[k]);
        l.options.extend(options.iter().map(|o| (*o).to_owned()));
        srp_login(self.guest, &l)
    }

    /// Reloads ib_srp with `params`, deleting whatever SRP remote port is left first (a
    /// failed check may leave one behind).
    fn reload_ib_srp(&self, params: &str) -> Result<()> {
        self.guest
            .run_ok(
                &format!(
                    "for p in /sys/class/srp_remote_ports/*/delete; do [ -e $p ] && echo 1 > $p; done
                     for _ in $(seq 100); do ls /sys/class/srp_remote_ports/ 2>/dev/null | grep -q . || break; sleep 0.2; done
                     if lsmod | grep -q '^ib_srp '; then timeout 60 rmmod ib_srp || exit 1; fi
                     timeout 60 modprobe ib_srp {params}"
                ),
                T,
            )
            .map(|_| ())
    }

    /// Logs in on path 0 with `options`, runs `fio` (for at most 5 minutes: a target that
    /// refuses the commands makes every I/O go through the SCSI error handler), logs out.
    fn login_fio_logout(&self, options: &[&str], fio: impl Fn(&str) -> Fio) -> Result<String> {
        let s = self.login(0, options)?;
        let disk = lun(&s, 0)?;
        let r = fio(&disk).run(self.guest, Duration::from_secs(300));
        // The I/O's failure says more than a logout that fails after it.
        let out = srp_logout(self.guest, &s);
        let r = r?;
        out?;
        Ok(r)
    }
}

fn lun(s: &SrpSession, n: u64) -> Result<String> {
    s.disks
        .iter()
        .find(|d| d.lun == n)
        .map(|d| d.block.clone())
        .ok_or_else(|| Error::Guest(format!("no disk for LUN {n} in {s:?}")))
}

fn sg(s: &SrpSession, n: u64) -> Result<String> {
    s.disks
        .iter()
        .find(|d| d.lun == n)
        .map(|d| d.sg.clone())
        .ok_or_else(|| Error::Guest(format!("no sg for LUN {n} in {s:?}")))
}

/// A login that must be refused: the reason the guest's kernel logged, which must name
/// `expect` when given (ours: SRP_LOGIN_REJ 0x00010003, "unable to associate the channel
/// with the I_T nexus", for an unknown target port and for an ACL refusal alike).
fn refused(guest: &Guest, login: &SrpLogin, expect: Option<&str>) -> Result<String> {
    match srp_login(guest, login) {
        Err(Error::Login { reason, dmesg }) => match expect {
            Some(e) if !dmesg.contains(e) => Err(Error::Guest(format!(
                "refused, but not with {e}: {reason}\n{dmesg}"
            ))),
            _ => Ok(format!("refused: {reason}")),
        },
        Err(e) => Err(e),
        Ok(s) => {
            let _ = srp_logout(guest, &s);
            Err(Error::Guest(format!("login accepted: {s:?}")))
        }
    }
}

/// Runs direction A against `against` on a guest with two NICs at `mtu`, recording every
/// check in `m`. With `mtu` 9000 only the login, the I/O and the path MTU are checked.
pub fn run(m: &mut Matrix, against: Against, mtu: u32) -> Result<()> {
    let label = if mtu == 1500 {
        against.label().to_owned()
    } else {
        format!("{}-{mtu}", against.label())
    };
    let work = WorkDir::new(&format!("a-{label}"))?;
    let ns = NetNs::new()?;
    // Our target in the guest keeps its file LUN in the guest's tmpfs.
    let memory = if against == Against::OursRdmaCore {
        2048
    } else {
        1024
    };
    let guest = Guest::boot(GuestConfig::new(&ns).nics(&[mtu, mtu]).memory_mib(memory))?;
    let rxe = setup_rxe(&guest)?;
    let cap = match against {
        Against::Ours if mtu == 9000 => Some(Capture::start(
            &ns,
            &guest.nic(0).map(|n| n.tap.clone()).unwrap_or_default(),
            &work.path().join("a.pcapng"),
            Some("udp port 4791"),
        )?),
        _ => None,
    };
    let mut side = match against {
        Against::Ours => Side::ours(&ns, work.path(), &rxe)?,
        Against::OursRdmaCore => Side::ours_rdma_core(&guest, &rxe)?,
        Against::Lio => Side::lio(&guest, &rxe)?,
    };
    let r = Run {
        guest: &guest,
        ns: &ns,
        side: &side,
        rxe: &rxe,
    };
    let l = label.as_str();
    if mtu != 1500 {
        jumbo(m, l, &r, cap)?;
    } else {
        checks(m, l, &r);
    }
    let log = side.stop(&guest);
    if !m.all_passed() && !log.is_empty() {
        eprintln!("---- our target's log ({l}) ----\n{log}\n----");
    }
    // A guest that will not power off (LIO's failed checks can leave ib_srp busy) is
    // killed: nothing of ours to fail on.
    if let Err(e) = guest.shutdown() {
        eprintln!("guest shutdown: {e}");
    }
    Ok(())
}

/// The MTU 9000 run: path MTU 4096 negotiated and used, I/O verified.
fn jumbo(m: &mut Matrix, l: &str, r: &Run<'_>, cap: Option<Capture>) -> Result<()> {
    let mtu = r
        .guest
        .run_ok("ibv_devinfo -d rxe0 | awk '/active_mtu/ {print $2}'", T)
        .unwrap_or_default();
    m.check(l, "A.jumbo-login-io", || {
        let detail = r.login_fio_logout(&[], |d| Fio::new(d, "randwrite", "4k-1m", "48M"))?;
        Ok(format!("rxe active MTU {}; {detail}", mtu.trim()))
    });
    if let Some(cap) = cap {
        m.check(l, "A.jumbo-4096-byte-packets", || {
            let file = cap.stop();
            let lens = crate::tshark_fields(&file, "udp.length")?;
            let max = lens
                .iter()
                .filter_map(|v| v.parse::<u32>().ok())
                .max()
                .unwrap_or(0);
            // BTH 12 + RETH 16 + 4096 + ICRC 4 + UDP 8: a 4096-byte payload per packet.
            if max < 4096 {
                return Err(Error::Guest(format!("largest UDP datagram {max} bytes")));
            }
            Ok(format!(
                "largest UDP datagram {max} bytes ({} frames)",
                lens.len()
            ))
        });
    }
    Ok(())
}

/// The 1500-byte run: every check of deliverable 2.
fn checks(m: &mut Matrix, l: &str, r: &Run<'_>) {
    let g = r.guest;
    let mut session: Option<SrpSession> = None;
    m.check(l, "A.login", || {
        let t = Instant::now();
        let s = r.login(0, &[])?;
        let d = format!(
            "host{} with {} LUN(s) in {:.1} s: {}",
            s.host_no,
            s.disks.len(),
            t.elapsed().as_secs_f64(),
            s.disks
                .iter()
                .map(|d| d.block.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        );
        session = Some(s);
        Ok(d)
    });
    let ours_reason = r.side.is_ours().then_some("reason 0x00010003");
    m.check(l, "A.reject-unknown-target-port", || {
        let mut bad = r.side.login(0, &r.rxe[0]);
        bad.id_ext = "00000000deadbeef".into();
        bad.ioc_guid = "00000000deadbeef".into();
        bad.timeout = Duration::from_secs(30);
        refused(g, &bad, ours_reason)
    });
    m.check(l, "A.reject-by-acl", || {
        let mut bad = r.side.login(0, &r.rxe[0]);
        bad.options.push("initiator_ext=0000000000000001".into());
        bad.timeout = Duration::from_secs(30);
        refused(g, &bad, ours_reason)
    });
    let Some(s) = session else {
        m.skip(l, "A.*", "no session");
        return;
    };
    let (sg0, dev0) = match (sg(&s, 0), lun(&s, 0)) {
        (Ok(a), Ok(b)) => (a, b),
        _ => return m.skip(l, "A.*", "LUN 0 missing"),
    };
    m.check(l, "A.inquiry-and-vpd", || {
        let inq = g.run_ok(&format!("sg_inq {sg0}"), T)?;
        let vendor = inq
            .lines()
            .find(|x| x.contains("Vendor identification"))
            .unwrap_or("")
            .trim()
            .to_owned();
        let pages = g.run_ok(
            &format!(
                "set -e; for p in $(sg_vpd -p 0 -r {sg0} | od -An -v -tu1 | xargs -n1 | tail -n +5); do \
                   printf '0x%02x ' $p; sg_vpd -p $p {sg0} >/dev/null || {{ echo \"page $p failed\" >&2; exit 1; }}; done"
            ),
            T,
        )?;
        Ok(format!("{vendor}; VPD pages {}all decode", pages.trim_end().to_owned() + " "))
    });
    m.check(l, "A.read-capacity", || {
        let rc10 = g.run_ok(&format!("sg_readcap {sg0}"), T)?;
        let rc16 = g.run_ok(&format!("sg_readcap -l {sg0}"), T)?;
        let last = LUN_MIB[0] * 2048 - 1;
        for out in [&rc10, &rc16] {
            if !out.contains(&format!("Last LBA={last}")) || !out.contains("block length=512") {
                return Err(Error::Guest(format!("unexpected capacity:\n{out}")));
            }
        }
        Ok(format!(
            "READ CAPACITY(10) and (16): last LBA {last}, 512-byte blocks"
        ))
    });
    m.check(l, "A.report-luns", || {
        let out = g.run_ok(&format!("sg_luns {sg0}"), T)?;
        let n = out
            .lines()
            .filter(|x| x.trim_start().starts_with("00"))
            .count();
        if n != 2 {
            return Err(Error::Guest(format!("expected LUNs 0 and 1:\n{out}")));
        }
        Ok("LUNs 0 and 1".into())
    });
    if r.side.is_ours() {
        // Ours only: the SBC-4 and copy-offload commands of issue #16 as sg3_utils sends
        // them (LIO lacks several of them; its answers are not the point here).
        m.check(l, "A.sg3-utils-sbc4-and-copy", || sg3_utils(g, &sg0, &dev0));
    }
    for (rw, bs) in [
        ("randwrite", "4k"),
        ("randwrite", "64k"),
        ("randwrite", "1m"),
        ("write", "4k"),
        ("write", "64k"),
        ("write", "1m"),
    ] {
        m.check(l, &format!("A.fio-{rw}-{bs}"), || {
            Fio::new(&dev0, rw, bs, "32M").run(g, FIO_T)
        });
    }
    m.check(l, "A.ext4", || ext4_round_trip(g, &dev0));
    m.check(l, "A.resets-during-io", || {
        let bg = Fio::new(&dev0, "randwrite", "4k-256k", "96M")
            .for_secs(25)
            .start(g)?;
        std::thread::sleep(Duration::from_secs(5));
        let lu = g.run_ok(&format!("sg_reset -d {sg0} && echo ok"), T)?;
        std::thread::sleep(Duration::from_secs(3));
        let host = g.run_ok(&format!("sg_reset -H {sg0} && echo ok"), T)?;
        let still = bg.running(g);
        let done = bg.finish(g, FIO_T)?;
        if !still {
            return Err(Error::Guest(format!(
                "fio ended before the host reset: {done}"
            )));
        }
        Ok(format!(
            "LUN reset {}, host reset {} during fio; {done}",
            lu.trim(),
            host.trim()
        ))
    });
    m.check(l, "A.login-logout-during-io", || {
        let bg = Fio::new(&dev0, "randwrite", "4k-256k", "96M")
            .for_secs(20)
            .start(g)?;
        let mut n = 0;
        while bg.running(g) && n < 3 {
            let s1 = r.login(1, &[])?;
            let d1 = lun(&s1, 1)?;
            Fio::new(&d1, "randwrite", "4k", "4M").run(g, FIO_T)?;
            srp_logout(g, &s1)?;
            n += 1;
        }
        let done = bg.finish(g, FIO_T)?;
        Ok(format!(
            "{n} login/I/O/logout cycle(s) on path 1 during I/O on path 0; {done}"
        ))
    });
    m.check(l, "A.logout", || {
        srp_logout(g, &s)?;
        if r.side.is_ours() {
            let end = Instant::now() + Duration::from_secs(10);
            loop {
                let v = r.side.ctl(g, r.ns, &["target", "sessions", "--json"])?;
                if v.trim() == "[]" {
                    break;
                }
                if Instant::now() > end {
                    return Err(Error::Guest(format!("sessions left on the target: {v}")));
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            return Ok("host gone; the target lists no session".into());
        }
        Ok("host gone".into())
    });
    m.check(l, "A.immediate-data-off", || {
        r.reload_ib_srp("use_imm_data=0")?;
        let d = r.login_fio_logout(&[], |d| Fio::new(d, "randwrite", "512-16k", "16M"));
        let reload = r.reload_ib_srp("");
        let d = d?;
        reload?;
        Ok(format!("use_imm_data=0: {d}"))
    });
    m.check(l, "A.immediate-data-on", || {
        let d = r.login_fio_logout(&[], |d| Fio::new(d, "randwrite", "512-8k", "16M"))?;
        Ok(format!("use_imm_data=1 (default): {d}"))
    });
    m.check(l, "A.multichannel", || {
        let s = r.login(0, &["ch_count=4"])?;
        let ch = g.run_ok(
            &format!("cat /sys/class/scsi_host/host{}/ch_count", s.host_no),
            T,
        )?;
        let d = lun(&s, 0)?;
        let mut fio = Fio::new(&d, "randwrite", "4k-128k", "16M");
        fio.numjobs = 4;
        fio.iodepth = 8;
        let res = fio.run(g, FIO_T);
        srp_logout(g, &s)?;
        let channels = ch.trim().to_owned();
        if channels != "4" {
            return Err(Error::Guest(format!("ch_count {channels}, expected 4")));
        }
        Ok(format!("4 channels, 4 jobs: {}", res?))
    });
    for (sect, bs) in [(8u32, "64k"), (8192, "4m")] {
        m.check(l, &format!("A.max-sect-{sect}"), || {
            let s = r.login(0, &[&format!("max_sect={sect}")])?;
            let d = lun(&s, 0)?;
            let kb = g.run_ok(
                &format!(
                    "cat /sys/block/{}/queue/max_hw_sectors_kb",
                    d.trim_start_matches("/dev/")
                ),
                T,
            )?;
            let res = Fio::new(&d, "write", bs, "32M").run(g, FIO_T);
            srp_logout(g, &s)?;
            Ok(format!("max_hw_sectors_kb {}; {}", kb.trim(), res?))
        });
    }
    m.check(l, "A.dm-multipath-path-fail-restore", || dm_multipath(r));
    // Last: a target without external indirect tables (ib_srpt) fails the I/O of the
    // first, and its error recovery can leave ib_srp busy for a while.
    for (entries, bs) in [(255u32, "4k-512k"), (1, "4k-1m")] {
        m.check(l, &format!("A.cmd-sg-entries-{entries}-ext-sg"), || {
            // Never registering memory makes every page its own descriptor, so large
            // I/Os need indirect tables: in the SRP_CMD up to cmd_sg_entries (255: every
            // I/O of up to 512 KiB), in initiator memory (external: the target reads the
            // table first) beyond (1: every I/O of more than one page).
            r.reload_ib_srp("never_register=1 indirect_sg_entries=512")?;
            let d = r.login_fio_logout(
                &[
                    &format!("cmd_sg_entries={entries}"),
                    "allow_ext_sg=1",
                    "sg_tablesize=512",
                ],
                |d| {
                    let mut f = Fio::new(d, "randwrite", bs, "16M");
                    f.iodepth = 4;
                    f
                },
            );
            let reload = r.reload_ib_srp("");
            let d = d?;
            reload?;
            Ok(format!(
                "never_register=1, cmd_sg_entries={entries}, allow_ext_sg=1: {d}"
            ))
        });
    }
}

/// sg3_utils through ib_srp against our target: WRITE AND VERIFY, EXTENDED COPY (with
/// RECEIVE COPY RESULTS), GET LBA STATUS, PRE-FETCH, persistent reservations, RESERVE(6)
/// and RELEASE(6), REPORT SUPPORTED OPERATION CODES; the data written and copied read back
/// with O_DIRECT and compared.
fn sg3_utils(g: &Guest, sg: &str, dev: &str) -> Result<String> {
    let out = g.run_ok(
        &format!(
            r#"set -e
S={sg}; D={dev}
dd if=/dev/urandom of=/tmp/src.bin bs=512 count=2048 status=none
dd if=/tmp/src.bin of=$D bs=512 count=2048 oflag=direct conv=notrunc status=none
dd if=/dev/urandom of=/tmp/wv.bin bs=512 count=8 status=none
sg_write_verify --bytchk=1 --lba=4096 --num=8 --in=/tmp/wv.bin $S
sg_write_verify --16 --lba=4104 --num=8 --in=/tmp/wv.bin $S
dd if=$D bs=512 skip=4096 count=8 iflag=direct status=none | cmp - /tmp/wv.bin
dd if=$D bs=512 skip=4104 count=8 iflag=direct status=none | cmp - /tmp/wv.bin
echo write-verify-ok
sg_copy_results $S | grep -qi "implemented descriptor list" && echo copy-results-ok
sg_xcopy if=$S of=$S bs=512 skip=0 seek=8192 count=2048
dd if=$D bs=512 skip=8192 count=2048 iflag=direct status=none | cmp - /tmp/src.bin
echo xcopy-ok
sg_get_lba_status --lba=0 $S | head -3
set +e
if command -v sg_prefetch >/dev/null; then
  sg_prefetch --lba=0 --num=2048 $S; echo prefetch-rc=$?
  sg_prefetch --immed --lba=0 --num=2048 $S; echo prefetch-immed-rc=$?
else
  # sg3-utils without sg_prefetch (Debian 12's 1.46): PRE-FETCH(10) and (16) by sg_raw.
  echo prefetch-by-sg_raw
  sg_raw $S 34 00 00 00 00 00 03 08 00 00; echo prefetch-rc=$?
  sg_raw $S 90 02 00 00 00 00 00 00 00 00 00 00 08 00 00 00; echo prefetch-immed-rc=$?
fi
set -e
sg_persist --out --register --param-sark=0xabc $S
sg_persist --in --read-keys $S | grep -q 0xabc
sg_persist --out --reserve --param-rk=0xabc --prout-type=1 $S
sg_persist --in --read-reservation $S | grep -qi "write exclusive"
sg_persist --out --release --param-rk=0xabc --prout-type=1 $S
sg_persist --out --register --param-rk=0xabc --param-sark=0 $S
echo persist-ok
sg_raw $S 16 00 00 00 00 00 && sg_raw $S 17 00 00 00 00 00 && echo reserve6-ok
sg_opcodes $S | grep -ci "copy\|token" | sed 's/^/copy-opcodes=/'
"#
        ),
        T,
    )?;
    for want in [
        "write-verify-ok",
        "copy-results-ok",
        "xcopy-ok",
        "persist-ok",
        "reserve6-ok",
    ] {
        if !out.contains(want) {
            return Err(Error::Guest(format!("{want} missing:\n{out}")));
        }
    }
    // PRE-FETCH answers GOOD (exit status 0; our target never claims CONDITION MET).
    for rc in ["prefetch-rc=", "prefetch-immed-rc="] {
        let v = out
            .lines()
            .find_map(|x| x.strip_prefix(rc))
            .unwrap_or("missing");
        if v != "0" {
            return Err(Error::Guest(format!("sg_prefetch {rc}{v}:\n{out}")));
        }
    }
    if !out.to_lowercase().contains("mapped") {
        return Err(Error::Guest(format!(
            "sg_get_lba_status printed no status:\n{out}"
        )));
    }
    let opcodes = out
        .lines()
        .find_map(|x| x.strip_prefix("copy-opcodes="))
        .unwrap_or("0");
    let prefetch = if out.contains("prefetch-by-sg_raw") {
        "PRE-FETCH(10/16) by sg_raw (no sg_prefetch here)"
    } else {
        "sg_prefetch"
    };
    Ok(format!(
        "sg_write_verify (10/16, BYTCHK=1), sg_copy_results, sg_xcopy 1 MiB verified, sg_get_lba_status, {prefetch}, sg_persist register/reserve/release, RESERVE(6)/RELEASE(6); sg_opcodes lists {opcodes} copy commands"
    ))
}

/// Two logins (one per path) to the same LUN under dm-multipath round robin; path 1's
/// target port is taken away and brought back during a verifying fio: 0 errors.
fn dm_multipath(r: &Run<'_>) -> Result<String> {
    let g = r.guest;
    let s0 = r.login(0, &[])?;
    let s1 = r.login(1, &[])?;
    let (a, b) = (lun(&s0, 0)?, lun(&s1, 0)?);
    let wwid = |d: &str| {
        g.run_ok(
            &format!(
                "cat /sys/block/{}/device/wwid",
                d.trim_start_matches("/dev/")
            ),
            T,
        )
        .map(|w| w.trim().to_owned())
    };
    let (wa, wb) = (wwid(&a)?, wwid(&b)?);
    if wa != wb {
        return Err(Error::Guest(format!("{a} {wa} and {b} {wb}: not one LU")));
    }
    // Fail fast on a lost path, reconnect quickly.
    for s in [&s0, &s1] {
        g.run_ok(
            &format!(
                "P=$(ls -d /sys/class/srp_remote_ports/port-{}:*); echo 2 > $P/reconnect_delay; \
                 echo 3 > $P/fast_io_fail_tmo; echo 120 > $P/dev_loss_tmo",
                s.host_no
            ),
            T,
        )?;
    }
    g.run_ok(
        &format!(
            "modprobe dm_multipath && modprobe dm_round_robin && \
             dmsetup create --noudevsync srpmp --table \"0 $(blockdev --getsz {a}) multipath 1 queue_if_no_path 0 1 1 round-robin 0 2 1 {a} 16 {b} 16\" && \
             dmsetup mknodes srpmp && [ -b /dev/mapper/srpmp ]"
        ),
        T,
    )?;
    let result = (|| {
        let bg = Fio::new("/dev/mapper/srpmp", "randwrite", "4k-256k", "128M")
            .for_secs(45)
            .start(g)?;
        std::thread::sleep(Duration::from_secs(4));
        r.side.fail_path(g, r.ns, 1)?;
        // dm fails the path once ib_srp's fast_io_fail ends the I/O on it.
        let failed = wait_for(
            g,
            "dmsetup status srpmp | grep -q ' F '",
            Duration::from_secs(60),
        );
        let during = g.run_ok("dmsetup status srpmp", T)?;
        r.side.restore_path(g, r.ns, 1)?;
        let back = wait_for(
            g,
            &format!(
                "grep -q running /sys/class/srp_remote_ports/port-{}:*/state",
                s1.host_no
            ),
            Duration::from_secs(60),
        );
        g.run_ok(&format!("dmsetup message srpmp 0 reinstate_path {b}"), T)?;
        let after = g.run_ok("dmsetup status srpmp", T)?;
        let done = bg.finish(g, FIO_T)?;
        if !failed || !back {
            return Err(Error::Guest(format!(
                "path failed in dm: {failed}, rport back: {back}; during: {during} after: {after}"
            )));
        }
        Ok(format!(
            "one LU ({wa}); path 1 failed and restored under round robin; {done}"
        ))
    })();
    let _ = g.run("dmsetup remove srpmp", T);
    srp_logout(g, &s1)?;
    srp_logout(g, &s0)?;
    result
}

/// Polls `test` (a shell condition) in the guest until it holds or `limit` passes.
fn wait_for(g: &Guest, test: &str, limit: Duration) -> bool {
    g.run(
        &format!(
            "end=$(( $(date +%s) + {} )); until {test}; do [ $(date +%s) -lt $end ] || exit 1; sleep 0.5; done",
            limit.as_secs()
        ),
        limit + Duration::from_secs(30),
    )
    .is_ok_and(|o| o.rc == 0)
}
