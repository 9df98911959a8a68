/*
 * bcryptprimitives.dll for Wine 8.0 (Debian 12's), which lacks it (Wine added it in 8.13).
 * Rust's std for Windows (1.78 and later) imports ProcessPrng from it for its random keys;
 * without the DLL no Rust test binary starts under that Wine. ProcessPrng is implemented
 * on RtlGenRandom (advapi32's SystemFunction036), which Wine 8.0 has. Built by
 * scripts/wine-test.sh with mingw-w64 and copied into the test run's own Wine prefix; used
 * only there: a real Windows has its own.
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    while (length > 0) {
        ULONG chunk = length > 0x10000000 ? 0x10000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
