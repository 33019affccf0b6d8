//go:build windows

package logscan

import (
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// peekNamedPipe is kernel32's PeekNamedPipe, which x/sys/windows does not
// wrap: it works on anonymous pipes too.
var peekNamedPipe = windows.NewLazySystemDLL("kernel32.dll").NewProc("PeekNamedPipe")

// noFollow makes an open of a name that exists fail and one that does not
// open the reparse point itself: with O_CREATE|O_EXCL (the only opens it
// is given to here) the name is made new, never reached through a symlink
// or a junction.
const noFollow = syscall.FILE_FLAG_OPEN_REPARSE_POINT

// stopReading ends r's pending read. An anonymous pipe's handle is not
// the runtime poller's, so a deadline cannot end a read that waits in
// ReadFile: CancelIoEx does, again every 10 ms until the reader has
// stopped (it checks, between reads, that it was stopped, and a read it
// started just after a cancel would wait on), which is done's closing.
func stopReading(r *os.File, done <-chan struct{}) {
	rc, err := r.SyscallConn()
	if err != nil {
		return
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		rc.Control(func(fd uintptr) { windows.CancelIoEx(windows.Handle(fd), nil) })
		select {
		case <-done:
			return
		case <-tick.C:
		}
	}
}

// readWaiting passes to add what r's pipe holds now, without waiting for
// more: PeekNamedPipe says how many bytes are there, and no more than
// those are read (ReadFile of an empty anonymous pipe would wait).
func readWaiting(r *os.File, add func([]byte)) {
	rc, err := r.SyscallConn()
	if err != nil {
		return
	}
	buf := make([]byte, 64<<10)
	rc.Control(func(fd uintptr) {
		h := windows.Handle(fd)
		for {
			var avail uint32
			if ok, _, _ := peekNamedPipe.Call(uintptr(h), 0, 0, 0, uintptr(unsafe.Pointer(&avail)), 0); ok == 0 || avail == 0 {
				return
			}
			var n uint32
			if windows.ReadFile(h, buf[:min(int(avail), len(buf))], &n, nil) != nil || n == 0 {
				return
			}
			add(buf[:n])
		}
	})
}
