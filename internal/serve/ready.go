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
