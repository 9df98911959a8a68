/* The kernel image's structure layouts (driver/storport/src/kernel.rs) against mingw-w64's
 * DDK headers, for the architecture it is compiled for: scripts/driver-image.sh compiles it
 * (-c only) with x86_64- and i686-w64-mingw32-gcc, so a field out of place fails the build.
 * The Rust side asserts the same offsets (`const _` in kernel.rs). mingw's srb.h carries
 * the SCSIport HW_INITIALIZATION_DATA, which ends before StorPort's HwBuildIo: the image's
 * HwBuildIo sits right after it. */
#include <ntddk.h>
#include <srb.h>
#include <stddef.h>

#define AT(t, f, x64, x86) _Static_assert(offsetof(t, f) == (sizeof(void *) == 8 ? (x64) : (x86)), #t "." #f)

AT(SCSI_REQUEST_BLOCK, Function, 2, 2);
AT(SCSI_REQUEST_BLOCK, SrbStatus, 3, 3);
AT(SCSI_REQUEST_BLOCK, ScsiStatus, 4, 4);
AT(SCSI_REQUEST_BLOCK, PathId, 5, 5);
AT(SCSI_REQUEST_BLOCK, Lun, 7, 7);
AT(SCSI_REQUEST_BLOCK, CdbLength, 10, 10);
AT(SCSI_REQUEST_BLOCK, SenseInfoBufferLength, 11, 11);
AT(SCSI_REQUEST_BLOCK, SrbFlags, 12, 12);
AT(SCSI_REQUEST_BLOCK, DataTransferLength, 16, 16);
AT(SCSI_REQUEST_BLOCK, TimeOutValue, 20, 20);
AT(SCSI_REQUEST_BLOCK, DataBuffer, 24, 24);
AT(SCSI_REQUEST_BLOCK, SrbExtension, 56, 40);
AT(SCSI_REQUEST_BLOCK, Cdb, 72, 48);
_Static_assert(sizeof(SCSI_REQUEST_BLOCK) == (sizeof(void *) == 8 ? 88 : 64), "SRB size");

AT(HW_INITIALIZATION_DATA, HwInitialize, 8, 8);
AT(HW_INITIALIZATION_DATA, HwStartIo, 16, 12);
AT(HW_INITIALIZATION_DATA, HwFindAdapter, 32, 20);
AT(HW_INITIALIZATION_DATA, HwResetBus, 40, 24);
AT(HW_INITIALIZATION_DATA, DeviceExtensionSize, 64, 36);
AT(HW_INITIALIZATION_DATA, NumberOfAccessRanges, 76, 48);
AT(HW_INITIALIZATION_DATA, MapBuffers, 88, 56);
AT(HW_INITIALIZATION_DATA, MultipleRequestPerLu, 92, 60);
AT(HW_INITIALIZATION_DATA, VendorIdLength, 94, 62);
AT(HW_INITIALIZATION_DATA, VendorId, 96, 64);
AT(HW_INITIALIZATION_DATA, DeviceIdLength, 106, 70);
AT(HW_INITIALIZATION_DATA, DeviceId, 112, 72);
AT(HW_INITIALIZATION_DATA, HwAdapterControl, 120, 76);
/* HwBuildIo (StorPort) follows HwAdapterControl. */
_Static_assert(sizeof(HW_INITIALIZATION_DATA) == (sizeof(void *) == 8 ? 128 : 80), "up to HwAdapterControl");

_Static_assert(RequestComplete == 0 && RequestTimerCall == 6, "SCSI_NOTIFICATION_TYPE");
_Static_assert(ScsiQuerySupportedControlTypes == 0 && ScsiStopAdapter == 1 && ScsiRestartAdapter == 2, "control types");
_Static_assert(SP_RETURN_NOT_FOUND == 0, "SP_RETURN_NOT_FOUND");
_Static_assert(SRB_FLAGS_DATA_IN == 0x40 && SRB_FLAGS_DATA_OUT == 0x80, "SRB flags");
