//go:build windows

package probe

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
)

// Windows has no TCP_QUICKACK. Its delayed acknowledgement (up to 200 ms)
// is turned off for one socket by SIO_TCP_SET_ACK_FREQUENCY with a
// frequency of 1, every segment acknowledged, which holds for the
// socket's life: set once, at the dial, and ackNow has nothing to do.
const (
	sioTCPSetAckFrequency = 0x98000017 // _WSAIOW(IOC_VENDOR, 23), mstcpip.h
	fionread              = 0x4004667f // _IOR('f', 127, u_long), winsock2.h
)

// tuneSocket sets a new connection's TCP_NODELAY, and its acknowledgement
// frequency to 1 where the system takes it: Windows 10 1607 and later do,
// an older one (or Wine) refuses, and the probe then measures with the
// system's delayed acknowledgement, as it would any client.
func tuneSocket(fd uintptr) error {
	if err := syscall.SetsockoptInt(syscall.Handle(fd), syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1); err != nil {
		return err
	}
	freq := uint32(1)
	var n uint32
	windows.WSAIoctl(windows.Handle(fd), sioTCPSetAckFrequency, (*byte)(unsafe.Pointer(&freq)), 4, nil, 0, &n, nil, 0)
	return nil
}

// ackNow has nothing to do on Windows: the acknowledgement frequency
// tuneSocket set holds.
func ackNow(uintptr) {}

// bytesWaiting is how many bytes the socket holds unread (FIONREAD), or
// -1 where that cannot be read.
func bytesWaiting(fd uintptr) int {
	var waiting, n uint32
	if err := windows.WSAIoctl(windows.Handle(fd), fionread, nil, 0, (*byte)(unsafe.Pointer(&waiting)), 4, &n, nil, 0); err != nil {
		return -1
	}
	return int(waiting)
}
