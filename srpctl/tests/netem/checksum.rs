//! Completing the checksums a veth leaves open. A veth offers checksum offload, so the
//! kernel hands it UDP and TCP segments with only the pseudo-header summed
//! (CHECKSUM_PARTIAL); a frame read from its peer with a packet socket still has that
//! partial sum, and once re-sent through another veth it arrives as a corrupt segment the
//! receiver drops. A NIC would finish the sum on its way to the wire: so does the impairer.

/// Ethernet header bytes (no VLAN tag on these links).
const ETH_LEN: usize = 14;
const ETHERTYPE_IPV4: u16 = 0x0800;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;

/// What [`complete`] did to a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sum {
    /// Not IPv4 TCP or UDP (or a fragment, or a UDP datagram without a checksum): as it was.
    Untouched,
    /// The checksum was already right.
    Right,
    /// The checksum was written (it was partial, or wrong).
    Written,
    /// An IPv4 TCP or UDP frame too short for its own lengths: as it was.
    Malformed,
}

/// The one's-complement sum of `bytes` (as big-endian 16-bit words, an odd last byte
/// padded) added to `acc`, not folded.
fn sum(mut acc: u64, bytes: &[u8]) -> u64 {
    let mut words = bytes.chunks_exact(2);
    for w in &mut words {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        acc += u64::from(*last) << 8;
    }
    acc
}

fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// Writes the right TCP or UDP checksum into an IPv4 Ethernet frame (RFC 768, RFC 793:
/// the one's complement of the sum over the pseudo-header and the segment).
pub fn complete(frame: &mut [u8]) -> Sum {
    if frame.len() < ETH_LEN + 20
        || u16::from_be_bytes([frame[12], frame[13]]) != ETHERTYPE_IPV4
        || frame[ETH_LEN] >> 4 != 4
    {
        return Sum::Untouched;
    }
    let ip = &frame[ETH_LEN..];
    let proto = ip[9];
    let more_or_offset = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff;
    if (proto != PROTO_UDP && proto != PROTO_TCP) || more_or_offset != 0 {
        return Sum::Untouched;
    }
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    if ihl < 20 || total < ihl || ETH_LEN + total > frame.len() {
        return Sum::Malformed;
    }
    let l4_len = total - ihl;
    let (at, min) = if proto == PROTO_UDP { (6, 8) } else { (16, 20) };
    if l4_len < min {
        return Sum::Malformed;
    }
    let l4 = ETH_LEN + ihl;
    let old = [frame[l4 + at], frame[l4 + at + 1]];
    if proto == PROTO_UDP && old == [0, 0] {
        return Sum::Untouched; // no checksum (IPv4 allows it)
    }
    frame[l4 + at] = 0;
    frame[l4 + at + 1] = 0;
    let ip = &frame[ETH_LEN..];
    let mut acc = sum(0, &ip[12..20]); // source and destination addresses
    acc += u64::from(proto) + l4_len as u64;
    acc = sum(acc, &frame[l4..l4 + l4_len]);
    let mut check = !fold(acc);
    if proto == PROTO_UDP && check == 0 {
        check = 0xffff; // 0 means "none" for UDP
    }
    frame[l4 + at..l4 + at + 2].copy_from_slice(&check.to_be_bytes());
    if check.to_be_bytes() == old {
        Sum::Right
    } else {
        Sum::Written
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet frame: IPv4 10.9.1.1 → 10.9.1.2, UDP 4791 → 4791, 4 payload bytes
    /// "RoCE", with the UDP checksum `check`.
    fn udp_frame(check: [u8; 2]) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00];
        f.extend_from_slice(&[
            0x45, 0x00, 0x00, 0x20, // version 4, IHL 5; total length 32
            0x00, 0x00, 0x40, 0x00, // ID 0; DF, offset 0
            0x40, 0x11, 0x00, 0x00, // TTL 64, UDP; header checksum (not ours)
            10, 9, 1, 1, 10, 9, 1, 2, // addresses
            0x12, 0xb7, 0x12, 0xb7, // ports 4791
            0x00, 0x0c, check[0], check[1], // length 12, checksum
            b'R', b'o', b'C', b'E',
        ]);
        f
    }

    // The checksum by hand: pseudo-header 0x0a09 + 0x0101 + 0x0a09 + 0x0102 + 0x0011 +
    // 0x000c = 0x1632; UDP header 0x12b7 + 0x12b7 + 0x000c + 0 = 0x257a; payload 0x526f +
    // 0x4345 = 0x95b4; total 0xd160, complement 0x2e9f.
    const RIGHT: [u8; 2] = [0x2e, 0x9f];

    #[test]
    fn a_partial_sum_is_completed() {
        // CHECKSUM_PARTIAL leaves the folded pseudo-header sum (0x1632) in the field.
        let mut f = udp_frame([0x16, 0x32]);
        assert_eq!(complete(&mut f), Sum::Written);
        assert_eq!(f, udp_frame(RIGHT));
        assert_eq!(complete(&mut f), Sum::Right);
        assert_eq!(f, udp_frame(RIGHT));
    }

    #[test]
    fn no_checksum_fragments_and_others_are_left_alone() {
        let mut f = udp_frame([0, 0]);
        assert_eq!(complete(&mut f), Sum::Untouched);
        assert_eq!(f, udp_frame([0, 0]));
        let mut frag = udp_frame([0x16, 0x32]);
        frag[ETH_LEN + 6] = 0x20; // more fragments
        assert_eq!(complete(&mut frag), Sum::Untouched);
        let mut arp = udp_frame([0x16, 0x32]);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(complete(&mut arp), Sum::Untouched);
        let mut short = udp_frame([0x16, 0x32]);
        short.truncate(short.len() - 1);
        assert_eq!(complete(&mut short), Sum::Malformed);
    }
}
