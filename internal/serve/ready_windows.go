package serve

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"unsafe"

	"golang.org/x/sys/windows"
)

// windowsEphemeral is Windows' dynamic port range as it ships (49152-65535,
// `netsh int ipv4 show dynamicport tcp`), which FreePort draws below. A
// machine set otherwise is not read: a draw that meets a port the kernel
// gave out is seen listened on, or fails to bind, and another is drawn.
const windowsEphemeral = "49152 65535"

// FreePort is a TCP port on 127.0.0.1 that nothing listens on now, and
// that this process has not given before, drawn at random below Windows'
// dynamic range (see the Linux FreePort for why not port 0). A port that
// something listens on at another address (0.0.0.0, ::1: Windows lets a
// bind to 127.0.0.1 through beside a wildcard listener that did not ask
// for SO_EXCLUSIVEADDRUSE) is seen in the TCP table, and another drawn.
func FreePort() (int, error) {
	lo, hi := freeRange(windowsEphemeral)
	for range 64 {
		ln, err := listenFresh(lo, hi)
		if err != nil {
			return 0, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if !givenPorts.take(port) {
			continue
		}
		// Windows' sockets are not inherited (Go makes them so), so no copy
		// of the probe outlives its closing.
		if len(Listeners(port)) == 0 {
			return port, nil
		}
	}
	return 0, errors.New("every port drawn was in use or given before")
}

// CheckPortFree fails with a PortInUseError when something listens on
// port, at any address, as the TCP table says, or when 127.0.0.1:port
// cannot be bound.
func CheckPortFree(port int) error {
	if hs := Listeners(port); len(hs) > 0 {
		return &PortInUseError{Port: port, Holders: hs}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return &PortInUseError{Port: port, Holders: Listeners(port)}
	}
	ln.Close()
	return nil
}

// Listeners is every process that holds a socket listening on TCP port,
// IPv4 or IPv6, from the TCP table's owning pids (GetExtendedTcpTable,
// TCP_TABLE_OWNER_PID_LISTENER). Windows gives every listener's owner to
// any user, and each is named as Stat names it; an owner gone since the
// table was read is named by its pid alone. A socket whose owner the table
// does not name (pid 0: Wine 8 names none) is pid 0.
func Listeners(port int) []Proc {
	var out []Proc
	for _, pid := range listenerPIDs(port) {
		pr, ok := Stat(pid)
		switch {
		case pid == 0:
			pr = Proc{Command: "no owner named by the TCP table"}
		case !ok:
			pr = Proc{PID: pid, Command: "gone"}
		}
		out = append(out, pr)
	}
	return out
}

// listenerPIDs is the owning pids of the TCP sockets listening on port,
// sorted, each once; 0 for a socket the table names no owner of.
func listenerPIDs(port int) []int {
	var pids []int
	for _, f := range tcpFamilies {
		if b, err := tcpTable(f.af); err == nil {
			pids = f.owners(b, port, pids)
		}
	}
	slices.Sort(pids)
	return pids
}

// tcpFamily is how a TCP table of one address family is laid out.
type tcpFamily struct {
	af             uint32
	rowLen, at, by int // a row's length, the offsets of its local port and of its owning pid
}

var tcpFamilies = []tcpFamily{
	{windows.AF_INET, 24, 8, 20},   // MIB_TCPROW_OWNER_PID
	{windows.AF_INET6, 56, 20, 52}, // MIB_TCP6ROW_OWNER_PID
}

// owners adds to pids the owners of the rows of table b that are on port,
// each once.
func (f tcpFamily) owners(b []byte, port int, pids []int) []int {
	if len(b) < 4 {
		return pids
	}
	n := int(binary.LittleEndian.Uint32(b))
	for i := 0; i < n && 4+(i+1)*f.rowLen <= len(b); i++ {
		row := b[4+i*f.rowLen : 4+(i+1)*f.rowLen]
		// The port is in network order in the low bytes of its DWORD.
		if int(binary.BigEndian.Uint16(row[f.at:])) != port {
			continue
		}
		if pid := int(binary.LittleEndian.Uint32(row[f.by:])); !slices.Contains(pids, pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

var (
	iphlpapi            = windows.NewLazySystemDLL("iphlpapi.dll")
	getExtendedTcpTable = iphlpapi.NewProc("GetExtendedTcpTable")
)

// tcpTableOwnerPIDListener is TCP_TABLE_OWNER_PID_LISTENER.
const tcpTableOwnerPIDListener = 3

// tcpTable is the listening sockets' table of address family af, with
// their owning pids.
func tcpTable(af uint32) ([]byte, error) {
	size := uint32(4096)
	for range 8 {
		buf := make([]byte, size)
		r, _, _ := getExtendedTcpTable.Call(uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&size)), 0, uintptr(af), tcpTableOwnerPIDListener, 0)
		switch windows.Errno(r) {
		case 0:
			return buf[:min(int(size), len(buf))], nil
		case windows.ERROR_INSUFFICIENT_BUFFER:
			size += 1024 // it may grow before the next call
		default:
			return nil, fmt.Errorf("GetExtendedTcpTable: %w", windows.Errno(r))
		}
	}
	return nil, errors.New("GetExtendedTcpTable: the table kept growing")
}

// checkListener fails when a process outside the serve's job listens on
// port: the serve's processes are the job's members, whoever started them.
// A listener whose owner the table does not name is a stranger too, but
// under Wine, whose TCP table names no owner at all (8.0: every pid 0):
// there the check cannot be made, and passes.
func (p *Process) checkListener(port int) error {
	held := Listeners(port)
	if len(held) == 0 {
		return nil
	}
	mine, _ := p.members()
	var strangers []Proc
	for _, h := range held {
		if h.PID == 0 && onWine() {
			continue
		}
		if h.PID == 0 || !slices.Contains(mine, h.PID) {
			strangers = append(strangers, h)
		}
	}
	if len(strangers) > 0 {
		return &StrangerError{Port: port, Holders: strangers}
	}
	return nil
}

// onWine says whether this process runs under Wine (its ntdll exports
// wine_get_version).
var onWine = sync.OnceValue(func() bool {
	return windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil
})
