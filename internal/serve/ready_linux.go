package serve

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/supervise"
)

// FreePort is a TCP port on 127.0.0.1 that nothing listens on now, and
// that this process has not given before.
//
// It is drawn at random below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), from FreeLow up, not asked of the kernel
// with a bind to port 0: the kernel hands a port it has just taken back
// to the next bind to port 0 (here, of 2,000 such binds by four goroutines
// over two seconds, 261 got a port another had been given in the two
// seconds before), so a second gate starting beside the first (a runner's
// other job, a test's other run) was given the port the first had chosen
// and not yet bound its serve to: one serve failed to bind, and the other
// answered both gates. Below the ephemeral range the kernel gives out no
// port by itself, and two draws meet once in thousands. Where that range
// starts too low to leave room, the kernel's port 0 is asked.
func FreePort() (int, error) {
	lo, hi := freeRange(readFile("/proc/sys/net/ipv4/ip_local_port_range"))
	for range 64 {
		ln, err := listenFresh(lo, hi)
		if err != nil {
			return 0, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		if !givenPorts.take(port) {
			ln.Close()
			continue
		}
		inodes, probe := closeProbe(ln, port)
		if _, stayed := inodes[probe]; stayed {
			hs, _ := holders(inodes, supervise.PIDs())
			return 0, fmt.Errorf("port %d, free when probed, was still listened on by %s once the probe closed", port, (&PortInUseError{Port: port, Holders: hs}).who())
		}
		if len(inodes) == 0 {
			return port, nil
		}
		// Something listens on another address of the port (::1): another.
	}
	return 0, errors.New("every port drawn was in use or given before")
}

// CheckPortFree fails with a PortInUseError when something listens on port.
func CheckPortFree(port int) error {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return &PortInUseError{Port: port, Holders: Listeners(port)}
	}
	// Something may listen on another address of the port (0.0.0.0 is
	// covered by the bind above; a listener on ::1 only is not).
	inodes, _ := closeProbe(ln, port)
	if len(inodes) == 0 {
		return nil
	}
	if hs, _ := holders(inodes, supervise.PIDs()); len(hs) > 0 {
		return &PortInUseError{Port: port, Holders: hs}
	}
	return nil
}

// closeProbe closes ln, a probe of port, and returns the sockets that
// listen on the port then, once a copy of the probe is gone, and the
// probe's own inode: a copy that
// stays is among them only if nothing else listens (it is then what keeps
// the port).
//
// A process forked while the probe was open holds a copy of it until it
// execs or exits: Go's os package forks one, which exits at once, to see
// that clone(CLONE_PIDFD) works, and the gate asks for that check
// (serve.Prepare) as it starts, beside its configuration's. Seen between
// its exit's release of its memory and of its descriptors, it is a process
// of the gate's name with no command line, listening on the port: the
// gate's own probe, not a stranger, and it goes in microseconds. It is
// waited for, up to probeCopyGone, so that nothing of the gate's is taken
// for a stranger on the port and none keeps the serve from it.
func closeProbe(ln net.Listener, port int) (inodes map[string]int, probe string) {
	probe = socketInode(ln)
	if afterProbe != nil {
		afterProbe(ln)
	}
	ln.Close()
	inodes = listeningSockets(port)
	for deadline := time.Now().Add(probeCopyGone); onlyProbe(inodes, probe) && time.Now().Before(deadline); {
		probeCopyWait()
		inodes = listeningSockets(port)
	}
	if len(inodes) > 1 {
		delete(inodes, probe)
	}
	return inodes, probe
}

// probeCopyGone is how long a copy of a probe of a port, held by a process
// forked while it was open, is waited for to go.
var probeCopyGone = 2 * time.Second

// probeCopyWait is the wait between two looks for the probe's copy.
var probeCopyWait = func() { time.Sleep(time.Millisecond) }

// afterProbe, when set (by tests), is called with a probe of a port
// before it is closed.
var afterProbe func(net.Listener)

// onlyProbe says whether the one socket listening is the probe's.
func onlyProbe(inodes map[string]int, probe string) bool {
	_, ok := inodes[probe]
	return ok && len(inodes) == 1
}

// socketInode is the inode of a listener's socket, as sock_diag and /proc
// name it; "" when it cannot be read.
func socketInode(ln net.Listener) string {
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return ""
	}
	rc, err := tl.SyscallConn()
	if err != nil {
		return ""
	}
	var st unix.Stat_t
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Fstat(int(fd), &st) }); err != nil || serr != nil {
		return ""
	}
	return strconv.FormatUint(st.Ino, 10)
}

// testHookListenerRead runs between the listing of the port's sockets and
// the reading of their holders (tests end the serve there).
var testHookListenerRead = func() {}

func (p *Process) checkListener(port int) error {
	inodes := listeningSockets(port)
	if len(inodes) == 0 {
		return nil
	}
	testHookListenerRead()
	held, unseen := holders(inodes, supervise.PIDs())
	var strangers []Proc
	for _, h := range held {
		if !p.serves(h.PID) {
			strangers = append(strangers, h)
		}
	}
	if len(strangers) > 0 || len(unseen) > 0 {
		return &StrangerError{Port: port, Holders: strangers, Unseen: unseen}
	}
	return nil
}

// serves reports whether pid's sockets are the serve's: it is below the
// supervisor (its parents lead up to it), or in the serve's cgroup (a
// helper that left the serve's own tree, a daemon's double fork, came back
// to the supervisor, and is the serve's still); never the supervisor
// itself, which listens on nothing of the serve's. A holder's parents are
// read, not the whole of /proc: its first reading is the dearest thing
// the check did.
func (p *Process) serves(pid int) bool {
	if pid == p.super {
		return false
	}
	if slices.Contains(cgroupPIDs(p.contain.Cgroup), pid) {
		return true
	}
	// A chain of parents is at most as long as the machine has processes;
	// the bound only guards against a reading that changes under it.
	for range 1 << 16 {
		pr, ok := stat(pid)
		if !ok || pr.PPID <= 0 {
			return false
		}
		if pr.PPID == p.super {
			return true
		}
		pid = pr.PPID
	}
	return false
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
