package fakellm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// TestMain runs this test binary as the simulated serve when the tests
// below start it so (FAKELLM_COMMAND=1): `pkg.test.exe --port 0 ...`.
func TestMain(m *testing.M) {
	if os.Getenv("FAKELLM_COMMAND") == "1" {
		os.Exit(Command(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

var procNtResumeProcess = windows.NewLazySystemDLL("ntdll.dll").NewProc("NtResumeProcess")

// serve is a simulated serve started by a test, and its log as it comes.
type serve struct {
	cmd   *exec.Cmd
	lines chan string
	log   []string
}

// startServe starts this binary as the serve with args, in a process group
// of its own; with job, suspended, put in the job, then resumed, so that
// it is in the job before its first instruction runs.
func startServe(t *testing.T, job windows.Handle, extra *syscall.SysProcAttr, args ...string) *serve {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "FAKELLM_COMMAND=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: windows.CREATE_NEW_PROCESS_GROUP}
	if extra != nil {
		cmd.SysProcAttr.AdditionalInheritedHandles = extra.AdditionalInheritedHandles
	}
	if job != 0 {
		cmd.SysProcAttr.CreationFlags |= windows.CREATE_SUSPENDED
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	if job != 0 {
		h, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE|windows.PROCESS_SUSPEND_RESUME, false, uint32(cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		defer windows.CloseHandle(h)
		if err := windows.AssignProcessToJobObject(job, h); err != nil {
			t.Fatalf("AssignProcessToJobObject: %v", err)
		}
		if st, _, _ := procNtResumeProcess.Call(uintptr(h)); st != 0 {
			t.Fatalf("NtResumeProcess: NTSTATUS %#x", st)
		}
	}
	s := &serve{cmd: cmd, lines: make(chan string, 100)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	return s
}

// waitLine waits for a line of the log that matches re and returns its
// submatches; a log that ends first, or a minute without it, fails.
func (s *serve) waitLine(t *testing.T, re string) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.After(time.Minute)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				t.Fatalf("the serve's log ended without %q:\n%s", re, strings.Join(s.log, "\n"))
			}
			s.log = append(s.log, l)
			if m := rx.FindStringSubmatch(l); m != nil {
				return m
			}
		case <-deadline:
			t.Fatalf("no %q in the serve's log in a minute:\n%s", re, strings.Join(s.log, "\n"))
		}
	}
}

// newJob is a kill-on-close job with the limit flags added.
func newJob(t *testing.T, flags uint32) windows.Handle {
	t.Helper()
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	info := windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION{}
	info.BasicLimitInformation.LimitFlags = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE | flags
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation, uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		t.Fatal(err)
	}
	return job
}

// jobPIDs are the pids of the job's processes.
func jobPIDs(t *testing.T, job windows.Handle) []int {
	t.Helper()
	var list struct {
		Assigned, Listed uint32
		IDs              [64]uintptr
	}
	if err := windows.QueryInformationJobObject(job, windows.JobObjectBasicProcessIdList, uintptr(unsafe.Pointer(&list)), uint32(unsafe.Sizeof(list)), nil); err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, id := range list.IDs[:min(list.Listed, 64)] {
		pids = append(pids, int(id))
	}
	return pids
}

// processOf is a handle to wait on pid with.
func processOf(t *testing.T, pid int) windows.Handle {
	t.Helper()
	h, err := windows.OpenProcess(windows.SYNCHRONIZE|windows.PROCESS_TERMINATE|windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		t.Fatalf("pid %d: %v", pid, err)
	}
	t.Cleanup(func() { windows.CloseHandle(h) })
	return h
}

// ended waits up to d for the process of h to end.
func ended(h windows.Handle, d time.Duration) bool {
	ev, _ := windows.WaitForSingleObject(h, uint32(d/time.Millisecond))
	return ev == windows.WAIT_OBJECT_0
}

// TestBreakawayRefused: a serve in a job that does not allow breakaway asks
// for it (--spawn-breakaway): refused, its helper starts in the job, in a
// process group of its own, and ends with the job; the log names its pid.
func TestBreakawayRefused(t *testing.T) {
	job := newJob(t, 0)
	s := startServe(t, job, nil, "--port", "0", "--model", "refused-"+strconv.Itoa(os.Getpid()), "--spawn-breakaway")
	s.waitLine(t, `^fakellm: breaking away from the job refused \(.+\): the helper is started in it$`)
	m := s.waitLine(t, `^fakellm: helper pid (\d+), in a process group of its own, (.+); this serve (.+)$`)
	s.waitLine(t, `^fakellm: listening on `)
	pid, _ := strconv.Atoi(m[1])
	if m[2] != "in a job" || m[3] != "in a job" {
		t.Errorf("the helper %s, the serve %s; want both in a job", m[2], m[3])
	}
	if pids := jobPIDs(t, job); !slices.Contains(pids, pid) || !slices.Contains(pids, s.cmd.Process.Pid) {
		t.Errorf("the job's processes are %v; want the serve %d and its helper %d", pids, s.cmd.Process.Pid, pid)
	}
	helper := processOf(t, pid)
	windows.CloseHandle(job)
	if !ended(helper, 10*time.Second) {
		windows.TerminateProcess(helper, 1)
		t.Errorf("the helper, pid %d, outlived its job's last handle by 10 s", pid)
	}
}

// TestBreakawayAllowed: in a job that allows breakaway
// (JOB_OBJECT_LIMIT_BREAKAWAY_OK) the helper leaves it, and outlives it:
// what a job must not allow.
func TestBreakawayAllowed(t *testing.T) {
	job := newJob(t, windows.JOB_OBJECT_LIMIT_BREAKAWAY_OK)
	s := startServe(t, job, nil, "--port", "0", "--model", "allowed-"+strconv.Itoa(os.Getpid()), "--spawn-breakaway")
	m := s.waitLine(t, `^fakellm: (breaking away|helper pid (\d+), in a process group of its own, (.+); this serve (.+))`)
	if m[1] == "breaking away" {
		t.Fatalf("breakaway refused in a job that allows it: %s", m[0])
	}
	pid, _ := strconv.Atoi(m[2])
	helper := processOf(t, pid)
	defer windows.TerminateProcess(helper, 1)
	if pids := jobPIDs(t, job); slices.Contains(pids, pid) || !slices.Contains(pids, s.cmd.Process.Pid) {
		t.Errorf("the job's processes are %v; want the serve %d and not its helper %d", pids, s.cmd.Process.Pid, pid)
	}
	windows.CloseHandle(job)
	if ended(helper, time.Second) {
		t.Errorf("the helper, pid %d, ended with a job it broke away from", pid)
	}
}

// TestSpawnDetached: --spawn-detached starts its helper, this same program
// as `--helper-of MODEL`, in a process group of its own, and says nothing.
func TestSpawnDetached(t *testing.T) {
	job := newJob(t, 0)
	defer windows.CloseHandle(job)
	s := startServe(t, job, nil, "--port", "0", "--model", "detached", "--spawn-detached")
	s.waitLine(t, `^fakellm: listening on `)
	deadline := time.Now().Add(30 * time.Second)
	for len(jobPIDs(t, job)) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if pids := jobPIDs(t, job); len(pids) != 2 {
		t.Fatalf("the job's processes are %v; want the serve and its helper", pids)
	}
	if slices.ContainsFunc(s.log, func(l string) bool { return strings.Contains(l, "helper pid") }) {
		t.Errorf("--spawn-detached said its helper's pid:\n%s", strings.Join(s.log, "\n"))
	}
}

// TestIgnoreBreak: CTRL_BREAK_EVENT, the polite stop a supervisor sends to
// the serve's process group, stops the serve; with --ignore-term it stops
// it not, and the serve goes on answering.
func TestIgnoreBreak(t *testing.T) {
	// Console control events go to the processes of a console: where this
	// test has none (its output a pipe, under Wine), it makes one, which
	// the serves share.
	if r, _, err := windows.NewLazySystemDLL("kernel32.dll").NewProc("AllocConsole").Call(); r == 0 && !errors.Is(err, windows.ERROR_ACCESS_DENIED) {
		t.Logf("AllocConsole: %v", err)
	}
	plain := startServe(t, 0, nil, "--port", "0")
	ignoring := startServe(t, 0, nil, "--port", "0", "--ignore-term")
	plain.waitLine(t, `^fakellm: listening on `)
	addr := ignoring.waitLine(t, `^fakellm: listening on (.+)$`)[1]
	for _, s := range []*serve{plain, ignoring} {
		if err := windows.GenerateConsoleCtrlEvent(windows.CTRL_BREAK_EVENT, uint32(s.cmd.Process.Pid)); err != nil {
			t.Skipf("no console control event can be sent here (GenerateConsoleCtrlEvent: %v): this test needs a console", err)
		}
	}
	plain.waitLine(t, `^fakellm: stopping$`)
	if err := plain.cmd.Wait(); err != nil {
		t.Errorf("the serve stopped with CTRL_BREAK_EVENT: %v; want exit status 0", err)
	}
	resp, err := http.Get("http://" + addr + "/health")
	if err != nil {
		t.Fatalf("the serve that ignores CTRL_BREAK_EVENT stopped answering: %v\n%s", err, strings.Join(ignoring.log, "\n"))
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the serve that ignores CTRL_BREAK_EVENT: health %d, want 200", resp.StatusCode)
	}
}

// TestUnlockInherited: a serve that inherits a handle of a ticket's file
// and unlocks every file it has open (--unlock-inherited) finds the handle
// and tries npu-hold's byte. On Windows that frees nothing (a byte-range
// lock belongs to the handle and the process that took it: LockFileEx);
// Wine 8 lets the child unlock it, which is why npu-hold's ticket handle
// is never inherited: the test says which it saw.
func TestUnlockInherited(t *testing.T) {
	path := filepath.Join(tempDir(t), "ticket")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := windows.Handle(f.Fd())
	ol := windows.Overlapped{Offset: uint32(ticketByte & 0xffffffff), OffsetHigh: uint32(ticketByte >> 32)}
	if err := windows.LockFileEx(h, windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ol); err != nil {
		t.Fatal(err)
	}
	if err := windows.SetHandleInformation(h, windows.HANDLE_FLAG_INHERIT, windows.HANDLE_FLAG_INHERIT); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, 0, &syscall.SysProcAttr{AdditionalInheritedHandles: []syscall.Handle{syscall.Handle(h)}}, "--port", "0", "--unlock-inherited")
	m := s.waitLine(t, fmt.Sprintf(`^fakellm: (unlocked )?handle %#x \(.*ticket\), bytes %d\+1(: not unlocked: .*)?$`, h, ticketByte))
	n := s.waitLine(t, `^fakellm: (\d+) open file\(s\) unlocked$`)
	if (m[1] != "") != (n[1] == "1") {
		t.Errorf("the serve said %q, then %q", m[0], n[0])
	}
	other, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	err = windows.LockFileEx(windows.Handle(other.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ol)
	switch locked := errors.Is(err, windows.ERROR_LOCK_VIOLATION); {
	case locked && m[1] != "":
		t.Errorf("the serve said it unlocked the ticket's byte, yet it is locked")
	case !locked && m[1] == "":
		t.Errorf("another handle's LockFileEx of the ticket's byte after the serve failed to unlock it: %v; want ERROR_LOCK_VIOLATION (still locked)", err)
	case !locked:
		t.Logf("the serve's inherited handle unlocked its parent's lock (Wine 8 allows it; Windows does not)")
	}
}

// tempDir is a directory removed at the end, file by file: os.RemoveAll
// fails under Wine 8 (its unlinkat asks for what Wine does not implement).
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "fakellm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		names, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, n := range names {
			os.Remove(n)
		}
		os.Remove(dir)
	})
	return dir
}

// TestMapLibrary: --map-library loads the DLL, which the serve's modules
// then name, as a serve's backend library.
func TestMapLibrary(t *testing.T) {
	sys, err := windows.GetSystemDirectory()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(sys, "version.dll"))
	if err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(tempDir(t), "ggml-sim.dll")
	if err := os.WriteFile(lib, src, 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, 0, nil, "--port", "0", "--map-library", lib)
	s.waitLine(t, `^fakellm: mapped .*ggml-sim\.dll$`)
	s.waitLine(t, `^fakellm: listening on `)
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPMODULE, uint32(s.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	defer windows.CloseHandle(snap)
	var names []string
	e := windows.ModuleEntry32{Size: uint32(unsafe.Sizeof(windows.ModuleEntry32{}))}
	for err := windows.Module32First(snap, &e); err == nil; err = windows.Module32Next(snap, &e) {
		names = append(names, strings.ToLower(windows.UTF16ToString(e.Module[:])))
	}
	if !slices.Contains(names, "ggml-sim.dll") {
		t.Errorf("the serve's modules are %v; want ggml-sim.dll among them", names)
	}
}

// TestCloseStdio: --close-stdio closes the serve's standard handles (its
// log pipe ends) and the serve goes on answering.
func TestCloseStdio(t *testing.T) {
	s := startServe(t, 0, nil, "--port", "0", "--close-stdio")
	addr := s.waitLine(t, `^fakellm: listening on (.+)$`)[1]
	s.waitLine(t, `^fakellm: closing stdin, stdout and stderr$`)
	for l := range s.lines {
		s.log = append(s.log, l)
	}
	resp, err := http.Get("http://" + addr + "/health")
	if err != nil {
		t.Fatalf("after closing its standard handles the serve stopped answering: %v\n%s", err, strings.Join(s.log, "\n"))
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("health %d after closing the standard handles, want 200", resp.StatusCode)
	}
}

// TestIgnoreBreakHandler: the handler --ignore-term adds takes
// CTRL_BREAK_EVENT (returns TRUE: no handler after it, Go's included, sees
// it) and passes CTRL_C_EVENT and the console's close on (FALSE), the
// part of TestIgnoreBreak that needs no console.
func TestIgnoreBreakHandler(t *testing.T) {
	for event, want := range map[uintptr]uintptr{windows.CTRL_BREAK_EVENT: 1, windows.CTRL_C_EVENT: 0, windows.CTRL_CLOSE_EVENT: 0} {
		if got, _, _ := syscall.SyscallN(ignoreBreak, event); got != want {
			t.Errorf("the handler's answer to event %d = %d, want %d", event, got, want)
		}
	}
}
