//! Descriptor planning: each format, each refusal, external tables, operation splitting and
//! residuals.

use super::*;
use crate::wire::cmd::TaskAttr;
use crate::wire::desc::Indirect;
use crate::wire::{SolicitFlags, Tag};
use scsi::Lun;
use zerocopy::IntoBytes;

fn limits() -> DataLimits {
    DataLimits {
        formats: BufFormats::DIRECT | BufFormats::INDIRECT,
        immediate: true,
        max_transfer: 1 << 20,
        max_table_entries: 64,
    }
}

fn cmd<'a>(data_out: DataDesc<'a>, data_in: DataDesc<'a>, imm: &'a [u8]) -> Cmd<'a> {
    Cmd {
        flags: SolicitFlags::empty(),
        tag: Tag(1),
        lun: Lun([0; 8]),
        task_attr: TaskAttr::Simple,
        cdb: [0; 16],
        add_cdb: &[],
        data_out,
        data_in,
        imm_data: imm,
        remote_invalidate: false,
    }
}

fn seg(va: u64, len: u32) -> DirectBuf {
    DirectBuf::new(va, Rkey(0x44), len)
}

#[test]
fn direct_data_in_is_one_segment() {
    let c = cmd(DataDesc::None, DataDesc::Direct(seg(0x1000, 4096)), &[]);
    let p = DataPlan::from_cmd(&c, &limits()).expect("valid");
    assert_eq!(p.data_out, None);
    assert_eq!(
        p.data_in,
        Some(Buffer::Segments(vec![seg(0x1000, 4096)].into()))
    );
    assert_eq!(p.data_in.as_ref().map(Buffer::len), Some(4096));
}

#[test]
fn immediate_data_out_is_its_length() {
    let data = [7u8; 512];
    let c = cmd(DataDesc::Immediate, DataDesc::None, &data);
    let p = DataPlan::from_cmd(&c, &limits()).expect("valid");
    assert_eq!(p.data_out, Some(Buffer::Immediate(512)));
    assert!(!p.data_out.as_ref().is_some_and(Buffer::is_empty));
}

#[test]
fn complete_indirect_list_is_its_segments() {
    let list = [seg(0x1000, 512), seg(0x9000, 1024)];
    let table = seg(0x100, 32);
    let ind = Indirect {
        table,
        total_len: 1536,
        inline: &list,
    };
    let c = cmd(DataDesc::Indirect(ind), DataDesc::None, &[]);
    let p = DataPlan::from_cmd(&c, &limits()).expect("valid");
    assert_eq!(p.data_out, Some(Buffer::Segments(list.to_vec().into())));
}

#[test]
fn partial_list_fetches_the_table_and_checks_it() {
    let full = [seg(0x1000, 512), seg(0x9000, 1024), seg(0x5000, 512)];
    let ind = Indirect {
        table: seg(0x100, 48),
        total_len: 2048,
        inline: &full[..1],
    };
    let c = cmd(DataDesc::None, DataDesc::Indirect(ind), &[]);
    let p = DataPlan::from_cmd(&c, &limits()).expect("valid");
    let Some(fetch) = p.data_in else {
        panic!("data-in planned")
    };
    assert_eq!(fetch.len(), 2048);
    assert!(matches!(fetch, Buffer::FetchTable { .. }));
    let bytes = full.as_bytes();
    assert_eq!(
        fetch.clone().complete_table(bytes),
        Ok(Buffer::Segments(full.to_vec().into()))
    );
    // Short fetch, table disagreeing with the inline prefix, wrong total.
    assert_eq!(
        fetch.clone().complete_table(&bytes[..32]),
        Err(ChannelError::BadTable(
            "fetched length differs from the table length"
        ))
    );
    let mut other = full;
    other[0] = seg(0x2000, 512);
    assert_eq!(
        fetch.clone().complete_table(other.as_bytes()),
        Err(ChannelError::BadTable(
            "disagrees with the inline descriptors"
        ))
    );
    let mut longer = full;
    longer[2] = seg(0x5000, 4096);
    assert_eq!(
        fetch.complete_table(longer.as_bytes()),
        Err(ChannelError::BadTable(
            "descriptor lengths do not sum to the total length"
        ))
    );
    // A non-table buffer passes through.
    let direct = Buffer::Segments(vec![seg(1, 1)].into());
    assert_eq!(direct.clone().complete_table(&[]), Ok(direct));
}

#[test]
fn refusals_name_the_direction_and_limit() {
    let only_direct = DataLimits {
        formats: BufFormats::DIRECT,
        immediate: false,
        ..limits()
    };
    let list = [seg(0x1000, 512)];
    let ind = Indirect {
        table: seg(0x100, 16),
        total_len: 512,
        inline: &list,
    };
    let c = cmd(DataDesc::None, DataDesc::Indirect(ind), &[]);
    let e = DataPlan::from_cmd(&c, &only_direct).expect_err("indirect not negotiated");
    assert_eq!(
        e.to_string(),
        "data-in uses indirect descriptors, which were not negotiated at login"
    );
    let c = cmd(DataDesc::Immediate, DataDesc::None, &[1, 2]);
    assert_eq!(
        DataPlan::from_cmd(&c, &only_direct),
        Err(ChannelError::FormatNotNegotiated {
            direction: "data-out",
            format: "immediate"
        })
    );
    let no_direct = DataLimits {
        formats: BufFormats::INDIRECT,
        ..limits()
    };
    let c = cmd(DataDesc::Direct(seg(0, 8)), DataDesc::None, &[]);
    assert!(matches!(
        DataPlan::from_cmd(&c, &no_direct),
        Err(ChannelError::FormatNotNegotiated {
            format: "direct",
            ..
        })
    ));
    let c = cmd(DataDesc::None, DataDesc::Direct(seg(0, (1 << 20) + 1)), &[]);
    assert_eq!(
        DataPlan::from_cmd(&c, &limits()).map_err(|e| e.to_string()),
        Err("data-in length 1048577 exceeds the maximum transfer of 1048576 bytes".into())
    );
    let big_table = Indirect {
        table: seg(0x100, 65 * 16),
        total_len: 512,
        inline: &list,
    };
    let c = cmd(DataDesc::Indirect(big_table), DataDesc::None, &[]);
    assert_eq!(
        DataPlan::from_cmd(&c, &limits()),
        Err(ChannelError::TableTooLong {
            entries: 65,
            max: 64
        })
    );
}

#[test]
fn ops_split_at_segment_and_size_limits() {
    let segs = [seg(0x1000, 10_000), seg(0x9000, 3000)];
    let ops = rdma_ops(&segs, 13_000, 4096).collect::<Vec<_>>();
    let lens: Vec<u32> = ops.iter().map(|o| o.len).collect();
    assert_eq!(lens, vec![4096, 4096, 1808, 3000]);
    assert_eq!(ops[1].remote_va, 0x1000 + 4096);
    assert_eq!(ops[3].remote_va, 0x9000);
    assert_eq!(ops[3].local_offset, 10_000);
    assert!(ops.iter().all(|o| o.rkey == Rkey(0x44)));
    // Every local byte exactly once, in order.
    let mut at = 0;
    for o in &ops {
        assert_eq!(o.local_offset, at);
        at += u64::from(o.len);
    }
    assert_eq!(at, 13_000);
}

#[test]
fn ops_stop_at_the_shorter_of_data_and_descriptors() {
    let segs = [seg(0x1000, 512), seg(0, 0), seg(0x2000, 512)];
    let short = rdma_ops(&segs, 600, 0).collect::<Vec<_>>();
    assert_eq!(
        short
            .iter()
            .map(|o| (o.remote_va, o.len))
            .collect::<Vec<_>>(),
        vec![(0x1000, 512), (0x2000, 88)]
    );
    let long = rdma_ops(&segs, 5000, 0).collect::<Vec<_>>();
    assert_eq!(long.iter().map(|o| u64::from(o.len)).sum::<u64>(), 1024);
    assert!(rdma_ops(&segs, 0, 0).next().is_none());
}

#[test]
fn residuals() {
    assert_eq!(residual(4096, 4096), Residual::None);
    assert_eq!(residual(96, 36), Residual::Underflow(60));
    assert_eq!(residual(512, 4096), Residual::Overflow(3584));
    assert_eq!(residual(0, 1 << 40), Residual::Overflow(u32::MAX));
}
