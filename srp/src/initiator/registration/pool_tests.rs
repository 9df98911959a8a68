//! Region states, key rolling and busy of [`KeyPool`].

use super::RegError;
use super::pool::{KeyPool, PoolCounts};
use ib_verbs::mr::{MrIndex, MrKey};

fn pool(n: u32) -> KeyPool {
    KeyPool::new((1..=n).map(|i| MrKey::new(MrIndex(i), 0)))
}

#[test]
fn every_take_rolls_the_key() {
    let mut p = pool(1);
    let mut seen = Vec::new();
    for _ in 0..3 {
        let k = p.take(1).expect("free")[0];
        assert!(!seen.contains(&k), "key {k} reused");
        seen.push(k);
        assert_eq!(p.release(&[k], Some(k)), Ok(vec![].into()));
    }
    assert_eq!(
        seen.iter().map(|k| k.variant()).collect::<Vec<_>>(),
        [1, 2, 3]
    );
}

#[test]
fn exhaustion_is_busy_and_changes_nothing() {
    let mut p = pool(3);
    let held = p.take(2).expect("two");
    assert_eq!(p.take(2), Err(RegError::Busy { needed: 2, free: 1 }));
    assert_eq!(p.counts().free, 1);
    let one = p.take(1).expect("the last");
    assert_eq!(p.take(1), Err(RegError::Busy { needed: 1, free: 0 }));
    assert_eq!(p.release(&held, None).expect("release").len(), 2);
    assert_eq!(p.release(&one, None).expect("release").len(), 1);
    // Still busy: the invalidations have not completed.
    assert!(matches!(p.take(1), Err(RegError::Busy { .. })));
}

#[test]
fn a_region_is_free_only_after_its_invalidation() {
    let mut p = pool(2);
    let keys = p.take(2).expect("two");
    // The target invalidated the first only; the second needs a LOCAL_INV.
    let inv = p.release(&keys, Some(keys[0])).expect("release");
    assert_eq!(inv.as_slice(), [keys[1]]);
    let c = p.counts();
    assert_eq!((c.free, c.invalidating), (1, 1));
    // A flushed LOCAL_INV does not free it; it must be posted again.
    p.invalidate_done(keys[1], false).expect("known");
    assert_eq!(p.counts().needs_invalidate, 1);
    assert_eq!(p.take_retries(), [keys[1]]);
    assert_eq!(p.take(2), Err(RegError::Busy { needed: 2, free: 1 }));
    p.invalidate_done(keys[1], true).expect("known");
    assert_eq!(
        p.counts(),
        PoolCounts {
            free: 2,
            ..PoolCounts::default()
        }
    );
}

#[test]
fn a_foreign_invalidated_key_frees_nothing() {
    let mut p = pool(1);
    let k = p.take(1).expect("free")[0];
    // The completion names another variant of the same region: not proof of invalidity.
    assert_eq!(p.release(&[k], Some(k.next_variant())), Ok(vec![k].into()));
    assert_eq!(p.counts().invalidating, 1);
}

#[test]
fn stale_handles_and_completions_are_refused() {
    let mut p = pool(1);
    let k = p.take(1).expect("free")[0];
    assert_eq!(p.release(&[k], Some(k)), Ok(vec![].into()));
    assert_eq!(
        p.release(&[k], Some(k)),
        Err(RegError::StaleHandle { key: k })
    );
    assert_eq!(
        p.invalidate_done(k, true),
        Err(RegError::StaleHandle { key: k })
    );
    assert_eq!(p.counts().free, 1);
}

#[test]
fn discarded_regions_come_back_only_when_replaced() {
    let mut p = KeyPool::new([MrKey(0x100), MrKey(0x200)]);
    let held = p.take(1).expect("free");
    assert!(p.discard(&[MrKey(0x999)]).is_err(), "not held");
    p.discard(&held).expect("held");
    assert_eq!(p.counts().discarded, 1);
    assert_eq!(
        p.release(&held, None),
        Err(RegError::StaleHandle { key: held[0] })
    );
    let gone = p.take_discarded();
    assert_eq!(gone, vec![(0, held[0])]);
    // Handed out once: a later call (another command discarded meanwhile) must not hand
    // the same region out for a second release and a second replacement.
    assert!(p.take_discarded().is_empty());
    assert_eq!(
        p.counts().discarded,
        1,
        "still out of service until replaced"
    );
    assert!(
        p.replace(1, MrKey(0x300)).is_err(),
        "slot 1 is not discarded"
    );
    p.replace(0, MrKey(0x300)).expect("discarded");
    assert_eq!(p.counts().free, 2);
    assert!(p.take_discarded().is_empty());
}

#[test]
fn a_pool_is_built_from_the_callers_allocations_or_names_the_refusal() {
    use super::frmr::{FrmrConfig, FrmrStrategy};
    let config = FrmrConfig {
        window: 2,
        mrs_per_cmd: 2,
        max_pages: 8,
        ..FrmrConfig::default()
    };
    let mut asked = Vec::new();
    let mut next = 0u32;
    let s = FrmrStrategy::allocate(config, |pages| {
        asked.push(pages);
        next += 1;
        Ok::<_, &str>(MrKey::new(MrIndex(next), 0))
    })
    .expect("pool");
    assert_eq!(
        asked,
        [8, 8, 8, 8],
        "window × mrs_per_cmd regions of max_pages"
    );
    assert_eq!(s.counts().free, 4);
    let mut n = 0;
    let refused = FrmrStrategy::allocate(config, |_| {
        n += 1;
        if n == 3 {
            Err("no memory")
        } else {
            Ok(MrKey::new(MrIndex(n), 0))
        }
    });
    assert_eq!(
        refused.err(),
        Some(RegError::Allocation("no memory".into()))
    );
}
