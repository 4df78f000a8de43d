/* A stand-in for Windows' bcryptprimitives.dll, which Wine 8.0 lacks: Rust's standard library
 * (since 1.78) imports ProcessPrng from it, and an exe that cannot resolve it does not start
 * (status c0000135). ProcessPrng is served by advapi32's SystemFunction036 (RtlGenRandom).
 * Built with mingw-w64 by tests/install-windows-toolchain.sh into the Wine prefix's system32;
 * a test-environment fix only: real Windows has the DLL. */
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
