/* A stand-in for Windows's bcryptprimitives.dll under Wine 8, which has none:
 * Go's runtime on Windows takes its random bytes from ProcessPrng there and
 * stops at start without it. ProcessPrng over RtlGenRandom (advapi32's
 * SystemFunction036). Built by .ci/wine; never shipped. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
	while (len > 0) {
		ULONG n = len > 0x40000000 ? 0x40000000 : (ULONG)len;
		if (!SystemFunction036(data, n))
			return FALSE;
		data += n;
		len -= n;
	}
	return TRUE;
}
