package serve

import (
	"encoding/binary"
	"errors"
	"os"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The kernel's socket-diagnostics request and answer for TCP
// (linux/inet_diag.h: struct inet_diag_req_v2, struct inet_diag_msg).
const (
	diagReqLen = 56 // family, protocol, ext, pad, states (4), inet_diag_sockid (48)
	diagMsgLen = 72 // family, state, timer, retrans, inet_diag_sockid (48), expires, rqueue, wqueue, uid, inode
	tcpListen  = 10 // TCP_LISTEN in the kernel's TCP states
)

// listeningInodesDiag adds the inodes (and owners' uids) of the TCP sockets
// in LISTEN state on port, asked of the kernel over NETLINK_SOCK_DIAG for
// IPv4 and IPv6. Only listening sockets come back, however many
// connections the machine holds: /proc/net/tcp lists every socket, and on
// a machine with thousands in TIME_WAIT reading it takes milliseconds. An
// error (a kernel or sandbox without sock_diag) leaves the caller to read
// /proc/net/tcp instead.
func listeningInodesDiag(port int, into map[string]int) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return os.NewSyscallError("socket", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return os.NewSyscallError("bind", err)
	}
	for seq, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		if err := diagDump(fd, uint32(seq+1), family, port, into); err != nil {
			return err
		}
	}
	return nil
}

// diagDump asks for every listening TCP socket of family and keeps those
// on port.
func diagDump(fd int, seq uint32, family uint8, port int, into map[string]int) error {
	req := make([]byte, unix.SizeofNlMsghdr+diagReqLen)
	hdr := (*unix.NlMsghdr)(unsafe.Pointer(&req[0]))
	hdr.Len = uint32(len(req))
	hdr.Type = unix.SOCK_DIAG_BY_FAMILY
	hdr.Flags = unix.NLM_F_REQUEST | unix.NLM_F_DUMP
	hdr.Seq = seq
	body := req[unix.SizeofNlMsghdr:]
	body[0], body[1] = family, unix.IPPROTO_TCP
	binary.NativeEndian.PutUint32(body[4:8], 1<<tcpListen)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return os.NewSyscallError("sendto", err)
	}
	buf := make([]byte, 32<<10)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return os.NewSyscallError("recvfrom", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.Header.Seq != seq {
				continue
			}
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return nil
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if e := int32(binary.NativeEndian.Uint32(m.Data[:4])); e != 0 {
						return os.NewSyscallError("sock_diag", unix.Errno(-e))
					}
				}
				return errors.New("sock_diag: an error without a code")
			case unix.SOCK_DIAG_BY_FAMILY:
				d := m.Data
				if len(d) < diagMsgLen || d[1] != tcpListen {
					continue
				}
				// inet_diag_sockid starts at byte 4; its source port is
				// in network order.
				if int(binary.BigEndian.Uint16(d[4:6])) != port {
					continue
				}
				uid := binary.NativeEndian.Uint32(d[64:68])
				inode := binary.NativeEndian.Uint32(d[68:72])
				into[strconv.FormatUint(uint64(inode), 10)] = int(uid)
			}
		}
	}
}
