//! Tests of the MR table through its public API: keys, violations, the FRMR lifecycle,
//! concurrency and a seeded model check of spans.

use std::sync::Arc;

use super::*;
use crate::ids::{Lkey, Rkey};
use crate::mem::MemBlock;

const PD: PdId = PdId(1);
const IOVA: u64 = 0x7f00_0000_1000;

fn rw() -> Access {
    Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed) ^ (i >> 8) as u8)
        .collect()
}

/// A table with one regular MR of 1000 bytes at offset 100 of a 4 KiB block, at `IOVA`.
fn regular(access: Access) -> (MrTable, Arc<MemBlock>, MrKeys) {
    let mut t = MrTable::new(64);
    let block = MemBlock::new(4096);
    let keys = t
        .reg_mr(PD, Arc::clone(&block), 100, 1000, IOVA, access)
        .expect("valid registration");
    (t, block, keys)
}

#[test]
fn regular_mr_read_write_through_spans() {
    let (t, block, keys) = regular(rw());
    let rkey = keys.rkey.expect("remote rights give an R_Key");
    assert_eq!(rkey.0, keys.lkey.0, "as rxe, rkey == lkey");
    let span = t
        .check(PD, keys.lkey, false, IOVA + 10, 50, Access::LOCAL_WRITE)
        .expect("local write allowed");
    assert_eq!(span.len(), 50);
    let data = pattern(50, 1);
    span.write(0, &data).expect("inside span");
    let mut raw = [0u8; 50];
    block.read(110, &mut raw).expect("in block");
    assert_eq!(raw[..], data[..]);
    let remote = t
        .check(PD, rkey, true, IOVA, 1000, Access::REMOTE_READ)
        .expect("whole region");
    let mut got = [0u8; 50];
    remote.read(10, &mut got).expect("inside span");
    assert_eq!(got[..], data[..]);
    let sub = remote.slice(10, 50).expect("inside");
    sub.read(0, &mut got).expect("inside");
    assert_eq!(got[..], data[..]);
    assert!(matches!(
        span.write(45, &data[..10]),
        Err(MrError::OutOfSpan {
            offset: 45,
            len: 10,
            span_len: 50
        })
    ));
    let info = t.info(keys.index()).expect("registered");
    assert_eq!(info.state, MrState::Valid);
    assert!(!info.fast_reg);
}

#[test]
fn registration_rules() {
    let mut t = MrTable::new(2);
    let b = MemBlock::new(4096);
    let reg = |t: &mut MrTable, off, len, iova, access| {
        t.reg_mr(PD, Arc::clone(&b), off, len, iova, access)
    };
    let e = reg(&mut t, 0, 16, 0, Access::REMOTE_WRITE).expect_err("needs local write");
    assert!(matches!(e, MrError::BadAccess { .. }));
    assert_eq!(e.class(), ErrorClass::InvalidArgument);
    assert!(reg(&mut t, 0, 16, 0, Access::REMOTE_ATOMIC).is_err());
    let e = reg(&mut t, 4000, 97, 0, rw()).expect_err("past the block");
    assert!(matches!(
        e,
        MrError::OutOfBlock {
            offset: 4000,
            len: 97,
            block_len: 4096,
            ..
        }
    ));
    assert!(reg(&mut t, u64::MAX, 2, 0, rw()).is_err());
    let e = reg(&mut t, 0, 10, u64::MAX - 5, rw()).expect_err("iova overflows");
    assert!(matches!(e, MrError::IovaOverflow { .. }));
    let local = reg(&mut t, 0, 16, 0, Access::LOCAL_WRITE).expect("ok");
    assert_eq!(local.rkey, None, "no remote right, no R_Key");
    assert_eq!(local.index(), MrIndex(1), "index 0 is reserved");
    reg(&mut t, 0, 16, 0, rw()).expect("second");
    assert!(matches!(
        reg(&mut t, 0, 16, 0, rw()),
        Err(MrError::TableFull { max: 2 })
    ));
    assert_eq!(t.live(), 2);
}

#[test]
fn every_check_violation_gives_its_error() {
    let (t, _b, keys) = regular(Access::LOCAL_WRITE | Access::REMOTE_READ);
    let key = MrKey::from(keys.lkey);
    let r = Access::REMOTE_READ;
    let remote = |k: MrKey, iova, len, need| t.check(PD, k, true, iova, len, need);

    let e = remote(MrKey::new(MrIndex(9), 0), IOVA, 8, r).expect_err("unused index");
    assert!(matches!(
        e,
        MrError::NoSuchMr {
            op: MrOp::RemoteAccess,
            ..
        }
    ));
    assert!(e.is_remote_access_error());
    assert!(remote(MrKey(key.0 & 0xff), IOVA, 8, r).is_err(), "index 0");
    let e = remote(key.next_variant(), IOVA, 8, r).expect_err("stale variant");
    assert!(matches!(e, MrError::KeyMismatch { current, .. } if current == key));

    let e = t
        .check(PdId(2), key, true, IOVA, 8, r)
        .expect_err("other PD");
    assert!(matches!(
        e,
        MrError::WrongPd {
            pd: PdId(2),
            mr_pd: PD,
            ..
        }
    ));

    for (iova, len) in [
        (IOVA - 1, 8),
        (IOVA + 993, 8),
        (IOVA + 1000, 1),
        (u64::MAX - 3, 8),
        (IOVA, u64::MAX),
        (0, 1),
    ] {
        let e = remote(key, iova, len, r).expect_err("out of range");
        assert_eq!(
            e,
            MrError::OutOfRange {
                op: MrOp::RemoteAccess,
                key,
                iova,
                len,
                mr_iova: IOVA,
                mr_len: 1000
            }
        );
    }
    assert!(remote(key, IOVA + 992, 8, r).is_ok(), "last 8 bytes");

    let e = remote(key, IOVA, 8, Access::REMOTE_WRITE).expect_err("no remote write");
    assert!(matches!(
        e,
        MrError::AccessDenied {
            need: Access::REMOTE_WRITE,
            ..
        }
    ));
    assert!(e.is_remote_access_error());

    let (t2, _b2, local) = regular(Access::empty());
    let e = t2
        .check(PD, local.lkey, true, IOVA, 8, r)
        .expect_err("no R_Key");
    assert!(matches!(e, MrError::NoRemoteKey { .. }));
    assert!(
        t2.check(PD, local.lkey, false, IOVA, 8, Access::empty())
            .is_ok(),
        "local read"
    );
    let e = t2
        .check(PD, local.lkey, false, IOVA, 8, Access::LOCAL_WRITE)
        .expect_err("no local write");
    assert!(e.is_local_protection_error());
    assert_eq!(e.class(), ErrorClass::LocalProtection);
}

#[test]
fn zero_length_remote_access_needs_no_key() {
    let (t, _b, _keys) = regular(rw());
    let span = t
        .check(
            PdId(99),
            Rkey(0xdead_beef),
            true,
            u64::MAX,
            0,
            Access::REMOTE_WRITE,
        )
        .expect("C9-88");
    assert!(span.is_empty());
    span.write(0, &[]).expect("empty write");
    assert!(span.read(0, &mut [0u8; 1]).is_err());
    assert!(
        t.check(PD, Lkey(0xdead_beef), false, 0, 0, Access::empty())
            .is_err()
    );
}

fn fast_reg_wr<'a>(key: MrKey, pages: &'a [(Arc<MemBlock>, u64)], access: Access) -> FastRegWr<'a> {
    FastRegWr {
        key,
        pages,
        page_size: 4096,
        first_byte_offset: 100,
        iova: 0xdead_0064,
        length: 3 * 4096 + 50,
        access,
    }
}

#[test]
fn fast_reg_lifecycle() {
    let mut t = MrTable::new(8);
    let (a, b) = (MemBlock::new(1 << 16), MemBlock::new(1 << 16));
    let keys = t.alloc_fast_reg_mr(PD, 4).expect("alloc");
    let mr = keys.index();
    let key0 = MrKey::from(keys.lkey);
    assert_eq!(keys.rkey, Some(Rkey(key0.0)));
    assert_eq!(t.info(mr).map(|i| i.state), Some(MrState::Free));
    let e = t
        .check(PD, key0, false, 0, 1, Access::empty())
        .expect_err("free");
    assert!(matches!(e, MrError::NotValid { .. }));

    let pages = [
        (Arc::clone(&b), 8192),
        (Arc::clone(&a), 0),
        (Arc::clone(&b), 0),
        (Arc::clone(&a), 16384 + 3),
    ];
    let key1 = key0.next_variant();
    let wr = fast_reg_wr(key1, &pages, rw());
    t.fast_reg(PD, mr, &wr).expect("REG_MR");
    let info = t.info(mr).expect("exists");
    assert_eq!(
        (info.state, info.lkey, info.rkey),
        (MrState::Valid, Lkey(key1.0), Some(Rkey(key1.0)))
    );

    let len = usize::try_from(wr.length).expect("small");
    let data = pattern(len, 5);
    let span = t
        .check(PD, key1, true, wr.iova, wr.length, Access::REMOTE_WRITE)
        .expect("valid");
    span.write(0, &data).expect("whole region");
    // Byte x lives at fbo + x of the page concatenation.
    for (x, &byte) in data.iter().enumerate() {
        let p = 100 + x;
        let (block, base) = &pages[p / 4096];
        let mut one = [0u8];
        block
            .read(*base as usize + p % 4096, &mut one)
            .expect("page");
        assert_eq!(one[0], byte, "byte {x}");
    }
    let mut back = vec![0u8; 5000];
    span.read(3000, &mut back)
        .expect("crosses two page boundaries");
    assert_eq!(back[..], data[3000..8000]);

    let e = t
        .check(PD, key0, true, wr.iova, 1, Access::REMOTE_READ)
        .expect_err("old key");
    assert!(matches!(e, MrError::KeyMismatch { .. }));
    assert!(
        t.invalidate(PD, key0, false).is_err(),
        "old key cannot invalidate"
    );
    t.invalidate(PD, key1, false).expect("LOCAL_INV");
    let e = t
        .check(PD, key1, true, wr.iova, 1, Access::REMOTE_READ)
        .expect_err("invalidated");
    assert!(matches!(
        e,
        MrError::NotValid {
            op: MrOp::RemoteAccess,
            ..
        }
    ));
    span.read(0, &mut back[..10])
        .expect("a span outlives invalidation");

    let key2 = key1.next_variant();
    t.fast_reg(PD, mr, &fast_reg_wr(key2, &pages, Access::LOCAL_WRITE))
        .expect("again");
    assert!(
        t.check(PD, key2, false, wr.iova, 1, Access::LOCAL_WRITE)
            .is_ok()
    );
    assert!(
        t.check(PD, key1, false, wr.iova, 1, Access::LOCAL_WRITE)
            .is_err()
    );
    let e = t
        .invalidate(PD, key2, true)
        .expect_err("no R_Key to invalidate remotely");
    assert!(matches!(
        e,
        MrError::NoRemoteKey {
            op: MrOp::RemoteInvalidate,
            ..
        }
    ));
    assert_eq!(e.class(), ErrorClass::RemoteInvalidRequest);
    let e = t.invalidate(PdId(2), key2, false).expect_err("other PD");
    assert_eq!(e.class(), ErrorClass::LocalOperation);
    t.invalidate(PD, key2, false).expect("LOCAL_INV by L_Key");

    let key3 = key2.next_variant();
    t.fast_reg(PD, mr, &fast_reg_wr(key3, &pages, rw()))
        .expect("third");
    t.invalidate(PD, Rkey(key3.0), true).expect("SEND_WITH_INV");
    assert_eq!(t.info(mr).map(|i| i.state), Some(MrState::Free));
}

#[test]
fn fast_reg_rejections() {
    let mut t = MrTable::new(8);
    let blk = MemBlock::new(1 << 16);
    let keys = t.alloc_fast_reg_mr(PD, 2).expect("alloc");
    let (mr, key) = (keys.index(), MrKey::from(keys.lkey));
    let two = [(Arc::clone(&blk), 0), (Arc::clone(&blk), 4096)];
    // One page, 100 + 1000 bytes of it: valid, so each test below breaks one rule.
    let ok = || FastRegWr {
        length: 1000,
        ..fast_reg_wr(key, &two[..1], rw())
    };
    let fr = |t: &mut MrTable, wr: &FastRegWr<'_>| t.fast_reg(PD, mr, wr);

    let e = fr(
        &mut t,
        &FastRegWr {
            key: MrKey::new(MrIndex(5), 0),
            ..ok()
        },
    )
    .expect_err("index");
    assert!(matches!(e, MrError::KeyIndexChanged { .. }));
    assert_eq!(e.class(), ErrorClass::LocalOperation);
    let three = [two[0].clone(), two[1].clone(), two[0].clone()];
    let e = fr(
        &mut t,
        &FastRegWr {
            pages: &three,
            ..ok()
        },
    )
    .expect_err("3 > 2 pages");
    assert!(matches!(
        e,
        MrError::TooManyPages {
            pages: 3,
            max_pages: 2
        }
    ));
    for page_size in [0, 3000, 2048, 4097, 4 << 20] {
        let e = fr(&mut t, &FastRegWr { page_size, ..ok() }).expect_err("page size");
        assert_eq!(e, MrError::BadPageSize { page_size });
    }
    let e = fr(
        &mut t,
        &FastRegWr {
            first_byte_offset: 4096,
            length: 0,
            ..ok()
        },
    )
    .expect_err("fbo");
    assert!(matches!(e, MrError::BadLayout { .. }));
    let e = fr(
        &mut t,
        &FastRegWr {
            length: 4000,
            ..ok()
        },
    )
    .expect_err("100 + 4000 > 4096");
    assert!(matches!(e, MrError::BadLayout { .. }));
    let e = fr(
        &mut t,
        &FastRegWr {
            length: u64::MAX,
            ..ok()
        },
    )
    .expect_err("overflow");
    assert!(matches!(e, MrError::BadLayout { .. }));
    let late = [(Arc::clone(&blk), (1 << 16) - 4095)];
    let e = fr(
        &mut t,
        &FastRegWr {
            pages: &late,
            ..ok()
        },
    )
    .expect_err("page past block");
    assert!(matches!(e, MrError::PageOutOfBlock { page: 0, .. }));
    let e = fr(
        &mut t,
        &FastRegWr {
            access: Access::REMOTE_WRITE,
            ..ok()
        },
    )
    .expect_err("access");
    assert!(matches!(
        e,
        MrError::BadAccess {
            op: MrOp::FastReg,
            ..
        }
    ));
    let e = t.fast_reg(PdId(3), mr, &ok()).expect_err("pd");
    assert!(matches!(
        e,
        MrError::WrongPd {
            op: MrOp::FastReg,
            ..
        }
    ));
    let e = t.fast_reg(PD, MrIndex(7), &ok()).expect_err("no such MR");
    assert!(matches!(e, MrError::NoSuchIndex { .. }));

    fr(
        &mut t,
        &FastRegWr {
            length: 8000,
            pages: &two,
            ..ok()
        },
    )
    .expect("valid");
    let e = fr(&mut t, &ok()).expect_err("still valid");
    assert_eq!(e, MrError::NotFree { mr });

    let regular = t
        .reg_mr(PD, Arc::clone(&blk), 0, 64, 0, rw())
        .expect("regular");
    let rkey = MrKey::from(regular.lkey);
    let wr = FastRegWr { key: rkey, ..ok() };
    let e = t.fast_reg(PD, regular.index(), &wr).expect_err("not FRMR");
    assert!(matches!(e, MrError::NotFastReg { .. }));
    let e = t.invalidate(PD, rkey, true).expect_err("not FRMR");
    assert!(matches!(
        e,
        MrError::NotFastReg {
            op: MrOp::RemoteInvalidate,
            ..
        }
    ));
    for max_pages in [0, MAX_FAST_REG_PAGES + 1] {
        assert!(matches!(
            t.alloc_fast_reg_mr(PD, max_pages),
            Err(MrError::BadMaxPages { .. })
        ));
    }
}

#[test]
fn dereg_retires_the_key_but_not_live_spans() {
    let mut t = MrTable::new(1);
    let blk = MemBlock::new(64);
    blk.write(0, b"abc").expect("in block");
    let k1 = t.reg_mr(PD, Arc::clone(&blk), 0, 64, 0, rw()).expect("reg");
    let span = t
        .check(PD, k1.lkey, false, 0, 3, Access::empty())
        .expect("valid");
    t.dereg(k1.index()).expect("dereg");
    assert_eq!(t.live(), 0);
    assert!(matches!(
        t.dereg(k1.index()),
        Err(MrError::NoSuchIndex { .. })
    ));
    assert!(matches!(
        t.check(PD, k1.lkey, false, 0, 3, Access::empty()),
        Err(MrError::NoSuchMr { .. })
    ));
    let mut got = [0u8; 3];
    span.read(0, &mut got).expect("memory kept alive");
    assert_eq!(&got, b"abc");
    let k2 = t.reg_mr(PD, blk, 0, 64, 0, rw()).expect("index reused");
    assert_eq!(k2.index(), k1.index());
    assert_ne!(k2.lkey, k1.lkey, "with a new variant");
    assert!(t.check(PD, k1.lkey, false, 0, 3, Access::empty()).is_err());
}

#[test]
fn concurrent_span_writers_and_reader() {
    let (t, _b, keys) = regular(rw());
    let lkey = keys.lkey;
    let first = t
        .check(PD, lkey, false, IOVA, 501, Access::LOCAL_WRITE)
        .expect("ok");
    let second = t
        .check(PD, lkey, false, IOVA + 501, 499, Access::LOCAL_WRITE)
        .expect("ok");
    let all = t
        .check(PD, lkey, false, IOVA, 1000, Access::empty())
        .expect("ok");
    let (d1, d2) = (pattern(501, 1), pattern(499, 2));
    std::thread::scope(|s| {
        s.spawn(|| (0..2000).for_each(|_| first.write(0, &d1).expect("in span")));
        s.spawn(|| (0..2000).for_each(|_| second.write(0, &d2).expect("in span")));
        s.spawn(|| {
            let mut buf = [0u8; 1000];
            (0..2000).for_each(|_| all.read(0, &mut buf).expect("in span"));
        });
    });
    let mut buf = [0u8; 1000];
    all.read(0, &mut buf).expect("in span");
    assert_eq!(buf[..501], d1[..]);
    assert_eq!(buf[501..], d2[..]);
}
