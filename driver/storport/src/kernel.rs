//! The kernel glue: every `unsafe` of the image. `DriverEntry` hands StorPort a
//! HW_INITIALIZATION_DATA whose routines are thin shims over the miniport's
//! (`SrpMiniport::hw_*`); [`KernelCalls`] is the miniport's `StorPortCalls` over
//! `storport.sys`'s exports. Layouts follow srb.h/storport.h (checked against mingw-w64's
//! headers by `layout/check.c`, compiled for both architectures by scripts/driver-image.sh).
//! The routines are `extern "system"`: stdcall on x86 (the image check finds their `@N`
//! decorations), the one convention on x64; StorPortNotification is `cdecl` and variadic.

use crate::request::{AdapterControlType, OsSrb, request_of};
use alloc::collections::BTreeMap;
use alloc::sync::Arc;
use core::ffi::c_void;
use core::time::Duration;
use ib_verbs::sync::Lock;
use srp_initiator::{PortSide, SrbExt};
use srp_initiator_storport::hw::{
    AdapterControl, AdapterControlStatus, StorPortCalls, SupportedControlTypes,
};
use srp_initiator_storport::srp::SrpMiniport;
use win_port::{LuAddress, Srb, SrbId, SrbOwner, SrbStatus, SystemMemory};

/// `SP_RETURN_NOT_FOUND` (srb.h).
const SP_RETURN_NOT_FOUND: u32 = 0;
/// `Internal` (INTERFACE_TYPE).
const INTERFACE_INTERNAL: u32 = 0;
/// `STOR_MAP_NON_READ_WRITE_BUFFERS`.
const STOR_MAP_NON_READ_WRITE_BUFFERS: u8 = 1;
/// SCSI_NOTIFICATION_TYPE: `RequestComplete`, `RequestTimerCall`, and storport.h's
/// `InitializeDpc`/`IssueDpc` (what its inline StorPortInitializeDpc/StorPortIssueDpc send).
const REQUEST_COMPLETE: u32 = 0;
const REQUEST_TIMER_CALL: u32 = 6;
const INITIALIZE_DPC: u32 = 0x1001;
const ISSUE_DPC: u32 = 0x1002;
/// `NonPagedPoolNx`, and the pool tag `"SRP "`.
const NON_PAGED_POOL_NX: u32 = 512;
const POOL_TAG: u32 = u32::from_le_bytes(*b"SRP ");
/// The bugcheck a panic raises (`DRIVER_VIOLATION`-like; the arguments name the image).
const BUGCHECK_PANIC: u32 = 0xE2;

/// HW_INITIALIZATION_DATA (storport.h, the 2003 layout: up to HwBuildIo).
#[repr(C)]
pub(crate) struct HwInitializationData {
    pub hw_initialization_data_size: u32,
    pub adapter_interface_type: u32,
    pub hw_initialize: Option<unsafe extern "system" fn(*mut c_void) -> u8>,
    pub hw_start_io: Option<unsafe extern "system" fn(*mut c_void, *mut ScsiRequestBlock) -> u8>,
    pub hw_interrupt: *mut c_void,
    pub hw_find_adapter: Option<
        unsafe extern "system" fn(
            *mut c_void,
            *mut c_void,
            *mut c_void,
            *mut u8,
            *mut c_void,
            *mut u8,
        ) -> u32,
    >,
    pub hw_reset_bus: Option<unsafe extern "system" fn(*mut c_void, u32) -> u8>,
    pub hw_dma_started: *mut c_void,
    pub hw_adapter_state: *mut c_void,
    pub device_extension_size: u32,
    pub specific_lu_extension_size: u32,
    pub srb_extension_size: u32,
    pub number_of_access_ranges: u32,
    pub reserved: *mut c_void,
    pub map_buffers: u8,
    pub need_physical_addresses: u8,
    pub tagged_queuing: u8,
    pub auto_request_sense: u8,
    pub multiple_request_per_lu: u8,
    pub receive_event: u8,
    pub vendor_id_length: u16,
    pub vendor_id: *mut c_void,
    pub port_version_flags: u16,
    pub device_id_length: u16,
    pub device_id: *mut c_void,
    pub hw_adapter_control: Option<unsafe extern "system" fn(*mut c_void, u32, *mut c_void) -> u32>,
    pub hw_build_io: Option<unsafe extern "system" fn(*mut c_void, *mut ScsiRequestBlock) -> u8>,
}

/// SCSI_REQUEST_BLOCK (srb.h).
#[repr(C)]
pub(crate) struct ScsiRequestBlock {
    pub length: u16,
    pub function: u8,
    pub srb_status: u8,
    pub scsi_status: u8,
    pub path_id: u8,
    pub target_id: u8,
    pub lun: u8,
    pub queue_tag: u8,
    pub queue_action: u8,
    pub cdb_length: u8,
    pub sense_info_buffer_length: u8,
    pub srb_flags: u32,
    pub data_transfer_length: u32,
    pub time_out_value: u32,
    pub data_buffer: *mut c_void,
    pub sense_info_buffer: *mut c_void,
    pub next_srb: *mut ScsiRequestBlock,
    pub original_request: *mut c_void,
    pub srb_extension: *mut c_void,
    pub internal_status: u32,
    #[cfg(target_pointer_width = "64")]
    pub reserved: u32,
    pub cdb: [u8; 16],
}

/// The offsets layout/check.c pins against mingw-w64's srb.h, for this architecture.
const fn at(x64: usize, x86: usize) -> usize {
    if cfg!(target_pointer_width = "64") {
        x64
    } else {
        x86
    }
}
const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(offset_of!(ScsiRequestBlock, function) == 2);
    assert!(offset_of!(ScsiRequestBlock, srb_status) == 3);
    assert!(offset_of!(ScsiRequestBlock, scsi_status) == 4);
    assert!(offset_of!(ScsiRequestBlock, path_id) == 5);
    assert!(offset_of!(ScsiRequestBlock, lun) == 7);
    assert!(offset_of!(ScsiRequestBlock, cdb_length) == 10);
    assert!(offset_of!(ScsiRequestBlock, sense_info_buffer_length) == 11);
    assert!(offset_of!(ScsiRequestBlock, srb_flags) == 12);
    assert!(offset_of!(ScsiRequestBlock, data_transfer_length) == 16);
    assert!(offset_of!(ScsiRequestBlock, time_out_value) == 20);
    assert!(offset_of!(ScsiRequestBlock, data_buffer) == 24);
    assert!(offset_of!(ScsiRequestBlock, srb_extension) == at(56, 40));
    assert!(offset_of!(ScsiRequestBlock, cdb) == at(72, 48));
    assert!(size_of::<ScsiRequestBlock>() == at(88, 64));
    assert!(offset_of!(HwInitializationData, hw_initialize) == 8);
    assert!(offset_of!(HwInitializationData, hw_start_io) == at(16, 12));
    assert!(offset_of!(HwInitializationData, hw_find_adapter) == at(32, 20));
    assert!(offset_of!(HwInitializationData, hw_reset_bus) == at(40, 24));
    assert!(offset_of!(HwInitializationData, device_extension_size) == at(64, 36));
    assert!(offset_of!(HwInitializationData, number_of_access_ranges) == at(76, 48));
    assert!(offset_of!(HwInitializationData, map_buffers) == at(88, 56));
    assert!(offset_of!(HwInitializationData, multiple_request_per_lu) == at(92, 60));
    assert!(offset_of!(HwInitializationData, vendor_id_length) == at(94, 62));
    assert!(offset_of!(HwInitializationData, vendor_id) == at(96, 64));
    assert!(offset_of!(HwInitializationData, device_id_length) == at(106, 70));
    assert!(offset_of!(HwInitializationData, device_id) == at(112, 72));
    assert!(offset_of!(HwInitializationData, hw_adapter_control) == at(120, 76));
    // StorPort's HwBuildIo right after the SCSIport structure mingw-w64 describes.
    assert!(offset_of!(HwInitializationData, hw_build_io) == at(128, 80));
};

/// SCSI_SUPPORTED_CONTROL_TYPE_LIST (srb.h): `MaxControlType`, then a BOOLEAN per type.
#[repr(C)]
struct SupportedControlTypeList {
    max_control_type: u32,
    supported_type_list: [u8; 1],
}

/// STOR_DPC: a KDPC (0x40 bytes on x64, 0x20 on x86) and its spin lock; StorPort
/// initializes it (InitializeDpc), the miniport only holds its storage.
#[repr(C)]
struct StorDpc {
    words: [usize; 9],
}

unsafe extern "system" {
    fn StorPortInitialize(
        argument1: *mut c_void,
        argument2: *mut c_void,
        data: *mut HwInitializationData,
        unused: *mut c_void,
    ) -> u32;
    fn StorPortSetDeviceQueueDepth(
        ext: *mut c_void,
        path: u8,
        target: u8,
        lun: u8,
        depth: u32,
    ) -> u8;
    fn StorPortPause(ext: *mut c_void, timeout_seconds: u32) -> u8;
    fn StorPortResume(ext: *mut c_void) -> u8;
    fn ExAllocatePoolWithTag(pool_type: u32, bytes: usize, tag: u32) -> *mut c_void;
    fn ExFreePoolWithTag(p: *mut c_void, tag: u32);
    fn KeBugCheckEx(code: u32, p1: usize, p2: usize, p3: usize, p4: usize) -> !;
}

unsafe extern "C" {
    fn StorPortNotification(notification: u32, ext: *mut c_void, ...);
}

/// The device extension: what StorPort allocates per adapter (zeroed) and hands to every
/// routine; the miniport and the glue's bookkeeping are written into it at HwFindAdapter.
struct DeviceExtension {
    miniport: SrpMiniport,
    calls: Arc<KernelCalls>,
}

/// The miniport's StorPort calls for one adapter, over `storport.sys`.
struct KernelCalls {
    /// The device extension (StorPort's; valid while the adapter exists).
    ext: usize,
    /// The DPC StorPort queues for `issue_dpc`, in the extension's allocation.
    dpc: Lock<StorDpc>,
    /// The requests in flight, found by either side's handle.
    in_flight: Lock<InFlight>,
    next_id: Lock<u64>,
}

/// The OS SRB behind each miniport SRB in flight: by the miniport SRB's id (its
/// completion) and by the OS SRB's address (HwStartIo after HwBuildIo admitted it).
#[derive(Default)]
struct InFlight {
    by_id: BTreeMap<SrbId, usize>,
    by_os: BTreeMap<usize, SrbOwner<SrbExt>>,
}

impl KernelCalls {
    fn ext(&self) -> *mut c_void {
        self.ext as *mut c_void
    }
}

impl StorPortCalls for KernelCalls {
    fn issue_dpc(&self) -> bool {
        let mut queued: u8 = 0;
        let mut dpc = self.dpc.lock();
        // SAFETY: IssueDpc takes the extension, the STOR_DPC StorPort initialized
        // (InitializeDpc at HwFindAdapter), two opaque arguments and a BOOLEAN out; all
        // live for the call.
        unsafe {
            StorPortNotification(
                ISSUE_DPC,
                self.ext(),
                &mut *dpc as *mut StorDpc,
                core::ptr::null_mut::<c_void>(),
                core::ptr::null_mut::<c_void>(),
                &mut queued as *mut u8,
            );
        }
        queued != 0
    }

    fn request_timer_call(&self, after: Duration) {
        let micros = u32::try_from(after.as_micros()).unwrap_or(u32::MAX).max(1);
        // SAFETY: RequestTimerCall takes the extension, the HwTimer routine and a ULONG.
        unsafe {
            StorPortNotification(
                REQUEST_TIMER_CALL,
                self.ext(),
                hw_timer as unsafe extern "system" fn(*mut c_void),
                micros,
            );
        }
    }

    fn request_complete(&self, srb: &Srb<SrbExt>) {
        let (os, owner) = {
            let mut f = self.in_flight.lock();
            let Some(os) = f.by_id.remove(&srb.id()) else {
                return;
            };
            let Some(owner) = f.by_os.remove(&os) else {
                return;
            };
            (os, owner)
        };
        let result = owner.take_result(None, false);
        let os = os as *mut ScsiRequestBlock;
        // SAFETY: `os` is the SRB StorPort handed to HwStartIo/HwBuildIo, not completed
        // yet (it leaves `in_flight` once, here); the port owns it again after the call.
        unsafe {
            (*os).srb_status = result.status.0;
            (*os).scsi_status = result.scsi_status;
            StorPortNotification(REQUEST_COMPLETE, self.ext(), os);
        }
    }

    fn set_device_queue_depth(&self, lu: LuAddress, depth: u32) -> bool {
        // SAFETY: plain values and the adapter's extension.
        unsafe {
            StorPortSetDeviceQueueDepth(self.ext(), lu.path_id, lu.target_id, lu.lun, depth) != 0
        }
    }

    fn side(&self) -> Arc<dyn PortSide> {
        Arc::new(KernelSide { ext: self.ext })
    }
}

/// The transport's side of the adapter in the kernel.
struct KernelSide {
    ext: usize,
}

impl KernelSide {
    fn calls(&self) -> &KernelCalls {
        // SAFETY: the side exists only while its adapter's extension does (the transport
        // holding it lives in the extension), and the extension was written at
        // HwFindAdapter before any transport could be opened.
        unsafe { &(*(self.ext as *const DeviceExtension)).calls }
    }
}

impl PortSide for KernelSide {
    fn complete(&self, srb: &Srb<SrbExt>) {
        self.calls().request_complete(srb);
    }

    fn wake(&self) {
        self.calls().issue_dpc();
    }

    fn hold(&self, timeout_secs: u32) {
        // SAFETY: the adapter's extension and a ULONG.
        unsafe { StorPortPause(self.ext as *mut c_void, timeout_secs) };
    }

    fn release(&self) {
        // SAFETY: the adapter's extension.
        unsafe { StorPortResume(self.ext as *mut c_void) };
    }

    fn system_memory(&self) -> Option<Arc<SystemMemory>> {
        // The kernel's buffers are the OS's (MDLs), not the emulated machine's pages.
        None
    }
}

/// The adapter's extension as StorPort passes it.
///
/// # Safety
/// `ext` is a device extension this image's HwFindAdapter initialized.
unsafe fn extension<'a>(ext: *mut c_void) -> &'a DeviceExtension {
    // SAFETY: per the contract; StorPort keeps the extension for the adapter's life.
    unsafe { &*(ext as *const DeviceExtension) }
}

/// A miniport SRB for the OS SRB, recorded in flight; or the status to complete it with.
fn admit(calls: &KernelCalls, os: *mut ScsiRequestBlock) -> Result<Srb<SrbExt>, SrbStatus> {
    // SAFETY: StorPort hands HwBuildIo/HwStartIo a valid SRB it owns until completed.
    let fields = unsafe {
        let s = &*os;
        OsSrb {
            function: s.function,
            path_id: s.path_id,
            target_id: s.target_id,
            lun: s.lun,
            cdb_length: s.cdb_length,
            sense_info_buffer_length: s.sense_info_buffer_length,
            srb_flags: s.srb_flags,
            data_transfer_length: s.data_transfer_length,
            time_out_value: s.time_out_value,
            cdb: s.cdb,
        }
    };
    let request = request_of(&fields)?;
    let id = {
        let mut n = calls.next_id.lock();
        *n += 1;
        SrbId(*n)
    };
    let owner = SrbOwner::new(id, request, win_port::DataBuffer::empty());
    let srb = owner.srb().clone();
    let mut f = calls.in_flight.lock();
    f.by_id.insert(id, os as usize);
    f.by_os.insert(os as usize, owner);
    Ok(srb)
}

/// Completes an OS SRB the miniport never saw.
fn complete_now(ext: *mut c_void, os: *mut ScsiRequestBlock, status: SrbStatus) {
    // SAFETY: as in `admit`; completed once, here.
    unsafe {
        (*os).srb_status = status.0;
        StorPortNotification(REQUEST_COMPLETE, ext, os);
    }
}

/// HwFindAdapter: the extension written, the DPC initialized; then the miniport would open
/// its adapter from a fabric — and there is no RDMA provider for the Windows kernel in this
/// tree, so none is present.
unsafe extern "system" fn hw_find_adapter(
    ext: *mut c_void,
    _hw_context: *mut c_void,
    _bus_information: *mut c_void,
    _argument_string: *mut u8,
    _config: *mut c_void,
    _again: *mut u8,
) -> u32 {
    let calls = Arc::new(KernelCalls {
        ext: ext as usize,
        dpc: Lock::new(StorDpc { words: [0; 9] }),
        in_flight: Lock::new(InFlight::default()),
        next_id: Lock::new(0),
    });
    // SAFETY: StorPort allocated DeviceExtensionSize (= size_of::<DeviceExtension>()) zeroed
    // bytes at `ext`, aligned for a pointer-sized type; nothing else is there yet.
    unsafe {
        core::ptr::write(
            ext as *mut DeviceExtension,
            DeviceExtension {
                miniport: SrpMiniport::default(),
                calls: calls.clone(),
            },
        );
    }
    let mut dpc = calls.dpc.lock();
    // SAFETY: InitializeDpc takes the extension, the STOR_DPC storage and the routine.
    unsafe {
        StorPortNotification(
            INITIALIZE_DPC,
            ext,
            &mut *dpc as *mut StorDpc,
            hw_dpc as unsafe extern "system" fn(*mut c_void, *mut c_void, *mut c_void, *mut c_void),
        );
    }
    SP_RETURN_NOT_FOUND
}

unsafe extern "system" fn hw_initialize(ext: *mut c_void) -> u8 {
    // SAFETY: called only after HwFindAdapter.
    let e = unsafe { extension(ext) };
    u8::from(e.miniport.hw_initialize(&*e.calls))
}

unsafe extern "system" fn hw_build_io(ext: *mut c_void, os: *mut ScsiRequestBlock) -> u8 {
    // SAFETY: called only after HwFindAdapter.
    let e = unsafe { extension(ext) };
    match admit(&e.calls, os) {
        Ok(srb) => u8::from(e.miniport.hw_build_io(&*e.calls, &srb)),
        Err(status) => {
            complete_now(ext, os, status);
            0
        }
    }
}

unsafe extern "system" fn hw_start_io(ext: *mut c_void, os: *mut ScsiRequestBlock) -> u8 {
    // SAFETY: called only after HwFindAdapter.
    let e = unsafe { extension(ext) };
    let admitted = (e.calls.in_flight.lock().by_os.get(&(os as usize))).map(|o| o.srb().clone());
    let srb = match admitted {
        Some(srb) => srb,
        None => match admit(&e.calls, os) {
            Ok(srb) => srb,
            Err(status) => {
                complete_now(ext, os, status);
                return 1;
            }
        },
    };
    u8::from(e.miniport.hw_start_io(&*e.calls, srb))
}

unsafe extern "system" fn hw_reset_bus(ext: *mut c_void, path_id: u32) -> u8 {
    // SAFETY: called only after HwFindAdapter.
    let e = unsafe { extension(ext) };
    u8::from(e.miniport.hw_reset_bus(path_id as u8))
}

unsafe extern "system" fn hw_adapter_control(
    ext: *mut c_void,
    code: u32,
    params: *mut c_void,
) -> u32 {
    // SAFETY: called only after HwFindAdapter.
    let e = unsafe { extension(ext) };
    let status = match AdapterControlType::from_code(code) {
        AdapterControlType::QuerySupportedControlTypes => {
            let mut t = SupportedControlTypes::default();
            let s = e
                .miniport
                .hw_adapter_control(AdapterControl::QuerySupportedControlTypes(&mut t));
            let list = params as *mut SupportedControlTypeList;
            // SAFETY: for this code `params` is a SCSI_SUPPORTED_CONTROL_TYPE_LIST whose
            // array holds MaxControlType entries; only entries below it are written.
            unsafe {
                let max = (*list).max_control_type as usize;
                let entries = core::ptr::addr_of_mut!((*list).supported_type_list) as *mut u8;
                for (i, on) in [true, t.stop_adapter, t.restart_adapter]
                    .into_iter()
                    .enumerate()
                {
                    if i < max {
                        *entries.add(i) = u8::from(on);
                    }
                }
            }
            s
        }
        AdapterControlType::StopAdapter => {
            e.miniport.hw_adapter_control(AdapterControl::StopAdapter)
        }
        AdapterControlType::RestartAdapter => e
            .miniport
            .hw_adapter_control(AdapterControl::RestartAdapter),
        AdapterControlType::Other(_) => AdapterControlStatus::Unsuccessful,
    };
    match status {
        AdapterControlStatus::Success => 0,
        AdapterControlStatus::Unsuccessful => 1,
    }
}

unsafe extern "system" fn hw_timer(ext: *mut c_void) {
    // SAFETY: the timer is requested only by an adapter HwFindAdapter initialized.
    let e = unsafe { extension(ext) };
    e.miniport.hw_dpc(&*e.calls);
}

unsafe extern "system" fn hw_dpc(
    _dpc: *mut c_void,
    ext: *mut c_void,
    _a1: *mut c_void,
    _a2: *mut c_void,
) {
    // SAFETY: the DPC was initialized with this adapter's extension.
    let e = unsafe { extension(ext) };
    e.miniport.hw_dpc(&*e.calls);
}

/// The driver's entry point: StorPort takes the routines.
#[unsafe(no_mangle)]
pub unsafe extern "system" fn DriverEntry(
    driver_object: *mut c_void,
    registry_path: *mut c_void,
) -> i32 {
    let mut data = HwInitializationData {
        hw_initialization_data_size: core::mem::size_of::<HwInitializationData>() as u32,
        adapter_interface_type: INTERFACE_INTERNAL,
        hw_initialize: Some(hw_initialize),
        hw_start_io: Some(hw_start_io),
        hw_interrupt: core::ptr::null_mut(),
        hw_find_adapter: Some(hw_find_adapter),
        hw_reset_bus: Some(hw_reset_bus),
        hw_dma_started: core::ptr::null_mut(),
        hw_adapter_state: core::ptr::null_mut(),
        device_extension_size: core::mem::size_of::<DeviceExtension>() as u32,
        specific_lu_extension_size: 0,
        srb_extension_size: 0,
        number_of_access_ranges: 1,
        reserved: core::ptr::null_mut(),
        map_buffers: STOR_MAP_NON_READ_WRITE_BUFFERS,
        need_physical_addresses: 1,
        tagged_queuing: 1,
        auto_request_sense: 1,
        multiple_request_per_lu: 1,
        receive_event: 0,
        vendor_id_length: 0,
        vendor_id: core::ptr::null_mut(),
        port_version_flags: 0,
        device_id_length: 0,
        device_id: core::ptr::null_mut(),
        hw_adapter_control: Some(hw_adapter_control),
        hw_build_io: Some(hw_build_io),
    };
    // SAFETY: StorPort copies the initialization data during the call; the two arguments
    // are DriverEntry's own.
    unsafe {
        StorPortInitialize(
            driver_object,
            registry_path,
            &mut data,
            core::ptr::null_mut(),
        ) as i32
    }
}

/// Kernel pool memory for `alloc` (non-paged: the miniport runs at dispatch level).
struct PoolAllocator;

/// Pool blocks are aligned to 16 bytes on x64 and 8 on x86; larger alignments are refused.
const POOL_ALIGN: usize = 2 * core::mem::size_of::<usize>();

// SAFETY: ExAllocatePoolWithTag returns POOL_ALIGN-aligned blocks of at least the size
// asked (or null), freed by ExFreePoolWithTag with the same tag.
unsafe impl core::alloc::GlobalAlloc for PoolAllocator {
    unsafe fn alloc(&self, layout: core::alloc::Layout) -> *mut u8 {
        if layout.align() > POOL_ALIGN {
            return core::ptr::null_mut();
        }
        // SAFETY: any size; null on failure, which `alloc` reports.
        unsafe {
            ExAllocatePoolWithTag(NON_PAGED_POOL_NX, layout.size().max(1), POOL_TAG) as *mut u8
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: core::alloc::Layout) {
        // SAFETY: `ptr` came from `alloc` above.
        unsafe { ExFreePoolWithTag(ptr as *mut c_void, POOL_TAG) }
    }
}

#[global_allocator]
static ALLOCATOR: PoolAllocator = PoolAllocator;

/// A panic stops the machine with a bugcheck (nothing unwinds in a kernel image).
#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    let line = info.location().map_or(0, |l| l.line() as usize);
    // SAFETY: KeBugCheckEx never returns; its arguments are plain values.
    unsafe { KeBugCheckEx(BUGCHECK_PANIC, 0x5352_5020, line, 0, 0) }
}
