#!/usr/bin/env python3
"""Independent ICRC check of RoCEv2 packets in a pcap file.

For every UDP datagram to port 4791, recompute the invariant CRC from the packet's real IP
and UDP headers (IBTA Annex A17 / rxe_icrc.c: 8 bytes of 0xff for the masked LRH, IP with
TOS/TTL/checksum (IPv4) or traffic class/flow label/hop limit (IPv6) set to ones, UDP with
checksum 0xffff, BTH byte 4 set to 0xff) with zlib's CRC-32, and compare it with the last four
bytes of the datagram (little-endian). Written apart from the Rust code on purpose: it shares
nothing with it but the recipe, and it reads the IP ID the kernel actually sent.

Usage: icrc_check.py FILE.pcap   -> prints "N packets, N ICRC ok", exits 1 on any mismatch
or when no RoCEv2 packet was found.
"""
import struct
import sys
import zlib


def records(path):
    with open(path, "rb") as f:
        head = f.read(24)
        magic = struct.unpack("<I", head[:4])[0]
        if magic in (0xA1B2C3D4, 0xA1B23C4D):
            endian = "<"
        elif magic in (0xD4C3B2A1, 0x4D3CB2A1):
            endian = ">"
        else:
            raise SystemExit(f"{path}: not a classic pcap file (magic {magic:#x})")
        linktype = struct.unpack(endian + "I", head[20:24])[0]
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                return
            _, _, incl, _ = struct.unpack(endian + "IIII", rec)
            yield linktype, f.read(incl)


def network_layer(linktype, frame):
    if linktype == 1:  # Ethernet
        ethertype = struct.unpack("!H", frame[12:14])[0]
        return ethertype, frame[14:]
    if linktype == 113:  # Linux cooked (SLL)
        return struct.unpack("!H", frame[14:16])[0], frame[16:]
    if linktype == 276:  # Linux cooked v2 (SLL2)
        return struct.unpack("!H", frame[0:2])[0], frame[20:]
    if linktype in (101, 12):  # raw IP
        return (0x0800 if frame[0] >> 4 == 4 else 0x86DD), frame
    raise SystemExit(f"unsupported link type {linktype}")


def icrc(ip_header, udp_header, roce, v6):
    ip = bytearray(ip_header)
    if v6:
        ip[0] = (ip[0] & 0xF0) | 0x0F  # traffic class high nibble
        ip[1:4] = b"\xff\xff\xff"  # traffic class low nibble + flow label
        ip[7] = 0xFF  # hop limit
    else:
        ip[1] = 0xFF  # TOS
        ip[8] = 0xFF  # TTL
        ip[10:12] = b"\xff\xff"  # header checksum
    udp = bytearray(udp_header)
    udp[6:8] = b"\xff\xff"
    ib = bytearray(roce)
    ib[4] = 0xFF  # FECN, BECN, reserved
    return zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(udp) + bytes(ib)) & 0xFFFFFFFF


def main(path):
    total = ok = 0
    for linktype, frame in records(path):
        ethertype, pkt = network_layer(linktype, frame)
        if ethertype == 0x0800:
            ihl = (pkt[0] & 0x0F) * 4
            if pkt[9] != 17:
                continue
            ip_header, rest, v6 = pkt[:ihl], pkt[ihl:], False
            ip_id = struct.unpack("!H", pkt[4:6])[0]
        elif ethertype == 0x86DD:
            if pkt[6] != 17:
                continue
            ip_header, rest, v6 = pkt[:40], pkt[40:], True
            ip_id = None
        else:
            continue
        udp_header, payload = rest[:8], rest[8:]
        if struct.unpack("!H", udp_header[2:4])[0] != 4791 or len(payload) < 16:
            continue
        total += 1
        want = icrc(ip_header, udp_header, payload[:-4], v6)
        got = struct.unpack("<I", payload[-4:])[0]
        if want == got:
            ok += 1
        else:
            print(f"packet {total}: ICRC {got:#010x} on the wire, {want:#010x} computed "
                  f"(opcode {payload[0]:#04x}, IP ID {ip_id})")
    print(f"{total} packets, {ok} ICRC ok")
    return 0 if total > 0 and ok == total else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
