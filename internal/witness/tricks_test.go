//go:build !windows

package witness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The witnesses read real processes here: each test builds the situation
// a serve on the CPU could make to pass for one on the device, or a
// healthy serve that a bound would otherwise misread.

// started runs cmd and waits (10 s at most) until ready says its process
// is what the test needs; it is killed and reaped at the end.
func started(t *testing.T, cmd *exec.Cmd, ready func(pid int) bool) int {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	for deadline := time.Now().Add(10 * time.Second); !ready(pid); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not ready in 10 s", strings.Join(cmd.Args, " "))
		}
	}
	return pid
}

// execed is whether process pid runs the executable exe.
func execed(exe string) func(pid int) bool {
	return func(pid int) bool {
		got, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		return err == nil && got == exe
	}
}

// copyFile copies src to dst, executable.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// sleepBinary is sleep(1)'s executable.
func sleepBinary(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep")
	}
	p, err = filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// longDir makes a directory under dir whose path is n bytes long.
func longDir(t *testing.T, dir string, n int) string {
	t.Helper()
	for len(dir)+1+200 < n {
		dir = filepath.Join(dir, strings.Repeat("d", 199))
	}
	dir = filepath.Join(dir, strings.Repeat("e", n-len(dir)-1))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestLongPaths: a serve run from a binary at a path of about 4 KB has a
// line of maps longer than a line's bound; the process is read all the
// same, and a backend mapped from such a path is still seen by its name.
func TestLongPaths(t *testing.T) {
	dir := longDir(t, t.TempDir(), 4060)
	bin := filepath.Join(dir, "sleep")
	copyFile(t, sleepBinary(t), bin)
	pid := started(t, exec.Command(bin, "60"), execed(bin))
	r := &Reader{Proc: "/proc", Wait: time.Minute, Devices: []string{"/dev/accel/accel*"}, Libraries: []string{"libggml-cuda*.so*"}}
	s := r.Sample(context.Background(), []int{pid})
	if s.Processes != 1 || len(s.Unread) != 0 || len(s.Cut) != 0 {
		t.Errorf("Sample of a binary at a %d-byte path: %d processes, unread %q, cut %q; want 1, none, none", len(bin), s.Processes, s.Unread, s.Cut)
	}

	lib := filepath.Join(dir, "libggml-cuda.so")
	if err := os.WriteFile(lib, []byte("\x7fELF"), 0o644); err != nil {
		t.Fatal(err)
	}
	unmap := mapExec(t, lib, true)
	defer unmap()
	s = r.Sample(context.Background(), []int{os.Getpid()})
	if len(s.Mapped) != 1 || !strings.HasSuffix(s.Mapped[0], "/libggml-cuda.so") || !strings.HasPrefix(s.Mapped[0], dir[:100]) {
		t.Errorf("Sample of a backend mapped from a %d-byte path: mapped %q, unread %q, cut %q; want it, its path's start and end", len(lib), s.Mapped, s.Unread, s.Cut)
	}
}

// mapExec maps a page of a file executable and private, as the dynamic
// loader maps a library's code, and, if run, populated, as running the
// code faults it in.
func mapExec(t testing.TB, file string, run bool) (unmap func()) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flags := syscall.MAP_PRIVATE
	if run {
		flags |= syscall.MAP_POPULATE
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, os.Getpagesize(), syscall.PROT_READ|syscall.PROT_EXEC, flags)
	if err != nil {
		t.Skipf("mapping %s executable: %v (a noexec mount?)", file, err)
	}
	return func() { syscall.Munmap(b) }
}

// TestBackendMappings: a backend counts only as an executable mapping of
// a non-empty file. An empty file named like a backend, mapped and then
// deleted, is none; nor is a backend's file mapped as data.
func TestBackendMappings(t *testing.T) {
	dir := t.TempDir()
	lib := func(name, text string) string {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name, "libggml-cuda.so")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	empty, data, code := lib("empty", ""), lib("data", "\x7fELF"), lib("code", "\x7fELF")
	defer mapExec(t, empty, false)()
	unmapData, err := mapFile(data)
	if err != nil {
		t.Fatal(err)
	}
	defer unmapData()
	defer mapExec(t, code, true)()
	for _, f := range []string{empty, code} {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	r := &Reader{Proc: "/proc", Wait: time.Minute, Devices: []string{"/dev/accel/accel*"}, Libraries: []string{"libggml-cuda*.so*"}}
	s := r.Sample(context.Background(), []int{os.Getpid()})
	if diff := cmp.Diff([]string{code + " (deleted)"}, s.Mapped); diff != "" {
		t.Errorf("Mapped (-want +got):\n%s", diff)
	}
}

// TestPrivateMountNamespace: a regular file at /dev/accel/accel0 in a
// mount namespace of the serve's own (user and mount namespaces, which an
// ordinary user may make) is no device node held.
func TestPrivateMountNamespace(t *testing.T) {
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare (util-linux)")
	}
	cmd := exec.Command("unshare", "-Urm", "sh", "-c", "mount -t tmpfs tmpfs /dev && mkdir /dev/accel && : >/dev/accel/accel0 && exec 3</dev/accel/accel0 && echo ready && exec sleep 60")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	pid := started(t, cmd, func(int) bool { return true })
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		cmd.Wait()
		t.Skipf("user and mount namespaces refused: %v: %s", err, stderr.String())
	}
	r := &Reader{Proc: "/proc", Wait: time.Minute, Devices: []string{"/dev/accel/accel*"}}
	s := r.Sample(context.Background(), []int{pid})
	if s.Processes != 1 || len(s.Held) != 0 {
		t.Errorf("Sample of a process holding a regular file at /dev/accel/accel0: %d processes, held %q; want 1, none", s.Processes, s.Held)
	}
}

// TestDescriptorPastTheBound: a device held at a descriptor numbered past
// thousands of others open is seen.
func TestDescriptorPastTheBound(t *testing.T) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur < 4300 {
		t.Skipf("at most %d descriptors open (RLIMIT_NOFILE)", rl.Cur)
	}
	for range 4200 {
		f, err := os.Open("/dev/null")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
	}
	dev, err := os.Open("/dev/full")
	if err != nil {
		t.Skip(err)
	}
	defer dev.Close()
	r := &Reader{Proc: "/proc", Wait: time.Minute, Devices: []string{"/dev/full"}}
	s := r.Sample(context.Background(), []int{os.Getpid()})
	if diff := cmp.Diff([]string{"/dev/full"}, s.Held); diff != "" || len(s.Cut) != 0 {
		t.Errorf("Held of a device at descriptor %d (-want +got):\n%s; cut %q", dev.Fd(), diff, s.Cut)
	}
}

// TestSampleCancelled: a sample whose run is cancelled reads nothing
// more, and says so.
func TestSampleCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := &Reader{Proc: "/proc", Wait: time.Minute, Devices: []string{"/dev/full"}}
	s := r.Sample(ctx, []int{os.Getpid(), os.Getppid()})
	want := []string{"the descriptors of 0 of the serve's 2 processes read: the run was cancelled"}
	if diff := cmp.Diff(want, s.Cut); diff != "" || s.Processes != 0 {
		t.Errorf("Cut (-want +got):\n%s; %d processes read", diff, s.Processes)
	}
}

// TestRootSetGroupIDChild: a serve's child that runs a set-group-id
// program is not dumpable, its descriptors refused to the gate's user;
// its real user and group are the gate's, so it is the serve's own
// process hiding them. Root makes the program (a copy of sleep, group
// root, set-group-id), and runs this test's binary as uid 65534 to read
// it.
func TestRootSetGroupIDChild(t *testing.T) {
	if prog := os.Getenv("WITNESS_SETGID_PROGRAM"); prog != "" {
		setGroupIDChild(t, prog)
		return
	}
	if uid := os.Geteuid(); uid != 0 {
		t.Skipf("makes a set-group-id program (chown, chmod g+s) and runs as uid 65534: needs root, and uid %d is not; run as root: go test -run '^TestRoot' ./internal/witness", uid)
	}
	dir, err := os.MkdirTemp("", "witness-setgid")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(dir, "sleep")
	copyFile(t, sleepBinary(t), prog)
	if err := os.Chown(prog, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(prog, 0o755|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	test := filepath.Join(dir, "witness.test")
	copyFile(t, self, test)
	cmd := exec.Command(test, "-test.run=^TestRootSetGroupIDChild$", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "WITNESS_SETGID_PROGRAM="+prog, "TMPDIR="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestRootSetGroupIDChild") {
		t.Errorf("as uid 65534: %v\n%s", err, out)
	}
}

// setGroupIDChild starts the set-group-id program as this process's
// child, and reads it.
func setGroupIDChild(t *testing.T, prog string) {
	egid := func(pid int) string {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		for line := range strings.SplitSeq(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 5 && f[0] == "Gid:" {
				return f[2]
			}
		}
		return ""
	}
	pid := started(t, exec.Command(prog, "60"), func(pid int) bool { return execed(prog)(pid) || egid(pid) == "0" })
	if egid(pid) != "0" {
		t.Skipf("the set-group-id program runs with effective gid %q, not 0: a nosuid mount?", egid(pid))
	}
	r := &Reader{Proc: "/proc", Wait: time.Minute, Devices: []string{"/dev/accel/accel*"}, Alive: Alive}
	s := r.Sample(context.Background(), []int{pid})
	want := []string{"pid " + strconv.Itoa(pid)}
	if diff := cmp.Diff(want, s.Hiding); diff != "" {
		t.Errorf("Hiding (-want +got):\n%s; unread %q", diff, s.Unread)
	}
}

// TestHelperFlood is not a test: run with WITNESS_FLOOD=N, it maps a file
// N times (each mapping apart), says "ready" and waits for its input to
// close, a process of the flood BenchmarkSampleFlood reads.
func TestHelperFlood(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv("WITNESS_FLOOD"))
	if err != nil {
		t.Skip("a helper process of BenchmarkSampleFlood")
	}
	f, err := os.CreateTemp("", "flood")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	f.WriteString("x")
	for range n {
		if _, err := syscall.Mmap(int(f.Fd()), 0, 1, syscall.PROT_READ, syscall.MAP_SHARED); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
}

// TestHugeBackendMapping: an empty file named like a backend, mapped
// executable a TiB long (address space only: it costs the serve nothing),
// would have the pagemap read for 268 million pages, past the sample's
// time, and the cut read as not witnessed. No library's code is near that
// size: the mapping is not weighed, and is said to be the serve's own
// excess.
func TestHugeBackendMapping(t *testing.T) {
	lib := filepath.Join(t.TempDir(), "libggml-cuda.so")
	f, err := os.Create(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := syscall.Mmap(int(f.Fd()), 0, 1<<40, syscall.PROT_READ|syscall.PROT_EXEC, syscall.MAP_PRIVATE|syscall.MAP_NORESERVE)
	if err != nil {
		t.Skipf("mapping a TiB of %s executable: %v", lib, err)
	}
	defer syscall.Munmap(b)
	r := &Reader{Proc: "/proc", Wait: 300 * time.Millisecond, Devices: []string{"/dev/accel/accel*"}, Libraries: []string{"libggml-cuda*.so*"}}
	s := r.Sample(context.Background(), []int{os.Getpid()})
	want := []string{fmt.Sprintf("pid %d: an executable mapping of 1024 GiB named like a backend (%q): no library's code is near that size (at most %d GiB weighed)", os.Getpid(), lib, MaxLibrary>>30)}
	if diff := cmp.Diff(want, s.Excess); diff != "" || len(s.Mapped) != 0 || s.Processes != 1 {
		t.Errorf("Excess of a TiB mapped executable (-want +got):\n%s; mapped %q, %d processes, cut %q", diff, s.Mapped, s.Processes, s.Cut)
	}
}

// TestBoundDeviceAtTheName: a real character device the serve may open
// (/dev/null) bound at /dev/accel/accel0 in a mount namespace of its own
// is no device of the class: its numbers are not those of the node the
// gate's /dev has at that name, nor is there one (no NPU on this box).
func TestBoundDeviceAtTheName(t *testing.T) {
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare (util-linux)")
	}
	if _, ok := CharDevice("/dev/accel/accel0"); ok {
		t.Skip("this box has /dev/accel/accel0")
	}
	keep := filepath.Join(t.TempDir(), "null")
	if err := os.WriteFile(keep, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", "-Urm", "sh", "-c", "mount --bind /dev/null "+keep+" && mount -t tmpfs tmpfs /dev && mkdir /dev/accel && : >/dev/accel/accel0 && mount --bind "+keep+" /dev/accel/accel0 && exec 3</dev/accel/accel0 && echo ready && exec sleep 60")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	pid := started(t, cmd, func(int) bool { return true })
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		cmd.Wait()
		t.Skipf("user and mount namespaces refused: %v: %s", err, stderr.String())
	}
	fd3 := fmt.Sprintf("/proc/%d/fd/3", pid)
	name, _ := os.Readlink(fd3)
	rdev, ok := CharDevice(fd3)
	null, _ := CharDevice("/dev/null")
	if name != "/dev/accel/accel0" || !ok || rdev != null {
		t.Fatalf("descriptor 3 holds %q, a character device %v numbered %#x; want /dev/accel/accel0, /dev/null's %#x", name, ok, rdev, null)
	}
	r := &Reader{Proc: "/proc", Wait: time.Minute, Devices: []string{"/dev/accel/accel*"}}
	s := r.Sample(context.Background(), []int{pid})
	if s.Processes != 1 || len(s.Held) != 0 {
		t.Errorf("Sample of a process holding /dev/null bound at /dev/accel/accel0: %d processes, held %q; want 1, none", s.Processes, s.Held)
	}
	// Where the gate's /dev has /dev/null's numbers at the name, it is held.
	r.CharDevice = func(name string) (uint64, bool) {
		if name == "/dev/accel/accel0" {
			return null, true
		}
		return CharDevice(name)
	}
	if s := r.Sample(context.Background(), []int{pid}); len(s.Held) != 1 {
		t.Errorf("Sample where the gate's /dev/accel/accel0 is /dev/null's numbers: held %q; want it", s.Held)
	}
}
