package gate

import (
	"os"

	"golang.org/x/sys/windows"
)

// dropLock drops the ticket's lock through its handle (UnlockFileEx of
// npu-hold's byte, 1 TiB in), as only the holder's own handle can.
func dropLock(f *os.File) error {
	ol := windows.Overlapped{OffsetHigh: 1 << 40 >> 32}
	return windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, &ol)
}
