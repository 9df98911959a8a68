//! Loading libibverbs and librdmacm at run time (`dlopen`, versioned `dlvsym`): a machine
//! without rdma-core runs every other provider and is told what to install when it asks
//! for this one.

use super::types::*;
use core::ffi::{CStr, c_char, c_int, c_void};
use std::sync::OnceLock;

/// The shared objects and the package that ships them (Debian names).
const IBVERBS: &CStr = c"libibverbs.so.1";
const RDMACM: &CStr = c"librdmacm.so.1";
const INSTALL: &str = "install rdma-core's user-space libraries and providers \
     (Debian/Ubuntu: apt install libibverbs1 librdmacm1 ibverbs-providers)";

/// Why the libraries could not be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct LoadError(pub(crate) String);

macro_rules! library {
    ($($lib:ident $name:ident @ $ver:literal : fn($($arg:ty),*) -> $ret:ty;)*) => {
        /// The entry points this provider calls.
        #[allow(non_snake_case)]
        pub(crate) struct Lib {
            $(pub(crate) $name: unsafe extern "C" fn($($arg),*) -> $ret,)*
            /// `_ibv_query_gid_ex` (rdma-core 33 and later): the GID type of an entry.
            pub(crate) query_gid_ex: Option<
                unsafe extern "C" fn(*mut ibv_context, u32, u32, *mut ibv_gid_entry, u32, usize) -> c_int,
            >,
        }

        impl Lib {
            fn load() -> Result<Lib, LoadError> {
                let ibv = open(IBVERBS)?;
                let cm = open(RDMACM)?;
                let handle = |which: &str| if which == "ibv" { ibv } else { cm };
                $(
                    let $name = {
                        let p = sym(handle(stringify!($lib)), concat!(stringify!($name), "\0"), $ver)?;
                        // SAFETY: `p` is the address of the C function of that name and
                        // version, whose prototype (rdma-core 44's headers, checked by
                        // src/ffi/layout_tests.rs) is the type it is transmuted to; a function
                        // pointer and a data pointer have the same size on the platforms
                        // rdma-core runs on (POSIX requires it for dlsym).
                        unsafe { core::mem::transmute::<*mut c_void, unsafe extern "C" fn($($arg),*) -> $ret>(p) }
                    };
                )*
                let query_gid_ex = sym(ibv, "_ibv_query_gid_ex\0", "IBVERBS_1.11")
                    .ok()
                    .map(|p| {
                        // SAFETY: as above, the prototype of `_ibv_query_gid_ex`
                        // (libibverbs/verbs.h, rdma-core 44).
                        unsafe {
                            core::mem::transmute::<
                                *mut c_void,
                                unsafe extern "C" fn(*mut ibv_context, u32, u32, *mut ibv_gid_entry, u32, usize) -> c_int,
                            >(p)
                        }
                    });
                Ok(Lib { $($name,)* query_gid_ex })
            }
        }
    };
}

library! {
    ibv ibv_get_device_list @ "IBVERBS_1.1": fn(*mut c_int) -> *mut *mut ibv_device;
    ibv ibv_free_device_list @ "IBVERBS_1.1": fn(*mut *mut ibv_device) -> ();
    ibv ibv_open_device @ "IBVERBS_1.1": fn(*mut ibv_device) -> *mut ibv_context;
    ibv ibv_close_device @ "IBVERBS_1.1": fn(*mut ibv_context) -> c_int;
    ibv ibv_query_device @ "IBVERBS_1.1": fn(*mut ibv_context, *mut ibv_device_attr) -> c_int;
    ibv ibv_query_port @ "IBVERBS_1.1": fn(*mut ibv_context, u8, *mut ibv_port_attr) -> c_int;
    ibv ibv_query_gid @ "IBVERBS_1.1": fn(*mut ibv_context, u8, c_int, *mut ibv_gid) -> c_int;
    ibv ibv_query_pkey @ "IBVERBS_1.1": fn(*mut ibv_context, u8, c_int, *mut u16) -> c_int;
    ibv ibv_alloc_pd @ "IBVERBS_1.1": fn(*mut ibv_context) -> *mut ibv_pd;
    ibv ibv_dealloc_pd @ "IBVERBS_1.1": fn(*mut ibv_pd) -> c_int;
    ibv ibv_reg_mr_iova @ "IBVERBS_1.7": fn(*mut ibv_pd, *mut c_void, usize, u64, c_int) -> *mut ibv_mr;
    ibv ibv_dereg_mr @ "IBVERBS_1.1": fn(*mut ibv_mr) -> c_int;
    ibv ibv_create_comp_channel @ "IBVERBS_1.0": fn(*mut ibv_context) -> *mut ibv_comp_channel;
    ibv ibv_destroy_comp_channel @ "IBVERBS_1.0": fn(*mut ibv_comp_channel) -> c_int;
    ibv ibv_create_cq @ "IBVERBS_1.1": fn(*mut ibv_context, c_int, *mut c_void, *mut ibv_comp_channel, c_int) -> *mut ibv_cq;
    ibv ibv_destroy_cq @ "IBVERBS_1.1": fn(*mut ibv_cq) -> c_int;
    ibv ibv_get_cq_event @ "IBVERBS_1.1": fn(*mut ibv_comp_channel, *mut *mut ibv_cq, *mut *mut c_void) -> c_int;
    ibv ibv_ack_cq_events @ "IBVERBS_1.1": fn(*mut ibv_cq, u32) -> ();
    ibv ibv_create_qp @ "IBVERBS_1.1": fn(*mut ibv_pd, *mut ibv_qp_init_attr) -> *mut ibv_qp;
    ibv ibv_modify_qp @ "IBVERBS_1.1": fn(*mut ibv_qp, *mut ibv_qp_attr, c_int) -> c_int;
    ibv ibv_destroy_qp @ "IBVERBS_1.1": fn(*mut ibv_qp) -> c_int;
    ibv ibv_get_async_event @ "IBVERBS_1.1": fn(*mut ibv_context, *mut ibv_async_event) -> c_int;
    ibv ibv_ack_async_event @ "IBVERBS_1.1": fn(*mut ibv_async_event) -> ();
    cm rdma_create_event_channel @ "RDMACM_1.0": fn() -> *mut rdma_event_channel;
    cm rdma_destroy_event_channel @ "RDMACM_1.0": fn(*mut rdma_event_channel) -> ();
    cm rdma_create_id @ "RDMACM_1.0": fn(*mut rdma_event_channel, *mut *mut rdma_cm_id, *mut c_void, u32) -> c_int;
    cm rdma_destroy_id @ "RDMACM_1.0": fn(*mut rdma_cm_id) -> c_int;
    cm rdma_bind_addr @ "RDMACM_1.0": fn(*mut rdma_cm_id, *mut sockaddr_storage) -> c_int;
    cm rdma_listen @ "RDMACM_1.0": fn(*mut rdma_cm_id, c_int) -> c_int;
    cm rdma_resolve_addr @ "RDMACM_1.0": fn(*mut rdma_cm_id, *mut sockaddr_storage, *mut sockaddr_storage, c_int) -> c_int;
    cm rdma_resolve_route @ "RDMACM_1.0": fn(*mut rdma_cm_id, c_int) -> c_int;
    cm rdma_connect @ "RDMACM_1.0": fn(*mut rdma_cm_id, *mut rdma_conn_param) -> c_int;
    cm rdma_accept @ "RDMACM_1.0": fn(*mut rdma_cm_id, *mut rdma_conn_param) -> c_int;
    cm rdma_reject @ "RDMACM_1.0": fn(*mut rdma_cm_id, *const c_void, u8) -> c_int;
    cm rdma_establish @ "RDMACM_1.2": fn(*mut rdma_cm_id) -> c_int;
    cm rdma_disconnect @ "RDMACM_1.0": fn(*mut rdma_cm_id) -> c_int;
    cm rdma_get_cm_event @ "RDMACM_1.0": fn(*mut rdma_event_channel, *mut *mut rdma_cm_event) -> c_int;
    cm rdma_ack_cm_event @ "RDMACM_1.0": fn(*mut rdma_cm_event) -> c_int;
    cm rdma_init_qp_attr @ "RDMACM_1.2": fn(*mut rdma_cm_id, *mut ibv_qp_attr, *mut c_int) -> c_int;
}

/// `dlopen`s `name` for the whole process (never closed: the providers it loads keep
/// threads and handlers of their own).
fn open(name: &CStr) -> Result<*mut c_void, LoadError> {
    // SAFETY: `name` is a NUL-terminated string; dlopen has no other precondition.
    let h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if h.is_null() {
        return Err(LoadError(format!(
            "{} could not be loaded ({}): {INSTALL}",
            name.to_string_lossy(),
            dl_error()
        )));
    }
    Ok(h)
}

/// The address of `name` (NUL-terminated) at symbol version `version` in `handle`.
fn sym(handle: *mut c_void, name: &str, version: &str) -> Result<*mut c_void, LoadError> {
    let n = CStr::from_bytes_with_nul(name.as_bytes())
        .map_err(|_| LoadError(format!("bad symbol name {name:?}")))?;
    let v = std::ffi::CString::new(version).map_err(|_| LoadError(version.into()))?;
    // SAFETY: `handle` came from a successful dlopen and is never closed; both strings
    // are NUL-terminated.
    let p = unsafe { libc::dlvsym(handle, n.as_ptr(), v.as_ptr()) };
    if p.is_null() {
        return Err(LoadError(format!(
            "{}@{version} is missing ({}): rdma-core 44 or later is needed ({INSTALL})",
            name.trim_end_matches('\0'),
            dl_error()
        )));
    }
    Ok(p)
}

/// `dlerror()`'s message.
fn dl_error() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until the next dl*
    // call on this thread; it is copied at once.
    unsafe {
        let e: *const c_char = libc::dlerror();
        if e.is_null() {
            "no detail".into()
        } else {
            CStr::from_ptr(e).to_string_lossy().into_owned()
        }
    }
}

static LIB: OnceLock<Result<Lib, LoadError>> = OnceLock::new();

/// The libraries, loaded on first use.
pub(crate) fn lib() -> Result<&'static Lib, LoadError> {
    LIB.get_or_init(Lib::load).as_ref().map_err(Clone::clone)
}
