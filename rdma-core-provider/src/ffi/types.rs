//! The C structures and constants of libibverbs and librdmacm this provider touches, laid
//! out as rdma-core's public headers lay them out on x86_64 and aarch64 (LP64). Their ABI
//! is stable (the libraries version their symbols; the structures only grow at the end);
//! `src/ffi/layout_tests.rs` compiles a C program against the installed headers and compares
//! every size and offset here with it.
//!
//! Only what is read or written is spelled out; what the libraries own behind a pointer is
//! opaque (`_private` padding keeps the sizes right where we embed a structure).

// A transcription of the headers: every constant the provider may need is listed with the
// header's value (the unused ones document the numbering around the used ones).
#![allow(non_camel_case_types, missing_docs, unreachable_pub, dead_code)]

use core::ffi::{c_int, c_void};

/// `union ibv_gid`: 16 bytes, 8-byte aligned (it holds two `__be64`).
#[repr(C, align(8))]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct ibv_gid {
    pub raw: [u8; 16],
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct ibv_global_route {
    pub dgid: ibv_gid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct ibv_ah_attr {
    pub grh: ibv_global_route,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct ibv_qp_cap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct ibv_qp_attr {
    pub qp_state: u32,
    pub cur_qp_state: u32,
    pub path_mtu: u32,
    pub path_mig_state: u32,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: u32,
    pub cap: ibv_qp_cap,
    pub ah_attr: ibv_ah_attr,
    pub alt_ah_attr: ibv_ah_attr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_qp_init_attr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut c_void,
    pub cap: ibv_qp_cap,
    pub qp_type: u32,
    pub sq_sig_all: c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct ibv_sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_rdma_wr {
    pub remote_addr: u64,
    pub rkey: u32,
    pub _pad: [u8; 20],
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_mw_bind_info {
    pub mr: *mut ibv_mr,
    pub addr: u64,
    pub length: u64,
    pub mw_access_flags: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_bind_mw_wr {
    pub mw: *mut ibv_mw,
    pub rkey: u32,
    pub bind_info: ibv_mw_bind_info,
}

/// `struct ibv_send_wr`: 128 bytes. `wr` is the 32-byte union of rdma/atomic/ud (only
/// rdma used here); `imm_or_inv` the `imm_data`/`invalidate_rkey` union; `bind_mw` the
/// 48-byte union with `tso`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_send_wr {
    pub wr_id: u64,
    pub next: *mut ibv_send_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
    pub opcode: u32,
    pub send_flags: u32,
    /// `imm_data` (big-endian on the wire: `htonl`) or `invalidate_rkey`.
    pub imm_or_inv: u32,
    pub wr: ibv_rdma_wr,
    pub qp_type: u32,
    pub _pad: u32,
    pub bind_mw: ibv_bind_mw_wr,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_recv_wr {
    pub wr_id: u64,
    pub next: *mut ibv_recv_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct ibv_wc {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// `imm_data` or `invalidated_rkey`.
    pub imm_or_inv: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: u32,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_port_attr {
    pub state: u32,
    pub max_mtu: u32,
    pub active_mtu: u32,
    pub gid_tbl_len: c_int,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: u8,
    pub flags: u8,
    pub port_cap_flags2: u16,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_device_attr {
    pub fw_ver: [u8; 64],
    pub node_guid: u64,
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: c_int,
    pub max_qp_wr: c_int,
    pub device_cap_flags: u32,
    pub max_sge: c_int,
    pub max_sge_rd: c_int,
    pub max_cq: c_int,
    pub max_cqe: c_int,
    pub max_mr: c_int,
    pub max_pd: c_int,
    pub max_qp_rd_atom: c_int,
    pub max_ee_rd_atom: c_int,
    pub max_res_rd_atom: c_int,
    pub max_qp_init_rd_atom: c_int,
    pub max_ee_init_rd_atom: c_int,
    pub atomic_cap: u32,
    pub max_ee: c_int,
    pub max_rdd: c_int,
    pub max_mw: c_int,
    pub max_raw_ipv6_qp: c_int,
    pub max_raw_ethy_qp: c_int,
    pub max_mcast_grp: c_int,
    pub max_mcast_qp_attach: c_int,
    pub max_total_mcast_qp_attach: c_int,
    pub max_ah: c_int,
    pub max_fmr: c_int,
    pub max_map_per_fmr: c_int,
    pub max_srq: c_int,
    pub max_srq_wr: c_int,
    pub max_srq_sge: c_int,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}

/// `struct ibv_gid_entry` (for `_ibv_query_gid_ex`).
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct ibv_gid_entry {
    pub gid: ibv_gid,
    pub gid_index: u32,
    pub port_num: u32,
    pub gid_type: u32,
    pub ndev_ifindex: u32,
}

/// The data-path entries of `struct ibv_context_ops` (the verbs rdma-core inlines): the
/// table starts at offset 8 of `struct ibv_context`.
#[repr(C)]
pub struct ibv_context_ops {
    pub _compat: [*mut c_void; 7],
    pub alloc_mw: Option<unsafe extern "C" fn(*mut ibv_pd, u32) -> *mut ibv_mw>,
    pub bind_mw: *mut c_void,
    pub dealloc_mw: Option<unsafe extern "C" fn(*mut ibv_mw) -> c_int>,
    pub _compat_create_cq: *mut c_void,
    pub poll_cq: Option<unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int>,
    pub req_notify_cq: Option<unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int>,
    pub _compat_2: [*mut c_void; 7],
    pub post_srq_recv:
        Option<unsafe extern "C" fn(*mut c_void, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int>,
    pub _compat_3: [*mut c_void; 4],
    pub post_send:
        Option<unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int>,
    pub post_recv:
        Option<unsafe extern "C" fn(*mut ibv_qp, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int>,
    pub _compat_4: [*mut c_void; 5],
}

/// `struct ibv_context`: the device, the ops table, the command and async fds.
#[repr(C)]
pub struct ibv_context {
    pub device: *mut ibv_device,
    pub ops: ibv_context_ops,
    pub cmd_fd: c_int,
    pub async_fd: c_int,
    pub num_comp_vectors: c_int,
    pub _private: [u8; 52],
}

/// `struct ibv_device`: only the names are read.
#[repr(C)]
pub struct ibv_device {
    pub _ops: [*mut c_void; 2],
    pub node_type: c_int,
    pub transport_type: c_int,
    pub name: [u8; 64],
    pub dev_name: [u8; 64],
    pub dev_path: [u8; 256],
    pub ibdev_path: [u8; 256],
}

#[repr(C)]
pub struct ibv_pd {
    pub context: *mut ibv_context,
    pub handle: u32,
}

#[repr(C)]
pub struct ibv_mr {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

#[repr(C)]
pub struct ibv_mw {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub rkey: u32,
    pub handle: u32,
    pub mw_type: u32,
}

#[repr(C)]
pub struct ibv_cq {
    pub context: *mut ibv_context,
    pub channel: *mut ibv_comp_channel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub _private: [u8; 96],
}

#[repr(C)]
pub struct ibv_qp {
    pub context: *mut ibv_context,
    pub qp_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut c_void,
    pub handle: u32,
    pub qp_num: u32,
    pub state: u32,
    pub qp_type: u32,
    pub _private: [u8; 96],
}

#[repr(C)]
pub struct ibv_comp_channel {
    pub context: *mut ibv_context,
    pub fd: c_int,
    pub refcnt: c_int,
}

/// `struct ibv_async_event`: `element` is a union of cq, qp, srq, wq pointers and a port
/// number.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_async_event {
    pub element: *mut c_void,
    pub event_type: u32,
}

/// `struct rdma_event_channel`.
#[repr(C)]
pub struct rdma_event_channel {
    pub fd: c_int,
}

/// `struct rdma_cm_id`: what is read of it. `route.addr.src_addr` at 32 and `dst_addr` at
/// 160 (each a `sockaddr_storage`), the route's GIDs and P_Key at 288.
#[repr(C)]
pub struct rdma_cm_id {
    pub verbs: *mut ibv_context,
    pub channel: *mut rdma_event_channel,
    pub context: *mut c_void,
    pub qp: *mut ibv_qp,
    pub src_addr: sockaddr_storage,
    pub dst_addr: sockaddr_storage,
    pub sgid: ibv_gid,
    pub dgid: ibv_gid,
    pub pkey: u16,
    pub _route_tail: [u8; 22],
    pub ps: u32,
    pub port_num: u8,
    pub _private: [u8; 67],
}

/// `struct sockaddr_storage`.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub struct sockaddr_storage {
    pub family: u16,
    pub data: [u8; 126],
}

/// `struct rdma_conn_param`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rdma_conn_param {
    pub private_data: *const c_void,
    pub private_data_len: u8,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub flow_control: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    pub srq: u8,
    pub qp_num: u32,
}

/// `struct rdma_cm_event`: `param` is the connection parameters (the UD ones are not used).
#[repr(C)]
pub struct rdma_cm_event {
    pub id: *mut rdma_cm_id,
    pub listen_id: *mut rdma_cm_id,
    pub event: u32,
    pub status: c_int,
    pub param: rdma_conn_param,
    pub _ud_tail: [u8; 32],
}

// --- constants (rdma-core 44 headers) -------------------------------------------------

pub const IBV_WR_RDMA_WRITE: u32 = 0;
pub const IBV_WR_RDMA_WRITE_WITH_IMM: u32 = 1;
pub const IBV_WR_SEND: u32 = 2;
pub const IBV_WR_SEND_WITH_IMM: u32 = 3;
pub const IBV_WR_RDMA_READ: u32 = 4;
pub const IBV_WR_LOCAL_INV: u32 = 7;
pub const IBV_WR_BIND_MW: u32 = 8;
pub const IBV_WR_SEND_WITH_INV: u32 = 9;

pub const IBV_SEND_FENCE: u32 = 1;
pub const IBV_SEND_SIGNALED: u32 = 2;
pub const IBV_SEND_SOLICITED: u32 = 4;

/// `enum ibv_wc_status`: success.
pub const IBV_WC_SUCCESS: u32 = 0;
pub const IBV_WC_SEND: u32 = 0;
pub const IBV_WC_RDMA_WRITE: u32 = 1;
pub const IBV_WC_RDMA_READ: u32 = 2;
pub const IBV_WC_BIND_MW: u32 = 5;
pub const IBV_WC_LOCAL_INV: u32 = 6;
pub const IBV_WC_RECV: u32 = 128;
pub const IBV_WC_RECV_RDMA_WITH_IMM: u32 = 129;

pub const IBV_WC_WITH_IMM: u32 = 2;
/// `IBV_WC_IP_CSUM_OK` in user space — and what rxe sets for a remote invalidation (its
/// CQEs are a copy of the kernel's, where `IB_WC_WITH_INVALIDATE` is `1 << 2`).
pub const IBV_WC_IP_CSUM_OK: u32 = 4;
pub const IBV_WC_WITH_INV: u32 = 8;

pub const IBV_QPS_RESET: u32 = 0;
pub const IBV_QPS_INIT: u32 = 1;
pub const IBV_QPS_RTR: u32 = 2;
pub const IBV_QPS_RTS: u32 = 3;
pub const IBV_QPS_SQD: u32 = 4;
pub const IBV_QPS_SQE: u32 = 5;
pub const IBV_QPS_ERR: u32 = 6;

pub const IBV_QPT_RC: u32 = 2;
pub const IBV_QPT_UD: u32 = 4;

pub const IBV_QP_STATE: c_int = 1;
pub const IBV_QP_ACCESS_FLAGS: c_int = 0x8;
pub const IBV_QP_PKEY_INDEX: c_int = 0x10;
pub const IBV_QP_PORT: c_int = 0x20;
pub const IBV_QP_QKEY: c_int = 0x40;
pub const IBV_QP_AV: c_int = 0x80;
pub const IBV_QP_PATH_MTU: c_int = 0x100;
pub const IBV_QP_TIMEOUT: c_int = 0x200;
pub const IBV_QP_RETRY_CNT: c_int = 0x400;
pub const IBV_QP_RNR_RETRY: c_int = 0x800;
pub const IBV_QP_RQ_PSN: c_int = 0x1000;
pub const IBV_QP_MAX_QP_RD_ATOMIC: c_int = 0x2000;
pub const IBV_QP_MIN_RNR_TIMER: c_int = 0x8000;
pub const IBV_QP_SQ_PSN: c_int = 0x10000;
pub const IBV_QP_MAX_DEST_RD_ATOMIC: c_int = 0x20000;
pub const IBV_QP_DEST_QPN: c_int = 0x100000;

pub const IBV_ACCESS_LOCAL_WRITE: u32 = 1;
pub const IBV_ACCESS_REMOTE_WRITE: u32 = 2;
pub const IBV_ACCESS_REMOTE_READ: u32 = 4;
pub const IBV_ACCESS_REMOTE_ATOMIC: u32 = 8;
pub const IBV_ACCESS_MW_BIND: u32 = 0x10;

pub const IBV_MW_TYPE_2: u32 = 2;

pub const IBV_DEVICE_MEM_WINDOW: u32 = 0x20000;
pub const IBV_DEVICE_MEM_MGT_EXTENSIONS: u32 = 0x200000;
pub const IBV_DEVICE_MEM_WINDOW_TYPE_2A: u32 = 0x800000;
pub const IBV_DEVICE_MEM_WINDOW_TYPE_2B: u32 = 0x1000000;

pub const IBV_PORT_ACTIVE: u32 = 4;

pub const IBV_LINK_LAYER_INFINIBAND: u8 = 1;
pub const IBV_LINK_LAYER_ETHERNET: u8 = 2;

pub const IBV_GID_TYPE_IB: u32 = 0;
pub const IBV_GID_TYPE_ROCE_V1: u32 = 1;
pub const IBV_GID_TYPE_ROCE_V2: u32 = 2;

pub const IBV_EVENT_CQ_ERR: u32 = 0;
pub const IBV_EVENT_QP_FATAL: u32 = 1;
pub const IBV_EVENT_QP_REQ_ERR: u32 = 2;
pub const IBV_EVENT_QP_ACCESS_ERR: u32 = 3;
pub const IBV_EVENT_COMM_EST: u32 = 4;
pub const IBV_EVENT_SQ_DRAINED: u32 = 5;
pub const IBV_EVENT_PATH_MIG: u32 = 6;
pub const IBV_EVENT_PATH_MIG_ERR: u32 = 7;
pub const IBV_EVENT_DEVICE_FATAL: u32 = 8;
pub const IBV_EVENT_PORT_ACTIVE: u32 = 9;
pub const IBV_EVENT_PORT_ERR: u32 = 10;
pub const IBV_EVENT_LID_CHANGE: u32 = 11;
pub const IBV_EVENT_PKEY_CHANGE: u32 = 12;
pub const IBV_EVENT_SM_CHANGE: u32 = 13;
pub const IBV_EVENT_SRQ_ERR: u32 = 14;
pub const IBV_EVENT_SRQ_LIMIT_REACHED: u32 = 15;
pub const IBV_EVENT_QP_LAST_WQE_REACHED: u32 = 16;
pub const IBV_EVENT_CLIENT_REREGISTER: u32 = 17;
pub const IBV_EVENT_GID_CHANGE: u32 = 18;
pub const IBV_EVENT_WQ_FATAL: u32 = 19;

pub const RDMA_PS_TCP: u32 = 0x0106;

pub const RDMA_CM_EVENT_ADDR_RESOLVED: u32 = 0;
pub const RDMA_CM_EVENT_ADDR_ERROR: u32 = 1;
pub const RDMA_CM_EVENT_ROUTE_RESOLVED: u32 = 2;
pub const RDMA_CM_EVENT_ROUTE_ERROR: u32 = 3;
pub const RDMA_CM_EVENT_CONNECT_REQUEST: u32 = 4;
pub const RDMA_CM_EVENT_CONNECT_RESPONSE: u32 = 5;
pub const RDMA_CM_EVENT_CONNECT_ERROR: u32 = 6;
pub const RDMA_CM_EVENT_UNREACHABLE: u32 = 7;
pub const RDMA_CM_EVENT_REJECTED: u32 = 8;
pub const RDMA_CM_EVENT_ESTABLISHED: u32 = 9;
pub const RDMA_CM_EVENT_DISCONNECTED: u32 = 10;
pub const RDMA_CM_EVENT_DEVICE_REMOVAL: u32 = 11;
pub const RDMA_CM_EVENT_MULTICAST_JOIN: u32 = 12;
pub const RDMA_CM_EVENT_MULTICAST_ERROR: u32 = 13;
pub const RDMA_CM_EVENT_ADDR_CHANGE: u32 = 14;
pub const RDMA_CM_EVENT_TIMEWAIT_EXIT: u32 = 15;
