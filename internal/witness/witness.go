// Package witness reads what the serve's own processes show of the route
// while it decodes: the device nodes they hold open (/proc/PID/fd), the
// backend libraries they mapped (/proc/PID/maps), and, where the driver
// exports them, the device engine time and memory of their descriptors
// (the DRM client usage stats in /proc/PID/fdinfo/FD, the kernel's
// Documentation/gpu/drm-usage-stats.rst), or, for NVIDIA's devices, the
// memory nvidia-smi counts per process, for Ascend's the memory npu-smi
// lists per process.
//
// It reads as the gate's own user, with no privilege: the serve's
// processes are the same user's. What cannot be read is said, never
// guessed, and the judge (internal/judge, Witness) then rests on the log.
//
// A sample is taken before the first judged request is written and
// another once the last reply is read, while the serve still runs: engine
// time is the difference, memory the last sample's. Neither sample falls
// inside a timed reply, so the witnesses take nothing from the measured
// rate (BenchmarkSample says what one sample costs).
//
// Everything read is bounded: processes, descriptors and lines of maps a
// process, each cut with a note.
package witness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/vendortool"
)

// Bounds of one sample.
const (
	MaxProcs = 256   // processes of the serve read
	MaxFDs   = 4096  // descriptors of one process looked at
	MaxMaps  = 65536 // lines of one process's maps read
	MaxLine  = 4096  // bytes of a line of fdinfo or maps
	MaxSeen  = 32    // device nodes and libraries kept
	ToolWait = 5 * time.Second
)

// Reader reads the witnesses of a serve's processes.
type Reader struct {
	// Proc is the proc file system's root: "/proc", or a directory laid
	// out like it (tests).
	Proc string
	// Devices are globs of the device nodes of the fast route
	// (/dev/accel/accel*), Libraries globs of its backend libraries' file
	// names (libggml-cann*.so*), as path.Match reads them.
	Devices   []string
	Libraries []string
	// Run runs a vendor's tool and returns its output; nil runs it from
	// Tools. An error wrapping exec.ErrNotFound is a tool not installed.
	Run func(ctx context.Context, name string, args ...string) ([]byte, error)
	// Tools are the vendors' tools, found on PATH before the serve
	// started and run with the serve's allow-listed environment; nil
	// finds them on PATH when one is run.
	Tools *vendortool.Set
	// Alive reports whether a process the proc root does not show still
	// runs (hidden by hidepid, or in another PID namespace); nil takes it
	// to be gone.
	Alive func(pid int) bool
}

// Alive is whether pid runs, asked of the kernel (kill with signal 0):
// another user's process answers EPERM, and runs.
func Alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Sample is what one reading of the serve's processes found.
type Sample struct {
	At        time.Time
	Processes int      // processes read
	Unread    []string // "pid 42: permission denied"
	Hiding    []string // "pid 42": of Unread, those the gate's own user runs (not dumpable)
	Held      []string // device nodes of the classes held open
	Mapped    []string // backend libraries mapped
	Cut       []string // what the bounds left out
	// Clients are the DRM client usage stats of the held descriptors,
	// one a client (an open file description: drm-client-id where the
	// driver gives one).
	Clients map[string]Client
	// Tools is what each vendor tool said of the serve's processes.
	Tools []Tool

	fdinfoBuf []byte
}

// Client is one DRM client's usage stats.
type Client struct {
	EngineNS    int64 // summed over its engines
	Engines     bool  // it has drm-engine-* keys
	MemoryBytes int64 // resident (or total, or the older drm-memory-*) over its regions
	Memory      bool  // it has memory keys
}

// Tool is what a vendor's tool said.
type Tool struct {
	Name        string
	MemoryBytes int64  // the serve's processes' device memory
	Listed      bool   // it listed one of the serve's processes
	Why         string // why it was not read ("not installed"); "" when it was
}

// Sample reads the processes pids (the serve's tree).
func (r *Reader) Sample(ctx context.Context, pids []int) Sample {
	s := Sample{At: time.Now(), Clients: map[string]Client{}}
	if len(pids) > MaxProcs {
		s.Cut = append(s.Cut, fmt.Sprintf("%d of the serve's %d processes read (at most %d)", MaxProcs, len(pids), MaxProcs))
		pids = pids[:MaxProcs]
	}
	held, mapped := map[string]bool{}, map[string]bool{}
	for _, pid := range pids {
		err := r.process(&s, pid, held, mapped)
		switch {
		case err == nil:
			s.Processes++
		case errors.Is(err, fs.ErrNotExist) && (r.Alive == nil || !r.Alive(pid)):
			// gone since the tree was listed
		case errors.Is(err, fs.ErrNotExist):
			s.Unread = append(s.Unread, fmt.Sprintf("pid %d: alive but not in %s (hidepid, or another PID namespace)", pid, r.Proc))
		default:
			s.Unread = append(s.Unread, fmt.Sprintf("pid %d: %s", pid, reason(err)))
			if errors.Is(err, fs.ErrPermission) && r.ownUser(pid) {
				s.Hiding = append(s.Hiding, fmt.Sprintf("pid %d", pid))
			}
		}
	}
	s.Held, s.Mapped = kept(held, &s.Cut, "device nodes"), kept(mapped, &s.Cut, "libraries")
	// NVIDIA's tool only where a process holds one of its nodes: no
	// process computes on an NVIDIA GPU without.
	if len(s.Held) > 0 && r.nvidia() {
		s.Tools = append(s.Tools, r.nvidiaSMI(ctx, pids))
	}
	// Ascend's likewise: a process computes on a chip through its
	// /dev/davinciN.
	if r.asksNPUSMI(s.Held) {
		s.Tools = append(s.Tools, r.npuSMI(ctx, pids))
	}
	return s
}

// process reads one process's descriptors and maps.
func (r *Reader) process(s *Sample, pid int, held, mapped map[string]bool) error {
	dir := filepath.Join(r.Proc, strconv.Itoa(pid))
	fds, err := readDir(filepath.Join(dir, "fd"), MaxFDs)
	if err != nil {
		return err
	}
	if len(fds) > MaxFDs {
		s.Cut = append(s.Cut, fmt.Sprintf("pid %d: %d descriptors looked at (more are open)", pid, MaxFDs))
		fds = fds[:MaxFDs]
	}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join(dir, "fd", fd))
		if err != nil || !r.device(target) {
			continue
		}
		held[target] = true
		r.fdinfo(s, pid, filepath.Join(dir, "fdinfo", fd))
	}
	return r.maps(s, pid, filepath.Join(dir, "maps"), mapped)
}

// ownUser reports whether process pid runs as the gate's own user, every
// user and group id of it the gate's (/proc/PID/status, which anyone may
// read): its descriptors refused are its own doing, not dumpable, as
// another user's, a set-user-id program's or one hidden by hidepid are
// not.
func (r *Reader) ownUser(pid int) bool {
	b, err := os.ReadFile(filepath.Join(r.Proc, strconv.Itoa(pid), "status"))
	if err != nil {
		return false
	}
	want := map[string]int{"Uid:": os.Geteuid(), "Gid:": os.Getegid()}
	seen := 0
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		id, ok := want[firstOf(f)]
		if !ok {
			continue
		}
		if len(f) != 5 {
			return false
		}
		for _, v := range f[1:] {
			if n, err := strconv.Atoi(v); err != nil || n != id {
				return false
			}
		}
		seen++
	}
	return seen == len(want)
}

func firstOf(f []string) string {
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// readDir lists at most n+1 names of a directory, so that a process with
// more descriptors than n is seen to have more.
func readDir(dir string, n int) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(n + 1)
	if err != nil && len(names) == 0 && !errors.Is(err, io.EOF) {
		return nil, err
	}
	slices.SortFunc(names, func(a, b string) int { return atoi(a) - atoi(b) })
	return names, nil
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// device reports whether a descriptor's target is a device node of the
// classes.
func (r *Reader) device(target string) bool {
	for _, g := range r.Devices {
		if ok, _ := path.Match(g, target); ok {
			return true
		}
	}
	return false
}

// library reports whether a mapped file's name is a backend's.
func (r *Reader) library(file string) bool {
	base := path.Base(file)
	for _, g := range r.Libraries {
		if ok, _ := path.Match(g, base); ok {
			return true
		}
	}
	return false
}

// maps reads a process's mapped files, keeping the backends'.
func (r *Reader) maps(s *Sample, pid int, file string, mapped map[string]bool) error {
	if len(r.Libraries) == 0 {
		// Nothing to look for: the process's descriptors were read,
		// which is what being read means.
		return nil
	}
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, MaxLine), MaxLine)
	n := 0
	for sc.Scan() {
		if n++; n > MaxMaps {
			s.Cut = append(s.Cut, fmt.Sprintf("pid %d: %d lines of maps read (more are mapped)", pid, MaxMaps))
			break
		}
		// address perms offset dev inode path: the path is what
		// follows the fifth field, and may hold spaces.
		fields := strings.SplitN(sc.Text(), " ", 6)
		if len(fields) < 6 {
			continue
		}
		p := strings.TrimLeft(fields[5], " ")
		if strings.HasPrefix(p, "/") && r.library(p) {
			mapped[p] = true
		}
	}
	if err := sc.Err(); err != nil && n == 0 {
		return err
	}
	return nil
}

// fdinfo reads the DRM client usage stats of a held descriptor: its
// drm-engine-<engine> times (ns) and its memory, drm-resident-<region>
// where the driver gives it, else drm-total-<region>, else the older
// drm-memory-<region> (sizes in bytes, KiB or MiB). A client shared by
// several descriptors (dup, fork) is counted once, by its drm-client-id.
func (r *Reader) fdinfo(s *Sample, pid int, file string) {
	b, err := readBounded(file, s.buf())
	if err != nil {
		return
	}
	id := fmt.Sprintf("pid %d %s", pid, filepath.Base(file))
	var c Client
	resident, total, legacy := map[string]int64{}, map[string]int64{}, map[string]int64{}
	driver := ""
	for line := range strings.SplitSeq(string(b), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(key, "drm-") {
			continue
		}
		val = strings.TrimSpace(val)
		switch {
		case key == "drm-client-id":
			id = "client " + val
		case key == "drm-driver":
			driver = val
		case strings.HasPrefix(key, "drm-engine-") && !strings.HasPrefix(key, "drm-engine-capacity-"):
			if ns, ok := quantity(val, "ns"); ok {
				c.EngineNS += ns
				c.Engines = true
			}
		case strings.HasPrefix(key, "drm-resident-"):
			resident[key[len("drm-resident-"):]], c.Memory = size(val), true
		case strings.HasPrefix(key, "drm-total-"):
			total[key[len("drm-total-"):]], c.Memory = size(val), true
		case strings.HasPrefix(key, "drm-memory-"):
			legacy[key[len("drm-memory-"):]], c.Memory = size(val), true
		}
	}
	for _, m := range []map[string]int64{resident, total, legacy} {
		if len(m) > 0 {
			for _, v := range m {
				c.MemoryBytes += v
			}
			break
		}
	}
	if c.Engines || c.Memory {
		s.Clients[driver+" "+id] = c
	}
}

// quantity is a number with an optional unit that must be unit.
func quantity(val, unit string) (int64, bool) {
	num, u, _ := strings.Cut(val, " ")
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || (u != "" && u != unit) {
		return 0, false
	}
	return n, true
}

// size is a memory figure of the usage stats: bytes, KiB or MiB.
func size(val string) int64 {
	num, unit, _ := strings.Cut(val, " ")
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	switch unit {
	case "KiB":
		return n << 10
	case "MiB":
		return n << 20
	}
	return n
}

// readBounded reads the start of a file into b: at most len(b) bytes.
func readBounded(file string, b []byte) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	k, err := io.ReadFull(f, b)
	if k == 0 && err != nil {
		return nil, err
	}
	return b[:k], nil
}

// MaxFdinfo is how much of one descriptor's fdinfo is read: the usage
// stats of a client with many engines and memory regions fit many times.
const MaxFdinfo = 16 << 10

// buf is the sample's buffer for one fdinfo, made once.
func (s *Sample) buf() []byte {
	if s.fdinfoBuf == nil {
		s.fdinfoBuf = make([]byte, MaxFdinfo)
	}
	return s.fdinfoBuf
}

// kept is a set's members, sorted, at most MaxSeen.
func kept(set map[string]bool, cut *[]string, what string) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	slices.Sort(out)
	if len(out) > MaxSeen {
		*cut = append(*cut, fmt.Sprintf("%d %s seen, %d kept", len(out), what, MaxSeen))
		out = out[:MaxSeen]
	}
	return out
}

// nvidia reports whether the classes are NVIDIA's device nodes.
func (r *Reader) nvidia() bool {
	return slices.ContainsFunc(r.Devices, func(g string) bool { return strings.HasPrefix(g, "/dev/nvidia") })
}

// nvidiaSMI asks nvidia-smi for the device memory of the serve's
// processes (its compute apps, by pid: the gate's PID namespace must be
// the driver's for them to be found).
func (r *Reader) nvidiaSMI(ctx context.Context, pids []int) Tool {
	t := Tool{Name: "nvidia-smi"}
	ctx, cancel := context.WithTimeout(ctx, ToolWait)
	defer cancel()
	out, err := r.run(ctx, "nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits")
	if err != nil {
		t.Why = reason(err)
		return t
	}
	ours := map[int]bool{}
	for _, p := range pids {
		ours[p] = true
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		pidText, mib, ok := strings.Cut(line, ",")
		if !ok {
			continue
		}
		pid, err1 := strconv.Atoi(strings.TrimSpace(pidText))
		m, err2 := strconv.ParseInt(strings.TrimSpace(mib), 10, 64)
		if err1 == nil && err2 == nil && ours[pid] && m >= 0 {
			t.Listed = true
			t.MemoryBytes += m << 20
		}
	}
	return t
}

// MaxToolOutput is how much of a vendor tool's output is read.
const MaxToolOutput = 1 << 20

// run runs a vendor's tool of r.Tools in a process group of its own, and
// returns what it printed. It never waits past ctx: a tool that does not
// answer in time is killed with everything it started (a child of its
// own holding its output open would otherwise keep the gate waiting for
// as long as it lives), one that prints more than MaxToolOutput is killed
// at once, and one that exits leaving a process of its own running is an
// error, the process killed.
func (r *Reader) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	if r.Run != nil {
		return r.Run(ctx, name, args...)
	}
	tool, err := r.Tools.Look(name)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := tool.Command(ctx, args...)
	// As internal/energy runs the same tools for power: its own group,
	// killed whole, gone with the gate.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// After the tool exits (or is killed), what still holds its output
	// has this long to let go.
	cmd.WaitDelay = 100 * time.Millisecond
	out := &capped{max: MaxToolOutput, over: cancel}
	cmd.Stdout = out
	err = cmd.Run()
	left := false
	if cmd.Process != nil {
		left = killGroup(cmd.Process.Pid)
	}
	switch {
	case out.cut:
		return nil, fmt.Errorf("printed more than %d MiB: not read", MaxToolOutput>>20)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil, fmt.Errorf("did not answer in time (at most %s): killed", ToolWait)
	case left:
		return nil, errors.New("left a process of its own running (killed): not read")
	case err != nil:
		return nil, err
	}
	return out.b, nil
}

// killGroup kills what is left of a tool's process group once the tool
// is reaped (its pid, the group's id, is not taken again while the group
// has a member), and reaps what of it came back to the gate, a child
// subreaper, for a second at most (a process in the driver's
// uninterruptible sleep dies when it leaves it). It reports whether a
// process of the group was left running: a zombie the gate holds is
// reaped first, and is none.
func killGroup(pgid int) bool {
	reapGroup(pgid)
	if syscall.Kill(-pgid, syscall.SIGKILL) != nil {
		return false
	}
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline) && !reapGroup(pgid); time.Sleep(5 * time.Millisecond) {
	}
	return true
}

// reapGroup reaps the gate's exited children of group pgid, and reports
// whether none of the group is the gate's child any more (ECHILD).
func reapGroup(pgid int) bool {
	for {
		pid, err := syscall.Wait4(-pgid, nil, syscall.WNOHANG, nil)
		if err != nil {
			return true
		}
		if pid == 0 {
			return false // one runs still
		}
	}
}

// capped keeps at most max bytes, and calls over once more come.
type capped struct {
	b    []byte
	max  int
	cut  bool
	over func()
}

func (c *capped) Write(p []byte) (int, error) {
	if len(c.b)+len(p) > c.max {
		c.cut = true
		c.over()
		return 0, errors.New("too much output")
	}
	c.b = append(c.b, p...)
	return len(p), nil
}

// reason says why something could not be read, in a few words.
func reason(err error) string {
	var pe *fs.PathError
	switch {
	case errors.Is(err, exec.ErrNotFound):
		return "not installed (not on PATH)"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	case errors.As(err, &pe):
		return pe.Err.Error()
	}
	return err.Error()
}

// Witness is the judge's record of a first and a last sample, taken
// before and after the judged replies. binary says the preset's route is
// the device or nothing.
func (r *Reader) Witness(first, last Sample, binary bool) route.Witness {
	w := route.Witness{Devices: r.Devices, Libraries: r.Libraries, Binary: binary, Processes: max(first.Processes, last.Processes)}
	w.Held = union(first.Held, last.Held)
	w.Mapped = union(first.Mapped, last.Mapped)
	w.Unread = union(first.Unread, last.Unread)
	w.Hiding = union(first.Hiding, last.Hiding)
	if cut := union(first.Cut, last.Cut); len(cut) > 0 {
		w.Cut = strings.Join(cut, "; ")
	}
	if w.Processes == 0 {
		w.NotRead = "no process of the serve could be read"
		if len(w.Unread) > 0 {
			w.NotRead += ": " + strings.Join(w.Unread, ", ")
		}
		return w
	}
	if len(w.Held) > 0 {
		w.Usage, w.NoUsage = fdinfoUsage(first, last, w.Usage, w.NoUsage)
	}
	for _, t := range last.Tools {
		if t.Why != "" {
			w.NoUsage = append(w.NoUsage, t.Name+": "+t.Why)
			continue
		}
		w.Usage = append(w.Usage, route.Usage{Source: t.Name, MemoryBytes: t.MemoryBytes})
	}
	return w
}

// fdinfoUsage is the engine time the held descriptors' clients used
// between the samples, and their memory at the last.
func fdinfoUsage(first, last Sample, usage []route.Usage, none []string) ([]route.Usage, []string) {
	if len(last.Clients) == 0 {
		return usage, append(none, "fdinfo: the held devices' descriptors have no DRM client usage stats (drm-engine-*, drm-resident-*, drm-total-*): the driver exports none")
	}
	u := route.Usage{Source: "fdinfo"}
	engines := false
	for id, c := range last.Clients {
		if c.Engines {
			engines = true
			u.EngineNS += max(c.EngineNS-first.Clients[id].EngineNS, 0)
		}
		u.MemoryBytes += c.MemoryBytes
	}
	if engines {
		u.SpanNS = last.At.Sub(first.At).Nanoseconds()
	}
	return append(usage, u), none
}

// union is the sorted members of a and b.
func union(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

// containerRuntimes start a serve in a container whose processes are the
// container runtime's daemon's children, not the command's: the gate's
// tree holds only the client.
var containerRuntimes = []string{"docker", "podman", "nerdctl", "kubectl", "ctr", "crictl"}

// Outside says why the serve's processes are outside the tree the gate
// holds, when its command is a container runtime's client ("" when not).
func Outside(argv []string) string {
	for _, w := range argv {
		if base := filepath.Base(w); slices.Contains(containerRuntimes, base) {
			return "the serve runs in a container through " + base + ": its processes are the runtime's, not in the tree the gate holds"
		}
		if !strings.HasPrefix(w, "-") && !strings.Contains(w, "=") && filepath.Base(w) != "env" && filepath.Base(w) != "npu-hold" {
			// the first word that is a command, not env's or npu-hold's
			// own: the serve's executable
			break
		}
	}
	return ""
}
