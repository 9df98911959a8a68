//! `Engine::resources`: every create counts, every destroy uncounts.

use super::*;
use crate::mem::MemBlock;
use crate::mr::Access;
use std::net::Ipv4Addr;

#[test]
fn resources_follow_creates_and_destroys() {
    let mut e = Engine::new(Guid(1), &[IpAddr::V4(Ipv4Addr::LOCALHOST)]);
    assert_eq!(e.resources(), Resources::default());
    let pd = e.alloc_pd();
    let mr = e
        .reg_mr(
            pd,
            MemBlock::new(4096),
            0,
            4096,
            0x1000,
            Access::LOCAL_WRITE,
        )
        .expect("reg");
    let cq = e.create_cq(16);
    let _srq = e.create_srq(4); // no destroy_srq verb yet: it stays counted
    let qp = e.create_qp(QpInit::rc(pd, cq, 4, 4)).expect("qp");
    let live = Resources {
        qps: 1,
        cqs: 1,
        srqs: 1,
        mrs: 1,
    };
    assert_eq!(e.resources(), live);
    e.destroy_qp(Time(0), qp).expect("destroy qp");
    e.destroy_cq(cq).expect("destroy cq");
    e.dereg_mr(mr).expect("dereg");
    assert_eq!(
        e.resources(),
        Resources {
            srqs: 1,
            ..Resources::default()
        }
    );
}
