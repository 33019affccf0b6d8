package serve

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/supervise"
	"golang.org/x/sys/unix"
)

// PollEvery is how often the health paths are asked while the serve starts.
const PollEvery = 10 * time.Millisecond

// Ready says how the serve became ready.
type Ready struct {
	Path string  // the health path that answered 200
	MS   float64 // from start to that answer
}

// NotReadyError is a serve that did not become ready: it exited, or the
// time ran out.
type NotReadyError struct {
	Exited  string // how it exited; "" when the time ran out
	Timeout time.Duration
	Last    map[string]string // the last answer of each health path
}

func (e *NotReadyError) Error() string {
	if e.Exited != "" {
		return fmt.Sprintf("the serve %s before it was ready", e.Exited)
	}
	var seen []string
	for _, p := range slices.Sorted(maps.Keys(e.Last)) {
		seen = append(seen, p+": "+e.Last[p])
	}
	return fmt.Sprintf("the serve was not ready within %v (--ready-timeout); health answered %s", e.Timeout, strings.Join(seen, "; "))
}

// WaitReady asks base+path for each of paths every PollEvery until one
// answers 200. It gives up at once when the serve exits, when timeout passes
// or when ctx ends.
func (p *Process) WaitReady(ctx context.Context, base string, paths []string, timeout time.Duration) (Ready, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// A health request must not outlive the serve: stop it when the serve exits.
	reqCtx, reqCancel := context.WithCancel(ctx)
	defer reqCancel()
	go func() {
		select {
		case <-p.done:
			reqCancel()
		case <-reqCtx.Done():
		}
	}()
	client := &http.Client{Timeout: 2 * time.Second}
	last := map[string]string{}
	tick := time.NewTicker(PollEvery)
	defer tick.Stop()
	for {
		for _, path := range paths {
			status, err := get(reqCtx, client, base+path)
			if status == http.StatusOK {
				return Ready{Path: path, MS: float64(time.Since(p.started)) / float64(time.Millisecond)}, nil
			}
			if err != nil {
				if reqCtx.Err() == nil { // not our own deadline cutting it short
					last[path] = shortErr(err)
				}
			} else {
				last[path] = "HTTP " + strconv.Itoa(status)
			}
		}
		select {
		case <-p.done:
			return Ready{}, &NotReadyError{Exited: p.Exit()}
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				// Exited at the same moment? Say so rather than time out.
				select {
				case <-p.done:
					return Ready{}, &NotReadyError{Exited: p.Exit()}
				default:
				}
				return Ready{}, &NotReadyError{Timeout: timeout, Last: last}
			}
			return Ready{}, ctx.Err()
		case <-tick.C:
		}
	}
}

func get(ctx context.Context, c *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func shortErr(err error) string {
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Err.Error()
	}
	return err.Error()
}

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

// FreeLow is the lowest port FreePort draws.
const FreeLow = 20000

// freeRange is the ports FreePort draws from, [lo, hi), given the kernel's
// ephemeral range as /proc says it ("32768\t60999"); 0, 0 when there is no
// room below it (the kernel's port 0 is asked then).
func freeRange(ephemeral string) (lo, hi int) {
	f := strings.Fields(ephemeral)
	if len(f) != 2 {
		return 0, 0
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low-FreeLow < 1000 {
		return 0, 0
	}
	return FreeLow, low
}

// listenFresh listens on a port drawn from [lo, hi) that nothing has, or on
// the kernel's port 0 when the range is empty.
func listenFresh(lo, hi int) (net.Listener, error) {
	if hi <= lo {
		return net.Listen("tcp", "127.0.0.1:0")
	}
	var err error
	for range 64 {
		var ln net.Listener
		ln, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(lo+rand.IntN(hi-lo))))
		if err == nil {
			return ln, nil
		}
	}
	return nil, fmt.Errorf("no port free in 64 draws from %d-%d: %v", lo, hi-1, err)
}

// givenPorts are the ports FreePort has given in this process: never given
// twice, so two runs of the gate in one process (a test's) never share one
// whatever the kernel or the draw does.
var givenPorts = portSet{m: map[int]bool{}}

type portSet struct {
	mu sync.Mutex
	m  map[int]bool
}

// take marks port given, and says whether it was not given before.
func (s *portSet) take(port int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[port] {
		return false
	}
	s.m[port] = true
	return true
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// PortInUseError is a port something else already listens on.
type PortInUseError struct {
	Port    int
	Holders []Proc
}

func (e *PortInUseError) Error() string {
	return fmt.Sprintf("port %d is in use by %s; stop it or pass --port 0", e.Port, e.who())
}

// who names the holders.
func (e *PortInUseError) who() string {
	if len(e.Holders) == 0 {
		return "another process (not visible in /proc to this user)"
	}
	var hs []string
	for _, h := range e.Holders {
		hs = append(hs, h.String())
	}
	return strings.Join(hs, ", ")
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

// Stranger is a process other than the serve's that listens on its port.
type StrangerError struct {
	Port    int
	Holders []Proc
	// Unseen are the uids of listeners on the port that this user cannot
	// see in /proc: they cannot be told from the serve's, so they are not
	// taken for it.
	Unseen []int
}

func (e *StrangerError) Error() string {
	var hs []string
	for _, h := range e.Holders {
		hs = append(hs, h.String())
	}
	for _, uid := range e.Unseen {
		hs = append(hs, fmt.Sprintf("a process of uid %d that uid %d cannot see in /proc (another user's, or /proc mounted hidepid)", uid, os.Geteuid()))
	}
	return fmt.Sprintf("port %d is answered by %s, not by the serve the gate started; it was not measured: stop it, or pass --port 0", e.Port, strings.Join(hs, ", "))
}

// CheckListener makes sure that what listens on port belongs to the serve's
// tree, so a stale server is never measured in its place. The tree is
// everything below the supervisor, and what is in the serve's cgroup: a
// helper that left the serve's own tree (a daemon's double fork) came back
// to the supervisor, and is the serve's still. Every process this user can
// see is read, not the tree's alone: a process outside the tree that
// shares the serve's listening socket (handed over a unix socket) would
// answer in its place, and is named too.
func (p *Process) CheckListener(port int) error {
	err := p.checkListener(port)
	if err != nil {
		// Read once more: what the first reading saw may have ended as it
		// was read (a serve that died on its first request has closed its
		// socket; a parent reaped between the listing and the walk up from
		// a holder). A stranger still listens.
		err = p.checkListener(port)
	}
	return err
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
