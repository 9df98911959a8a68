//! The structures of `types` against rdma-core's own headers: a C program compiled here
//! prints every size and offset the provider relies on, and each must equal Rust's. The
//! headers come from libibverbs-dev and librdmacm-dev (scripts/test.sh installs them); a
//! machine without them fails this test with that instruction rather than pass unchecked.

use super::types::*;
use core::mem::{offset_of, size_of};
use std::process::Command;

/// (C expression, Rust value): sizes and offsets.
fn checks() -> Vec<(&'static str, usize)> {
    vec![
        ("sizeof(union ibv_gid)", size_of::<ibv_gid>()),
        (
            "sizeof(struct ibv_global_route)",
            size_of::<ibv_global_route>(),
        ),
        (
            "offsetof(struct ibv_global_route, flow_label)",
            offset_of!(ibv_global_route, flow_label),
        ),
        (
            "offsetof(struct ibv_global_route, sgid_index)",
            offset_of!(ibv_global_route, sgid_index),
        ),
        (
            "offsetof(struct ibv_global_route, hop_limit)",
            offset_of!(ibv_global_route, hop_limit),
        ),
        (
            "offsetof(struct ibv_global_route, traffic_class)",
            offset_of!(ibv_global_route, traffic_class),
        ),
        ("sizeof(struct ibv_ah_attr)", size_of::<ibv_ah_attr>()),
        (
            "offsetof(struct ibv_ah_attr, dlid)",
            offset_of!(ibv_ah_attr, dlid),
        ),
        (
            "offsetof(struct ibv_ah_attr, is_global)",
            offset_of!(ibv_ah_attr, is_global),
        ),
        (
            "offsetof(struct ibv_ah_attr, port_num)",
            offset_of!(ibv_ah_attr, port_num),
        ),
        ("sizeof(struct ibv_qp_attr)", size_of::<ibv_qp_attr>()),
        (
            "offsetof(struct ibv_qp_attr, path_mtu)",
            offset_of!(ibv_qp_attr, path_mtu),
        ),
        (
            "offsetof(struct ibv_qp_attr, rq_psn)",
            offset_of!(ibv_qp_attr, rq_psn),
        ),
        (
            "offsetof(struct ibv_qp_attr, sq_psn)",
            offset_of!(ibv_qp_attr, sq_psn),
        ),
        (
            "offsetof(struct ibv_qp_attr, dest_qp_num)",
            offset_of!(ibv_qp_attr, dest_qp_num),
        ),
        (
            "offsetof(struct ibv_qp_attr, qp_access_flags)",
            offset_of!(ibv_qp_attr, qp_access_flags),
        ),
        (
            "offsetof(struct ibv_qp_attr, cap)",
            offset_of!(ibv_qp_attr, cap),
        ),
        (
            "offsetof(struct ibv_qp_attr, ah_attr)",
            offset_of!(ibv_qp_attr, ah_attr),
        ),
        (
            "offsetof(struct ibv_qp_attr, pkey_index)",
            offset_of!(ibv_qp_attr, pkey_index),
        ),
        (
            "offsetof(struct ibv_qp_attr, max_rd_atomic)",
            offset_of!(ibv_qp_attr, max_rd_atomic),
        ),
        (
            "offsetof(struct ibv_qp_attr, max_dest_rd_atomic)",
            offset_of!(ibv_qp_attr, max_dest_rd_atomic),
        ),
        (
            "offsetof(struct ibv_qp_attr, min_rnr_timer)",
            offset_of!(ibv_qp_attr, min_rnr_timer),
        ),
        (
            "offsetof(struct ibv_qp_attr, port_num)",
            offset_of!(ibv_qp_attr, port_num),
        ),
        (
            "offsetof(struct ibv_qp_attr, timeout)",
            offset_of!(ibv_qp_attr, timeout),
        ),
        (
            "offsetof(struct ibv_qp_attr, retry_cnt)",
            offset_of!(ibv_qp_attr, retry_cnt),
        ),
        (
            "offsetof(struct ibv_qp_attr, rnr_retry)",
            offset_of!(ibv_qp_attr, rnr_retry),
        ),
        (
            "offsetof(struct ibv_qp_attr, rate_limit)",
            offset_of!(ibv_qp_attr, rate_limit),
        ),
        (
            "sizeof(struct ibv_qp_init_attr)",
            size_of::<ibv_qp_init_attr>(),
        ),
        (
            "offsetof(struct ibv_qp_init_attr, cap)",
            offset_of!(ibv_qp_init_attr, cap),
        ),
        (
            "offsetof(struct ibv_qp_init_attr, qp_type)",
            offset_of!(ibv_qp_init_attr, qp_type),
        ),
        (
            "offsetof(struct ibv_qp_init_attr, sq_sig_all)",
            offset_of!(ibv_qp_init_attr, sq_sig_all),
        ),
        ("sizeof(struct ibv_sge)", size_of::<ibv_sge>()),
        ("sizeof(struct ibv_send_wr)", size_of::<ibv_send_wr>()),
        (
            "offsetof(struct ibv_send_wr, next)",
            offset_of!(ibv_send_wr, next),
        ),
        (
            "offsetof(struct ibv_send_wr, sg_list)",
            offset_of!(ibv_send_wr, sg_list),
        ),
        (
            "offsetof(struct ibv_send_wr, num_sge)",
            offset_of!(ibv_send_wr, num_sge),
        ),
        (
            "offsetof(struct ibv_send_wr, opcode)",
            offset_of!(ibv_send_wr, opcode),
        ),
        (
            "offsetof(struct ibv_send_wr, send_flags)",
            offset_of!(ibv_send_wr, send_flags),
        ),
        (
            "offsetof(struct ibv_send_wr, imm_data)",
            offset_of!(ibv_send_wr, imm_or_inv),
        ),
        (
            "offsetof(struct ibv_send_wr, invalidate_rkey)",
            offset_of!(ibv_send_wr, imm_or_inv),
        ),
        (
            "offsetof(struct ibv_send_wr, wr.rdma.remote_addr)",
            offset_of!(ibv_send_wr, wr) + offset_of!(ibv_rdma_wr, remote_addr),
        ),
        (
            "offsetof(struct ibv_send_wr, wr.rdma.rkey)",
            offset_of!(ibv_send_wr, wr) + offset_of!(ibv_rdma_wr, rkey),
        ),
        (
            "offsetof(struct ibv_send_wr, qp_type)",
            offset_of!(ibv_send_wr, qp_type),
        ),
        (
            "offsetof(struct ibv_send_wr, bind_mw.mw)",
            offset_of!(ibv_send_wr, bind_mw) + offset_of!(ibv_bind_mw_wr, mw),
        ),
        (
            "offsetof(struct ibv_send_wr, bind_mw.rkey)",
            offset_of!(ibv_send_wr, bind_mw) + offset_of!(ibv_bind_mw_wr, rkey),
        ),
        (
            "offsetof(struct ibv_send_wr, bind_mw.bind_info.mr)",
            offset_of!(ibv_send_wr, bind_mw)
                + offset_of!(ibv_bind_mw_wr, bind_info)
                + offset_of!(ibv_mw_bind_info, mr),
        ),
        (
            "offsetof(struct ibv_send_wr, bind_mw.bind_info.addr)",
            offset_of!(ibv_send_wr, bind_mw)
                + offset_of!(ibv_bind_mw_wr, bind_info)
                + offset_of!(ibv_mw_bind_info, addr),
        ),
        (
            "offsetof(struct ibv_send_wr, bind_mw.bind_info.length)",
            offset_of!(ibv_send_wr, bind_mw)
                + offset_of!(ibv_bind_mw_wr, bind_info)
                + offset_of!(ibv_mw_bind_info, length),
        ),
        (
            "offsetof(struct ibv_send_wr, bind_mw.bind_info.mw_access_flags)",
            offset_of!(ibv_send_wr, bind_mw)
                + offset_of!(ibv_bind_mw_wr, bind_info)
                + offset_of!(ibv_mw_bind_info, mw_access_flags),
        ),
        ("sizeof(struct ibv_recv_wr)", size_of::<ibv_recv_wr>()),
        (
            "offsetof(struct ibv_recv_wr, num_sge)",
            offset_of!(ibv_recv_wr, num_sge),
        ),
        ("sizeof(struct ibv_wc)", size_of::<ibv_wc>()),
        (
            "offsetof(struct ibv_wc, status)",
            offset_of!(ibv_wc, status),
        ),
        (
            "offsetof(struct ibv_wc, opcode)",
            offset_of!(ibv_wc, opcode),
        ),
        (
            "offsetof(struct ibv_wc, byte_len)",
            offset_of!(ibv_wc, byte_len),
        ),
        (
            "offsetof(struct ibv_wc, imm_data)",
            offset_of!(ibv_wc, imm_or_inv),
        ),
        (
            "offsetof(struct ibv_wc, invalidated_rkey)",
            offset_of!(ibv_wc, imm_or_inv),
        ),
        (
            "offsetof(struct ibv_wc, qp_num)",
            offset_of!(ibv_wc, qp_num),
        ),
        (
            "offsetof(struct ibv_wc, src_qp)",
            offset_of!(ibv_wc, src_qp),
        ),
        (
            "offsetof(struct ibv_wc, wc_flags)",
            offset_of!(ibv_wc, wc_flags),
        ),
        (
            "offsetof(struct ibv_wc, pkey_index)",
            offset_of!(ibv_wc, pkey_index),
        ),
        ("sizeof(struct ibv_port_attr)", size_of::<ibv_port_attr>()),
        (
            "offsetof(struct ibv_port_attr, active_mtu)",
            offset_of!(ibv_port_attr, active_mtu),
        ),
        (
            "offsetof(struct ibv_port_attr, gid_tbl_len)",
            offset_of!(ibv_port_attr, gid_tbl_len),
        ),
        (
            "offsetof(struct ibv_port_attr, link_layer)",
            offset_of!(ibv_port_attr, link_layer),
        ),
        (
            "sizeof(struct ibv_device_attr)",
            size_of::<ibv_device_attr>(),
        ),
        (
            "offsetof(struct ibv_device_attr, node_guid)",
            offset_of!(ibv_device_attr, node_guid),
        ),
        (
            "offsetof(struct ibv_device_attr, device_cap_flags)",
            offset_of!(ibv_device_attr, device_cap_flags),
        ),
        (
            "offsetof(struct ibv_device_attr, max_qp_rd_atom)",
            offset_of!(ibv_device_attr, max_qp_rd_atom),
        ),
        (
            "offsetof(struct ibv_device_attr, max_qp_init_rd_atom)",
            offset_of!(ibv_device_attr, max_qp_init_rd_atom),
        ),
        (
            "offsetof(struct ibv_device_attr, max_mw)",
            offset_of!(ibv_device_attr, max_mw),
        ),
        (
            "offsetof(struct ibv_device_attr, phys_port_cnt)",
            offset_of!(ibv_device_attr, phys_port_cnt),
        ),
        ("sizeof(struct ibv_gid_entry)", size_of::<ibv_gid_entry>()),
        (
            "offsetof(struct ibv_gid_entry, gid_type)",
            offset_of!(ibv_gid_entry, gid_type),
        ),
        ("sizeof(struct ibv_context)", size_of::<ibv_context>()),
        (
            "offsetof(struct ibv_context, ops.alloc_mw)",
            offset_of!(ibv_context, ops) + offset_of!(ibv_context_ops, alloc_mw),
        ),
        (
            "offsetof(struct ibv_context, ops.dealloc_mw)",
            offset_of!(ibv_context, ops) + offset_of!(ibv_context_ops, dealloc_mw),
        ),
        (
            "offsetof(struct ibv_context, ops.poll_cq)",
            offset_of!(ibv_context, ops) + offset_of!(ibv_context_ops, poll_cq),
        ),
        (
            "offsetof(struct ibv_context, ops.req_notify_cq)",
            offset_of!(ibv_context, ops) + offset_of!(ibv_context_ops, req_notify_cq),
        ),
        (
            "offsetof(struct ibv_context, ops.post_srq_recv)",
            offset_of!(ibv_context, ops) + offset_of!(ibv_context_ops, post_srq_recv),
        ),
        (
            "offsetof(struct ibv_context, ops.post_send)",
            offset_of!(ibv_context, ops) + offset_of!(ibv_context_ops, post_send),
        ),
        (
            "offsetof(struct ibv_context, ops.post_recv)",
            offset_of!(ibv_context, ops) + offset_of!(ibv_context_ops, post_recv),
        ),
        (
            "offsetof(struct ibv_context, async_fd)",
            offset_of!(ibv_context, async_fd),
        ),
        ("sizeof(struct ibv_device)", size_of::<ibv_device>()),
        (
            "offsetof(struct ibv_device, name)",
            offset_of!(ibv_device, name),
        ),
        ("sizeof(struct ibv_mr)", size_of::<ibv_mr>()),
        ("offsetof(struct ibv_mr, lkey)", offset_of!(ibv_mr, lkey)),
        ("offsetof(struct ibv_mr, rkey)", offset_of!(ibv_mr, rkey)),
        ("sizeof(struct ibv_mw)", size_of::<ibv_mw>()),
        ("offsetof(struct ibv_mw, rkey)", offset_of!(ibv_mw, rkey)),
        ("sizeof(struct ibv_cq)", size_of::<ibv_cq>()),
        (
            "offsetof(struct ibv_cq, cq_context)",
            offset_of!(ibv_cq, cq_context),
        ),
        ("sizeof(struct ibv_qp)", size_of::<ibv_qp>()),
        (
            "offsetof(struct ibv_qp, qp_num)",
            offset_of!(ibv_qp, qp_num),
        ),
        ("offsetof(struct ibv_qp, state)", offset_of!(ibv_qp, state)),
        (
            "sizeof(struct ibv_comp_channel)",
            size_of::<ibv_comp_channel>(),
        ),
        (
            "offsetof(struct ibv_comp_channel, fd)",
            offset_of!(ibv_comp_channel, fd),
        ),
        (
            "sizeof(struct ibv_async_event)",
            size_of::<ibv_async_event>(),
        ),
        (
            "offsetof(struct ibv_async_event, event_type)",
            offset_of!(ibv_async_event, event_type),
        ),
        (
            "sizeof(struct rdma_event_channel)",
            size_of::<rdma_event_channel>(),
        ),
        ("sizeof(struct rdma_cm_id)", size_of::<rdma_cm_id>()),
        (
            "offsetof(struct rdma_cm_id, qp)",
            offset_of!(rdma_cm_id, qp),
        ),
        (
            "offsetof(struct rdma_cm_id, route.addr.src_addr)",
            offset_of!(rdma_cm_id, src_addr),
        ),
        (
            "offsetof(struct rdma_cm_id, route.addr.dst_addr)",
            offset_of!(rdma_cm_id, dst_addr),
        ),
        (
            "offsetof(struct rdma_cm_id, route.addr.addr.ibaddr.sgid)",
            offset_of!(rdma_cm_id, sgid),
        ),
        (
            "offsetof(struct rdma_cm_id, route.addr.addr.ibaddr.dgid)",
            offset_of!(rdma_cm_id, dgid),
        ),
        (
            "offsetof(struct rdma_cm_id, route.addr.addr.ibaddr.pkey)",
            offset_of!(rdma_cm_id, pkey),
        ),
        (
            "offsetof(struct rdma_cm_id, ps)",
            offset_of!(rdma_cm_id, ps),
        ),
        (
            "offsetof(struct rdma_cm_id, port_num)",
            offset_of!(rdma_cm_id, port_num),
        ),
        (
            "sizeof(struct rdma_conn_param)",
            size_of::<rdma_conn_param>(),
        ),
        (
            "offsetof(struct rdma_conn_param, private_data_len)",
            offset_of!(rdma_conn_param, private_data_len),
        ),
        (
            "offsetof(struct rdma_conn_param, rnr_retry_count)",
            offset_of!(rdma_conn_param, rnr_retry_count),
        ),
        (
            "offsetof(struct rdma_conn_param, qp_num)",
            offset_of!(rdma_conn_param, qp_num),
        ),
        ("sizeof(struct rdma_cm_event)", size_of::<rdma_cm_event>()),
        (
            "offsetof(struct rdma_cm_event, event)",
            offset_of!(rdma_cm_event, event),
        ),
        (
            "offsetof(struct rdma_cm_event, status)",
            offset_of!(rdma_cm_event, status),
        ),
        (
            "offsetof(struct rdma_cm_event, param.conn)",
            offset_of!(rdma_cm_event, param),
        ),
        (
            "sizeof(struct sockaddr_storage)",
            size_of::<sockaddr_storage>(),
        ),
        // Constants.
        ("IBV_WR_BIND_MW", IBV_WR_BIND_MW as usize),
        ("IBV_WR_SEND_WITH_INV", IBV_WR_SEND_WITH_INV as usize),
        ("IBV_WR_LOCAL_INV", IBV_WR_LOCAL_INV as usize),
        ("IBV_WC_WITH_INV", IBV_WC_WITH_INV as usize),
        ("IBV_WC_SUCCESS", IBV_WC_SUCCESS as usize),
        ("IBV_WC_IP_CSUM_OK", IBV_WC_IP_CSUM_OK as usize),
        ("IBV_QP_DEST_QPN", IBV_QP_DEST_QPN as usize),
        (
            "IBV_QP_MAX_DEST_RD_ATOMIC",
            IBV_QP_MAX_DEST_RD_ATOMIC as usize,
        ),
        ("IBV_ACCESS_MW_BIND", IBV_ACCESS_MW_BIND as usize),
        (
            "IBV_DEVICE_MEM_WINDOW_TYPE_2B",
            IBV_DEVICE_MEM_WINDOW_TYPE_2B as usize,
        ),
        ("IBV_EVENT_DEVICE_FATAL", IBV_EVENT_DEVICE_FATAL as usize),
        ("RDMA_PS_TCP", RDMA_PS_TCP as usize),
        (
            "RDMA_CM_EVENT_TIMEWAIT_EXIT",
            RDMA_CM_EVENT_TIMEWAIT_EXIT as usize,
        ),
        ("IBV_GID_TYPE_ROCE_V2", IBV_GID_TYPE_ROCE_V2 as usize),
    ]
}

#[test]
fn every_size_offset_and_constant_matches_rdma_cores_headers() {
    let header = std::path::Path::new("/usr/include/infiniband/verbs.h");
    let cm = std::path::Path::new("/usr/include/rdma/rdma_cma.h");
    assert!(
        header.exists() && cm.exists(),
        "rdma-core's headers are missing: apt-get install libibverbs-dev librdmacm-dev \
         (scripts/test.sh installs them); this test checks the provider's structures \
         against them"
    );
    let checks = checks();
    let mut c = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include <infiniband/verbs.h>\n\
         #include <rdma/rdma_cma.h>\nint main(void) {\n",
    );
    for (i, (expr, _)) in checks.iter().enumerate() {
        c.push_str(&format!("printf(\"{i} %zu\\n\", (size_t)({expr}));\n"));
    }
    c.push_str("return 0;\n}\n");
    let dir = std::env::temp_dir().join(format!("rdma-abi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch directory");
    let src = dir.join("abi.c");
    let bin = dir.join("abi");
    std::fs::write(&src, c).expect("write the C program");
    let cc = Command::new("cc")
        .arg("-o")
        .arg(&bin)
        .arg(&src)
        .output()
        .expect("a C compiler (cc)");
    assert!(
        cc.status.success(),
        "the C program did not compile: {}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let out = Command::new(&bin).output().expect("run the C program");
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8_lossy(&out.stdout);
    let mut bad = Vec::new();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let (Some(i), Some(v)) = (it.next(), it.next()) else {
            continue;
        };
        let (i, v): (usize, usize) = (i.parse().expect("index"), v.parse().expect("value"));
        let (expr, ours) = checks[i];
        if v != ours {
            bad.push(format!("{expr}: C {v}, Rust {ours}"));
        }
    }
    assert_eq!(text.lines().count(), checks.len(), "{text}");
    assert!(
        bad.is_empty(),
        "layout differs from the headers:\n{}",
        bad.join("\n")
    );
}
