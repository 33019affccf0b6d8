//go:build linux

package probe

import "golang.org/x/sys/unix"

// tuneSocket sets a new connection's TCP_NODELAY and TCP_QUICKACK.
func tuneSocket(fd uintptr) error {
	if err := unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
		return err
	}
	return unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_QUICKACK, 1)
}

// ackNow sets TCP_QUICKACK again: the kernel clears it as it goes.
func ackNow(fd uintptr) {
	unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_QUICKACK, 1)
}

// bytesWaiting is how many bytes the socket holds unread (SIOCINQ), or -1
// where that cannot be read.
func bytesWaiting(fd uintptr) int {
	n, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ)
	if err != nil {
		return -1
	}
	return n
}
