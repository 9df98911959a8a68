use core::ffi::c_void;

#[repr(C)]
pub struct HwInitializationData {
    pub size: u32,
}

unsafe extern "system" {
    fn StorPortInitialize(a1: *mut c_void, a2: *mut c_void, data: *mut HwInitializationData, unused: *mut c_void) -> u32;
    fn ExAllocatePoolWithTag(pool: u32, bytes: usize, tag: u32) -> *mut c_void;
    fn ExFreePoolWithTag(p: *mut c_void, tag: u32);
    fn KeBugCheckEx(code: u32, a: usize, b: usize, c: usize, d: usize) -> !;
}

#[unsafe(no_mangle)]
pub extern "system" fn DriverEntry(driver: *mut c_void, registry: *mut c_void) -> i32 {
    let mut d = HwInitializationData { size: 0 };
    let v = alloc::vec![1u8; 10];
    unsafe { StorPortInitialize(driver, registry, &mut d, core::ptr::null_mut()) as i32 + v[3] as i32 }
}

struct PoolAlloc;
unsafe impl core::alloc::GlobalAlloc for PoolAlloc {
    unsafe fn alloc(&self, l: core::alloc::Layout) -> *mut u8 { unsafe { ExAllocatePoolWithTag(512, l.size(), 0x2050_5253) as *mut u8 } }
    unsafe fn dealloc(&self, p: *mut u8, _l: core::alloc::Layout) { unsafe { ExFreePoolWithTag(p as *mut c_void, 0x2050_5253) } }
}
#[global_allocator]
static A: PoolAlloc = PoolAlloc;

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! { unsafe { KeBugCheckEx(0xE2, 0, 0, 0, 0) } }
