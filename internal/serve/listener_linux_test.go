package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/supervise"
)

// The kernel's answer over sock_diag is the one /proc/net/tcp and tcp6
// give: the same listening sockets, their inodes and owners, on IPv4 and
// IPv6, and nothing for a port nothing listens on.
func TestListeningSocketsFromTheKernel(t *testing.T) {
	ln4, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln4.Close()
	port := ln4.Addr().(*net.TCPAddr).Port
	want := 1
	if ln6, err := net.Listen("tcp6", net.JoinHostPort("::1", strconv.Itoa(port))); err == nil {
		defer ln6.Close()
		want = 2
	} else {
		t.Logf("no IPv6 listener on ::1 (%v): IPv4 only", err)
	}
	// A connection to it: an established socket on the port is no listener.
	c, err := net.Dial("tcp4", ln4.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	diag := map[string]int{}
	if err := listeningInodesDiag(port, diag); err != nil {
		t.Skipf("sock_diag cannot be asked here: %v", err)
	}
	proc := map[string]int{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		listeningInodes(f, port, proc)
	}
	if len(diag) != want || !cmp.Equal(diag, proc) {
		t.Errorf("sock_diag: %v; /proc/net/tcp: %v; want the same %d listening sockets", diag, proc, want)
	}
	for _, uid := range diag {
		if uid != os.Geteuid() {
			t.Errorf("sock_diag: owner uid %d, want this process's %d", uid, os.Geteuid())
		}
	}
	ln4.Close()
	none := map[string]int{}
	if err := listeningInodesDiag(port, none); err != nil || (want == 1 && len(none) != 0) || len(none) > 1 {
		t.Errorf("sock_diag after the IPv4 listener closed: %v, %v", none, err)
	}
}

// A stranger on another address of the serve's port is named, though the
// serve holds its own listening socket there.
func TestCheckListenerNamesAStrangerBesideTheServe(t *testing.T) {
	port := freePort(t)
	p := fake(t, port)
	if _, err := p.WaitReady(context.Background(), base(port), autoPaths, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := p.CheckListener(port); err != nil {
		t.Fatalf("CheckListener() of the serve's own port = %v", err)
	}
	ln, err := net.Listen("tcp6", net.JoinHostPort("::1", strconv.Itoa(port)))
	if err != nil {
		t.Skipf("no IPv6 loopback to listen on beside the serve: %v", err)
	}
	defer ln.Close()
	err = p.CheckListener(port)
	var stranger *StrangerError
	if !errors.As(err, &stranger) || len(stranger.Holders) != 1 || stranger.Holders[0].PID != os.Getpid() {
		t.Fatalf("CheckListener(%d) with this test on [::1]:%d = %v, want this test, alone, named as the stranger", port, port, err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("pid %d (%s", os.Getpid(), os.Args[0])) {
		t.Errorf("the stranger is named by its command line: %v", err)
	}
}

// A process outside the serve's tree that shares the serve's own listening
// socket (taken with pidfd_getfd, as one handed over a unix socket) would
// answer in its place: it is named, though the serve holds the socket too.
func TestCheckListenerNamesAnOutsiderSharingTheSocket(t *testing.T) {
	port := freePort(t)
	p := fake(t, port)
	if _, err := p.WaitReady(context.Background(), base(port), autoPaths, time.Minute); err != nil {
		t.Fatal(err)
	}
	inodes := listeningSockets(port)
	dir := "/proc/" + strconv.Itoa(p.PID()) + "/fd/"
	names, err := readNames(dir)
	if err != nil {
		t.Fatal(err)
	}
	fd := -1
	for _, n := range names {
		target, _ := os.Readlink(dir + n)
		if inode, ok := strings.CutPrefix(target, "socket:["); ok {
			if _, listening := inodes[strings.TrimSuffix(inode, "]")]; listening {
				fd, _ = strconv.Atoi(n)
			}
		}
	}
	if fd < 0 {
		t.Fatalf("the serve (pid %d) holds no listening socket on port %d", p.PID(), port)
	}
	pidfd, err := unix.PidfdOpen(p.PID(), 0)
	if err != nil {
		t.Skipf("pidfd_open: %v", err)
	}
	defer unix.Close(pidfd)
	shared, err := unix.PidfdGetfd(pidfd, fd, 0)
	if err != nil {
		t.Skipf("pidfd_getfd of the serve's socket (needs ptrace rights over it): %v", err)
	}
	defer unix.Close(shared)
	err = p.CheckListener(port)
	var stranger *StrangerError
	if !errors.As(err, &stranger) || len(stranger.Holders) != 1 || stranger.Holders[0].PID != os.Getpid() {
		t.Errorf("CheckListener(%d) with this test sharing the serve's socket = %v, want this test named as the stranger", port, err)
	}
}

// The serve's listener may be any process below the supervisor: a child of
// a child of the serve's shell, or an orphan that came back to the
// supervisor (a daemon's double fork). Its parents are followed up to the
// supervisor; a stranger's never reach it. (In a cgroup, its membership
// would say so alone.)
func TestCheckListenerBelowTheSupervisor(t *testing.T) {
	// No cgroup: its members count as the serve's whatever their parents.
	t.Setenv(supervise.ContainEnv, "descendants")
	for name, shell := range map[string]string{
		"grandchild": `sh -c '"$0" "$@"; :' "$0" "$@" & wait`,
		"orphan":     `("$0" "$@" &); exec sleep 600`,
	} {
		t.Run(name, func(t *testing.T) {
			port := freePort(t)
			log, err := os.Create(filepath.Join(t.TempDir(), "serve.log"))
			if err != nil {
				t.Fatal(err)
			}
			defer log.Close()
			argv := []string{"sh", "-c", shell, os.Args[0], "--port", strconv.Itoa(port)}
			p, err := Start(Options{Argv: argv, Log: log, Env: append(os.Environ(), "FAKELLM=1")})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Stop(time.Second)
			if _, err := p.WaitReady(context.Background(), base(port), autoPaths, time.Minute); err != nil {
				t.Fatal(err)
			}
			holders := Listeners(port)
			if len(holders) != 1 || holders[0].PID == p.PID() {
				t.Fatalf("listeners of port %d: %v; want one, not the serve's shell (pid %d)", port, holders, p.PID())
			}
			if err := p.CheckListener(port); err != nil {
				t.Errorf("CheckListener() of a listener below the supervisor = %v", err)
			}
			if p.serves(os.Getpid()) || p.serves(p.SupervisorPID()) {
				t.Errorf("serves(): this test (pid %d) or the supervisor (pid %d) counted as the serve's", os.Getpid(), p.SupervisorPID())
			}
		})
	}
}

// A serve that dies while the check reads its port (on the first request,
// which the check runs beside) closes its socket between the listing and
// the reading of its holders: that is no stranger, and the check, read
// again, says so.
func TestCheckListenerServeGoneMidRead(t *testing.T) {
	port := freePort(t)
	p := fake(t, port)
	if _, err := p.WaitReady(context.Background(), base(port), autoPaths, time.Minute); err != nil {
		t.Fatal(err)
	}
	first := true
	testHookListenerRead = func() {
		if !first {
			return
		}
		first = false
		syscall.Kill(p.PID(), syscall.SIGKILL)
		for deadline := time.Now().Add(time.Minute); len(listeningSockets(port)) > 0 && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		}
	}
	defer func() { testHookListenerRead = func() {} }()
	if err := p.CheckListener(port); err != nil {
		t.Errorf("CheckListener() of a serve that died as it was read = %v, want nil: its own socket, gone", err)
	}
	if first {
		t.Errorf("the serve was not ended between the listing and the holders")
	}
}
