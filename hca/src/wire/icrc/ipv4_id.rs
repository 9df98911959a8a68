//! Finding the IPv4 Identification a received packet was sent with.
//!
//! The ICRC covers the IPv4 ID, a UDP socket never sees it, and Linux rxe sends a non-zero
//! ID with DF on every packet (linux-interop.md: a captured CM REQ had ID 0x3dbb). CRC-32 is
//! linear: for a packet of fixed length, changing the 16 ID bits by `e` changes the CRC by
//! `L(e)`, the raw CRC (zero start, no final inversion) of `e` followed by as many zero
//! bytes as follow the ID. `L` is injective on 16 bits (CRC-32 detects every error burst of
//! up to 32 bits), so the difference `D` between the ICRC a packet carries and the one
//! computed with ID 0 is either `L(e)` for exactly one `e`, the sender's ID, or no ID
//! explains it and the packet is corrupt.
//!
//! The price is a 16-bit check instead of a 32-bit one for senders that use a non-zero ID:
//! a random corruption passes with probability 2^-16. No single flipped bit outside the ID
//! passes in a packet of up to 10 000 bytes: that would need `x^j mod P` of degree below 16
//! for some distance `j` of 16 to 80 000 bits from the ID (or `x^-j` for the bytes before
//! it), and there is none (checked in the tests).

/// CRC-32 (IEEE 802.3) polynomial, reflected: bit 31 is the coefficient of x^0.
const POLY: u32 = 0xedb8_8320;
/// x^0 in the reflected representation.
const ONE: u32 = 1 << 31;

/// `a(x) * b(x) mod P`, both reflected (zlib's `multmodp`).
fn mul_mod(a: u32, mut b: u32) -> u32 {
    let mut product = 0;
    let mut m = ONE;
    while m != 0 {
        if a & m != 0 {
            product ^= b;
        }
        m >>= 1;
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
    }
    product
}

/// `x^(8 n) mod P`: what `n` zero bytes do to a CRC register.
fn x_pow_8n(mut n: u64) -> u32 {
    let mut result = ONE;
    let mut square = ONE >> 8; // x^8
    while n != 0 {
        if n & 1 != 0 {
            result = mul_mod(result, square);
        }
        square = mul_mod(square, square);
        n >>= 1;
    }
    result
}

/// The CRC register after `bytes`, from zero and without the final inversion.
fn raw_crc(bytes: &[u8]) -> u32 {
    let mut r = 0u32;
    for &b in bytes {
        r ^= u32::from(b);
        for _ in 0..8 {
            r = if r & 1 != 0 { (r >> 1) ^ POLY } else { r >> 1 };
        }
    }
    r
}

/// The change of the final CRC when the ID bits `id` are flipped and `after` bytes follow
/// the ID field.
#[cfg(test)]
fn delta(id: u16, after: usize) -> u32 {
    mul_mod(x_pow_8n(after as u64), raw_crc(&id.to_be_bytes()))
}

/// The changes of the CRC that each ID bit causes, reduced for solving: for a packet with
/// `after` bytes after the ID field.
#[derive(Clone, Copy)]
pub(super) struct IdBasis {
    /// `cols[i]`: the CRC change of flipping ID bit `i` (`delta(1 << i, after)`).
    cols: [u32; 16],
    /// `rows[b]`: a combination of ID bits whose CRC change has its highest set bit at `b`.
    rows: [Option<(u32, u16)>; 32],
}

impl IdBasis {
    /// Gaussian elimination over GF(2) of the 16 columns `delta(1 << i, after)`.
    pub(super) fn new(after: usize) -> Self {
        let shift = x_pow_8n(after as u64);
        let cols: [u32; 16] =
            std::array::from_fn(|bit| mul_mod(shift, raw_crc(&(1u16 << bit).to_be_bytes())));
        let mut rows: [Option<(u32, u16)>; 32] = [None; 32];
        for (bit, &col) in cols.iter().enumerate() {
            let mut v = col;
            let mut m = 1u16 << bit;
            // v never reduces to 0: CRC-32 tells every 16-bit change apart.
            while v != 0 {
                let top = 31 - v.leading_zeros() as usize;
                match rows[top] {
                    Some((rv, rm)) => {
                        v ^= rv;
                        m ^= rm;
                    }
                    None => {
                        rows[top] = Some((v, m));
                        break;
                    }
                }
            }
        }
        IdBasis { cols, rows }
    }

    /// `f` applied to [`IdBasis::new`] for `after`, from this thread's cache of the last few
    /// lengths: a stream of packets repeats a handful of sizes (full MTU segments above all,
    /// FIRST packets 16 bytes longer with their RETH), and a basis costs about 2 000 word
    /// operations to build, its use about 30. The cache is searched whole (eight lengths)
    /// and refilled round-robin, so lengths that differ by a multiple of the slot count
    /// cannot evict each other on every packet.
    pub(super) fn with_cached<R>(after: usize, f: impl FnOnce(&IdBasis) -> R) -> R {
        use std::cell::RefCell;
        const SLOTS: usize = 8;
        struct Cache {
            slots: [Option<(usize, IdBasis)>; SLOTS],
            next: usize,
        }
        thread_local! {
            static CACHE: RefCell<Cache> =
                const { RefCell::new(Cache { slots: [None; SLOTS], next: 0 }) };
        }
        CACHE.with(|c| {
            let mut c = c.borrow_mut();
            if let Some((_, b)) = c.slots.iter().flatten().find(|(a, _)| *a == after) {
                return f(b);
            }
            let at = c.next;
            c.next = (at + 1) % SLOTS;
            let (_, b) = c.slots[at].insert((after, IdBasis::new(after)));
            f(b)
        })
    }

    /// The CRC change of flipping the ID bits `id`: what turns the ICRC computed with one
    /// ID into the one for `old ^ id`.
    pub(super) fn delta(&self, id: u16) -> u32 {
        self.cols
            .iter()
            .enumerate()
            .filter(|&(bit, _)| id & (1 << bit) != 0)
            .fold(0, |d, (_, &c)| d ^ c)
    }

    /// The ID whose change explains the CRC difference `diff`; `None` when none does.
    pub(super) fn solve(&self, diff: u32) -> Option<u16> {
        let (mut d, mut id) = (diff, 0u16);
        while d != 0 {
            let top = 31 - d.leading_zeros() as usize;
            let (rv, rm) = self.rows[top]?;
            d ^= rv;
            id ^= rm;
        }
        Some(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delta_is_what_crc32_sees() {
        // Flip the two bytes at offset 12 of a 100-byte message: the CRC changes by delta.
        let mut m: Vec<u8> = (0..100u8).map(|i| i.wrapping_mul(37)).collect();
        let before = crc32fast::hash(&m);
        let id = 0x3dbbu16;
        m[12] ^= (id >> 8) as u8;
        m[13] ^= id as u8;
        assert_eq!(crc32fast::hash(&m) ^ before, delta(id, 100 - 14));
    }

    #[test]
    fn every_id_is_recovered_at_several_lengths() {
        for after in [0usize, 1, 22, 300, 1058, 4118, 9000] {
            let basis = IdBasis::new(after);
            for id in (0..=u16::MAX).step_by(251).chain([1, 0x8000, 0xffff]) {
                assert_eq!(
                    basis.solve(delta(id, after)),
                    Some(id),
                    "id {id} after {after}"
                );
            }
        }
    }

    #[test]
    fn a_single_flipped_bit_after_the_id_is_never_an_id() {
        // Whether a flip passes depends only on its distance from the ID field, so one packet
        // with 10 000 bytes after the ID covers every packet up to that size: walk the flip
        // from the last byte (b = 0) to the byte right after the ID.
        let after = 10_000;
        let basis = IdBasis::new(after);
        let x8 = x_pow_8n(1);
        let mut effects: Vec<u32> = (0..8).map(|bit| raw_crc(&[1u8 << bit])).collect();
        for b in 0..after {
            for (bit, e) in effects.iter_mut().enumerate() {
                assert_eq!(basis.solve(*e), None, "byte {b} from the end, bit {bit}");
                *e = mul_mod(*e, x8);
            }
        }
    }

    #[test]
    fn the_cache_gives_the_basis_of_the_length_asked() {
        // 4118 and 4134 differ by a RETH (16 bytes, twice the slot count): they alternate.
        for after in [22usize, 30, 22, 1058, 4118, 4134, 4118, 4134, 1058, 22] {
            let id = (after as u16).wrapping_mul(0x9e37);
            let solved = IdBasis::with_cached(after, |b| b.solve(delta(id, after)));
            assert_eq!(solved, Some(id));
        }
        for after in 0..40 {
            IdBasis::with_cached(after, |b| assert_eq!(b.delta(0x1234), delta(0x1234, after)));
        }
    }

    #[test]
    fn the_basis_delta_is_the_direct_one() {
        for after in [0usize, 22, 4118] {
            let basis = IdBasis::new(after);
            for id in (0..=u16::MAX).step_by(97).chain([0xffff]) {
                assert_eq!(basis.delta(id), delta(id, after), "id {id} after {after}");
            }
        }
    }

    #[test]
    fn random_differences_mostly_fail() {
        // A 32-bit difference is an ID's in 2^16 of 2^32 cases.
        let basis = IdBasis::new(1000);
        let mut x = 0x1234_5678u32;
        let mut passed = 0;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            if basis.solve(x).is_some() {
                passed += 1;
            }
        }
        assert!(passed < 20, "{passed} of 100000 random differences passed");
    }
}
