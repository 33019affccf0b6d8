//go:build unix

package logscan

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// noFollow makes an open refuse a symlink at the name (ELOOP).
const noFollow = unix.O_NOFOLLOW

// stopReading ends r's pending read and every later one: a deadline in
// the past, which the runtime's poller holds to.
func stopReading(r *os.File, _ <-chan struct{}) {
	r.SetReadDeadline(time.Now())
}

// readWaiting passes to add what r's pipe holds now, without waiting for
// more: the pipe is non-blocking, and a read of an empty one is EAGAIN.
func readWaiting(r *os.File, add func([]byte)) {
	rc, err := r.SyscallConn()
	if err != nil {
		return
	}
	buf := make([]byte, 64<<10)
	rc.Read(func(fd uintptr) bool {
		for {
			n, err := unix.Read(int(fd), buf)
			if n <= 0 || err != nil {
				return true
			}
			add(buf[:n])
		}
	})
}
