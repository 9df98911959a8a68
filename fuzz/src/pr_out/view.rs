//! The reservation state as PERSISTENT RESERVE IN reports it: READ KEYS, READ RESERVATION
//! and READ FULL STATUS parsed, each checked for well-formed lengths, and checked against
//! each other.

use srp::wire::PortId;

/// One READ FULL STATUS descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registrant {
    /// RESERVATION KEY.
    pub key: u64,
    /// ALL_TG_PT.
    pub all_tg_pt: bool,
    /// R_HOLDER.
    pub holder: bool,
    /// SCOPE | TYPE (meaningful for a holder).
    pub scope_type: u8,
    /// RELATIVE TARGET PORT IDENTIFIER.
    pub port: u16,
    /// The SRP initiator port identifier of its TransportID.
    pub initiator: PortId,
}

/// What the three reports say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    /// PRGENERATION.
    pub generation: u32,
    /// READ KEYS, in order.
    pub keys: Vec<u64>,
    /// READ RESERVATION: (key, TYPE), if reserved.
    pub reservation: Option<(u64, u8)>,
    /// READ FULL STATUS, in order.
    pub full: Vec<Registrant>,
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn be64(b: &[u8]) -> u64 {
    u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
}

/// PRGENERATION and the body after an ADDITIONAL LENGTH that must describe it exactly.
fn header(d: &[u8]) -> (u32, &[u8]) {
    assert!(d.len() >= 8, "PR IN data of {} bytes", d.len());
    let len = be32(&d[4..]) as usize;
    assert_eq!(len, d.len() - 8, "ADDITIONAL LENGTH");
    (be32(d), &d[8..])
}

impl View {
    /// Parses whole (uncut) READ KEYS, READ RESERVATION and READ FULL STATUS data, and
    /// checks they agree.
    pub fn parse(keys: &[u8], res: &[u8], full: &[u8]) -> View {
        let (g1, k) = header(keys);
        assert_eq!(k.len() % 8, 0, "READ KEYS list");
        let (g2, r) = header(res);
        let reservation = match r.len() {
            0 => None,
            16 => {
                assert_eq!(&r[8..13], &[0; 5]);
                assert_eq!(r[13] >> 4, 0, "LU_SCOPE");
                assert_eq!(&r[14..], &[0; 2]);
                Some((be64(r), r[13] & 0x0f))
            }
            n => panic!("READ RESERVATION descriptor of {n} bytes"),
        };
        let (g3, mut f) = header(full);
        let mut regs = Vec::new();
        while !f.is_empty() {
            assert!(f.len() >= 24 + 24, "a short full status descriptor");
            assert_eq!(be32(&f[20..]), 24, "an SRP TransportID is 24 bytes");
            let t = &f[24..48];
            assert_eq!(t[0], 0x04, "FORMAT 00b, PROTOCOL ID SRP");
            let mut id = [0u8; 16];
            id.copy_from_slice(&t[8..]);
            assert_eq!(f[12] & !0x03, 0, "flags");
            regs.push(Registrant {
                key: be64(f),
                all_tg_pt: f[12] & 0x02 != 0,
                holder: f[12] & 0x01 != 0,
                scope_type: f[13],
                port: u16::from_be_bytes([f[18], f[19]]),
                initiator: PortId(id),
            });
            f = &f[48..];
        }
        assert_eq!((g1, g2), (g2, g3), "one PRGENERATION between reads");
        let v = View {
            generation: g1,
            keys: k.chunks(8).map(be64).collect(),
            reservation,
            full: regs,
        };
        v.check();
        v
    }

    /// The three reports describe one state.
    fn check(&self) {
        let keys: Vec<u64> = self.full.iter().map(|r| r.key).collect();
        assert_eq!(keys, self.keys, "READ KEYS and READ FULL STATUS");
        assert!(
            self.keys.iter().all(|&k| k != 0),
            "a registration with key 0"
        );
        assert!(self.keys.len() <= srp_target::exec::pr::MAX_REGISTRATIONS);
        for (i, a) in self.full.iter().enumerate() {
            for b in &self.full[i + 1..] {
                assert!(
                    (a.initiator, a.port) != (b.initiator, b.port),
                    "an I_T nexus registered twice"
                );
            }
        }
        let holders: Vec<&Registrant> = self.full.iter().filter(|r| r.holder).collect();
        match self.reservation {
            None => assert!(holders.is_empty(), "a holder without a reservation"),
            Some((key, ty)) => {
                assert!([1, 3, 5, 6, 7, 8].contains(&ty), "TYPE {ty}");
                assert!(holders.iter().all(|h| h.scope_type == ty));
                assert!(self.full.iter().all(|r| r.holder || r.scope_type == 0));
                if all_registrants(ty) {
                    assert_eq!(key, 0, "all-registrants reservations report key 0");
                    assert_eq!(holders.len(), self.full.len(), "every registrant holds it");
                    assert!(!holders.is_empty(), "held by nobody");
                } else {
                    assert_eq!(holders.len(), 1, "one holder");
                    assert_eq!(holders[0].key, key, "the holder's key");
                }
            }
        }
    }

    /// The registration of `initiator` through relative port `port`.
    pub fn registration(&self, initiator: PortId, port: u16) -> Option<&Registrant> {
        self.full
            .iter()
            .find(|r| r.initiator == initiator && r.port == port)
    }

    /// May that I_T nexus (read, write), by SPC-4 Table 53 and SBC-3 Table 13.
    pub fn access(&self, initiator: PortId, port: u16) -> (bool, bool) {
        let Some((_, ty)) = self.reservation else {
            return (true, true);
        };
        let reg = self.registration(initiator, port);
        let holder = reg.is_some_and(|r| r.holder);
        // Registrants-only and all-registrants types: every registrant has full access.
        if holder || (ty >= 5 && reg.is_some()) {
            return (true, true);
        }
        // Exclusive Access types stop reads too.
        (![3, 6, 8].contains(&ty), false)
    }
}

/// TYPE 7h and 8h: every registrant is a holder.
pub fn all_registrants(ty: u8) -> bool {
    ty == 7 || ty == 8
}
