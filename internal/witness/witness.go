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
// Everything read is bounded: the processes, the lines of maps a process,
// and a sample's time (SampleWait), the descriptors of every process read
// before any maps. What a bound leaves unread is cut with a note, and the
// judge reads it as not witnessed, never as nothing held; unless the serve
// caused the cut by a size past any healthy serve's (Excess), which is
// its own doing and keeps no PASS.
package witness

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
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
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/quote"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/vendortool"
)

// Bounds of one sample.
const (
	MaxProcs = 4096  // processes of the serve read
	MaxMaps  = 65536 // lines of one process's maps read (the kernel's default vm.max_map_count is 65530)
	MaxLine  = 4096  // bytes of a line of maps kept: of a longer one, its start and its end (the file's name)
	MaxSeen  = 32    // device nodes and libraries kept
	// MaxLibrary is the largest executable mapping of a backend weighed
	// (its pages looked up in pagemap): a backend's code is tens to
	// hundreds of MiB (libcuda's some 30 MiB).
	MaxLibrary = 4 << 30
	// SampleWait is the most one sample reads for: what is left then is
	// cut, and said (64 processes that map a file 60,000 times each took
	// 5 s to read whole on a 2-core machine, BenchmarkSampleFlood).
	SampleWait = 2 * time.Second
	ToolWait   = 5 * time.Second
)

// What a healthy serve has in all, with room to spare: llama.cpp's
// server is one process of some 100 to 400 descriptors and a few thousand
// lines of maps, Ollama a server and a runner of as many, vLLM a dozen
// Python processes of some 10,000 lines of maps each. A sample whose time
// ran out having read more than any of these (or a bound's cut: processes
// past MaxProcs, a process's maps past MaxMaps, a backend's mapping past
// MaxLibrary) was cut by the serve's own size, and says so (Excess).
const (
	HealthyProcs = 1024    // the serve's processes (known whole before any is read)
	HealthyFds   = 16384   // descriptors over the serve's processes
	HealthyMaps  = 262144  // lines of maps over the serve's processes
	HealthyPages = 1 << 22 // pages of backends' mappings looked up (16 GiB of 4 KiB pages)
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
	// CharDevice says which character device a path is, following links
	// (/proc/PID/fd/FD is the file the descriptor holds): its device
	// numbers, ok false for anything else. nil is CharDevice; a tree laid
	// out like /proc (tests) says what /proc and /dev would.
	CharDevice func(name string) (rdev uint64, ok bool)
	// Wait bounds one sample's reading of the processes: SampleWait
	// where 0.
	Wait time.Duration
	// Modules lists the files a process has loaded, where the OS has no
	// proc file system to read (Windows: LoadedModules); set, it is read
	// in place of Proc. Adapters reads the kernel's per-process
	// statistics of the GPU and NPU adapters along with it: nil is the
	// OS's (SystemAdapters). See loaded.go.
	Modules  func(pid int) ([]string, error)
	Adapters Adapters
}

// Sample is what one reading of the serve's processes found.
type Sample struct {
	At        time.Time
	Processes int      // processes read, descriptors and maps
	Unread    []string // "pid 42: permission denied"
	Hiding    []string // "pid 42": of Unread, those of the gate's own real user and group (not dumpable)
	Held      []string // device nodes of the classes held open
	Mapped    []string // backend libraries mapped
	Cut       []string // what the bounds left out
	// Excess says where the serve is past any healthy serve's size, so
	// that what a bound left unread is its own doing.
	Excess []string
	// Clients are the DRM client usage stats of the held descriptors,
	// one a client (an open file description: drm-client-id where the
	// driver gives one).
	Clients map[string]Client
	// Tools is what each vendor tool said of the serve's processes.
	Tools []Tool
	// Kernel is the adapters' per-process statistics (D3DKMT), one a
	// process and adapter, where the modules were read (Modules);
	// KernelWhy says why they were not read.
	Kernel    map[string]Client
	KernelWhy string

	fdinfoBuf []byte
	mapsBuf   *bufio.Reader
	// what was read: descriptors, lines of maps, pages of backends'
	// mappings looked up in pagemap
	fds, lines, pages int
	procs             int // the serve's processes, read or not
	// holds is, for each process whose descriptors were all read,
	// whether it holds a device node of the classes.
	holds map[int]bool
	nodes map[string]uint64 // the gate's own /dev's nodes, by path, as looked at
}

// Client is one DRM client's usage stats.
type Client struct {
	EngineNS    int64 // summed over its engines
	Engines     bool  // it has drm-engine-* keys
	MemoryBytes int64 // resident (or total, or the older drm-memory-*) over its regions
	Memory      bool  // it has memory keys
	PID         int   // the process whose descriptor it was read from
}

// Tool is what a vendor's tool said.
type Tool struct {
	Name        string
	MemoryBytes int64  // the serve's processes' device memory
	Listed      bool   // it listed one of the serve's processes
	Why         string // why it was not read ("not installed"); "" when it was
	// Procs is the device memory it listed for each of the serve's
	// processes; Account says its table was read and lists some
	// process, so that one of the serve's it does not list holds none.
	Procs   map[int]int64
	Account bool
}

// errSampleWait is why a sample stopped when its time ran out.
var errSampleWait = errors.New("the sample's time ran out")

// Sample reads the processes pids (the serve's tree): every process's
// descriptors first (a link each, cheap), then their maps, so that a
// device held is seen however long the maps take. It reads for at most
// Wait, and stops when ctx is done: what is left is cut, and said.
func (r *Reader) Sample(ctx context.Context, pids []int) Sample {
	if r.Modules != nil || noProc {
		return r.sampleLoaded(ctx, pids)
	}
	s := Sample{At: time.Now(), Clients: map[string]Client{}, procs: len(pids)}
	if len(pids) > MaxProcs {
		s.Cut = append(s.Cut, fmt.Sprintf("%d of the serve's %d processes read (at most %d)", MaxProcs, len(pids), MaxProcs))
		s.Excess = append(s.Excess, fmt.Sprintf("%d processes, where a healthy serve has a few", len(pids)))
		pids = pids[:MaxProcs]
	}
	wait := cmp.Or(r.Wait, SampleWait)
	rctx, cancel := context.WithTimeoutCause(ctx, wait, fmt.Errorf("%w (at most %s)", errSampleWait, wait))
	defer cancel()
	held, mapped := map[string]bool{}, map[string]bool{}
	var read []int
	for i, pid := range pids {
		if rctx.Err() != nil {
			s.Cut = append(s.Cut, fmt.Sprintf("the descriptors of %d of the serve's %d processes read: %s", i, len(pids), stopped(rctx)))
			break
		}
		if err := r.descriptors(rctx, &s, pid, held); err != nil {
			r.unread(&s, pid, err)
			continue
		}
		read = append(read, pid)
	}
	for i, pid := range read {
		if len(r.Libraries) > 0 && rctx.Err() != nil {
			s.Cut = append(s.Cut, fmt.Sprintf("the maps of %d of the serve's %d processes read: %s", i, len(pids), stopped(rctx)))
			break
		}
		if err := r.maps(rctx, &s, pid, mapped); err != nil {
			r.unread(&s, pid, err)
			continue
		}
		s.Processes++
	}
	if errors.Is(context.Cause(rctx), errSampleWait) {
		if past := s.past(); past != "" {
			s.Excess = append(s.Excess, past)
		}
	}
	s.Held, s.Mapped = kept(held, &s.Cut, "device nodes"), kept(mapped, &s.Cut, "libraries")
	// NVIDIA's tool only where a process holds one of its nodes: no
	// process computes on an NVIDIA GPU without.
	if len(s.Held) > 0 && r.nvidia() {
		s.Tools = append(s.Tools, r.nvidiaSMI(ctx, pids, s.holds))
	}
	// Ascend's likewise: a process computes on a chip through its
	// /dev/davinciN.
	if r.asksNPUSMI(s.Held) {
		s.Tools = append(s.Tools, r.npuSMI(ctx, pids))
	}
	return s
}

// past says what the sample read past a healthy serve's whole, "" when
// nothing.
func (s *Sample) past() string {
	if s.procs <= HealthyProcs && s.fds <= HealthyFds && s.lines <= HealthyMaps && s.pages <= HealthyPages {
		return ""
	}
	return fmt.Sprintf("%d processes, and %d descriptors, %d lines of maps and %d pages of backends' mappings read before the sample's time ran out, where a healthy serve has at most %d, %d, %d and %d in all",
		s.procs, s.fds, s.lines, s.pages, HealthyProcs, HealthyFds, HealthyMaps, HealthyPages)
}

// stopped says why a sample stopped reading.
func stopped(ctx context.Context) string {
	switch c := context.Cause(ctx); {
	case errors.Is(c, errSampleWait):
		return c.Error()
	case errors.Is(c, context.DeadlineExceeded):
		return "the run's time ran out"
	}
	return "the run was cancelled"
}

// unread records why process pid could not be read: gone since the tree
// was listed, hidden, or refused.
func (r *Reader) unread(s *Sample, pid int, err error) {
	switch {
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

// fdChunk is how many descriptors are listed at a time.
const fdChunk = 256

// descriptors looks at every descriptor of a process, keeping the device
// nodes of the classes it holds.
func (r *Reader) descriptors(ctx context.Context, s *Sample, pid int, held map[string]bool) error {
	dir := filepath.Join(r.Proc, strconv.Itoa(pid))
	f, err := os.Open(filepath.Join(dir, "fd"))
	if err != nil {
		return err
	}
	defer f.Close()
	holds := false
	for n := 0; ; {
		if ctx.Err() != nil {
			s.Cut = append(s.Cut, fmt.Sprintf("pid %d: %d descriptors looked at, more may be open: %s", pid, n, stopped(ctx)))
			return nil
		}
		fds, err := f.Readdirnames(fdChunk)
		s.fds += len(fds)
		for _, fd := range fds {
			link := filepath.Join(dir, "fd", fd)
			target, err := os.Readlink(link)
			if err != nil || !r.device(target) || !r.node(s, link, target) {
				continue
			}
			held[target] = true
			holds = true
			r.fdinfo(s, pid, filepath.Join(dir, "fdinfo", fd))
		}
		n += len(fds)
		switch {
		case errors.Is(err, io.EOF):
			if s.holds == nil {
				s.holds = map[int]bool{}
			}
			s.holds[pid] = holds
			return nil
		case err != nil && n == 0:
			return err
		case err != nil:
			s.Cut = append(s.Cut, fmt.Sprintf("pid %d: %d descriptors looked at, then %s", pid, n, reason(err)))
			return nil
		}
	}
}

// node reports whether the descriptor link holds the character device
// the gate's own /dev has at target, the name it holds it by: a file of
// that name in a mount namespace of the serve's own, or another device
// put there, is none of the class.
func (r *Reader) node(s *Sample, link, target string) bool {
	stat := r.CharDevice
	if stat == nil {
		stat = CharDevice
	}
	rdev, ok := stat(link)
	if !ok {
		return false
	}
	if s.nodes == nil {
		s.nodes = map[string]uint64{}
	}
	want, seen := s.nodes[target]
	if !seen {
		if want, ok = stat(target); !ok {
			want = ^uint64(0) // none: no device has these numbers
		}
		s.nodes[target] = want
	}
	return rdev == want
}

// ownUser reports whether process pid is the gate's own user's, its real
// user and group ids the gate's (/proc/PID/status, which anyone may
// read): its descriptors refused are its own doing, not dumpable (it
// said so, or runs an executable this user cannot read, or a set-id
// program, which changes the effective ids and not the real), as another
// user's or one hidden by hidepid are not.
func (r *Reader) ownUser(pid int) bool {
	b, err := os.ReadFile(filepath.Join(r.Proc, strconv.Itoa(pid), "status"))
	if err != nil {
		return false
	}
	want := map[string]int{"Uid:": os.Getuid(), "Gid:": os.Getgid()}
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
		if n, err := strconv.Atoi(f[1]); err != nil || n != id {
			return false
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

// mapsBufSize is the read buffer of maps: a few reads a thousand lines.
const mapsBufSize = 64 << 10

// maps reads a process's maps, keeping the backends it maps: an
// executable mapping of a file named like a backend that holds a page of
// the file (an empty file has none to hold).
func (r *Reader) maps(ctx context.Context, s *Sample, pid int, mapped map[string]bool) error {
	if len(r.Libraries) == 0 {
		// Nothing to look for: the process's descriptors were read,
		// which is what being read means.
		return nil
	}
	dir := filepath.Join(r.Proc, strconv.Itoa(pid))
	f, err := os.Open(filepath.Join(dir, "maps"))
	if err != nil {
		return err
	}
	defer f.Close()
	if s.mapsBuf == nil {
		s.mapsBuf = bufio.NewReaderSize(f, mapsBufSize)
	}
	br := s.mapsBuf
	br.Reset(f)
	pm := &pagemap{file: filepath.Join(dir, "pagemap")}
	defer func() { s.pages += pm.pages; pm.close() }()
	var line []byte
	for n := 0; ; {
		line, err = readLine(br, line[:0])
		if len(line) > 0 {
			if n++; n > MaxMaps {
				s.Cut = append(s.Cut, fmt.Sprintf("pid %d: %d lines of maps read (more are mapped)", pid, MaxMaps))
				s.Excess = append(s.Excess, fmt.Sprintf("pid %d: more than %d lines of maps, past the kernel's default vm.max_map_count (65530)", pid, MaxMaps))
				return nil
			}
			s.lines++
			if n%256 == 0 && ctx.Err() != nil {
				s.Cut = append(s.Cut, fmt.Sprintf("pid %d: %d lines of maps read, more may be mapped: %s", pid, n-1, stopped(ctx)))
				return nil
			}
			if p, ok := r.backend(ctx, line, pm, mapped); ok {
				mapped[p] = true
			}
			if pm.huge != "" && !pm.hugeSaid {
				pm.hugeSaid = true
				s.Excess = append(s.Excess, fmt.Sprintf("pid %d: %s", pid, pm.huge))
			}
			if pm.err != nil && !pm.said {
				pm.said = true
				if ctx.Err() != nil {
					s.Cut = append(s.Cut, fmt.Sprintf("pid %d: %d lines of maps read, more may be mapped: %s", pid, n, stopped(ctx)))
					return nil
				}
				s.Cut = append(s.Cut, fmt.Sprintf("pid %d: its mappings of backends not weighed: pagemap: %s", pid, reason(pm.err)))
			}
		}
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil && n == 0:
			return err
		case err != nil:
			s.Cut = append(s.Cut, fmt.Sprintf("pid %d: %d lines of maps read, then %s", pid, n, reason(err)))
			return nil
		}
	}
}

// backend is the file a line of maps maps, when it is a backend's
// mapping: executable, of a file named like one, holding a page of it.
func (r *Reader) backend(ctx context.Context, line []byte, pm *pagemap, mapped map[string]bool) (string, bool) {
	// address perms offset dev inode path: the path is what follows
	// the fifth field, and may hold spaces.
	fields := bytes.SplitN(line, []byte(" "), 6)
	if len(fields) < 6 || len(fields[1]) < 3 || fields[1][2] != 'x' {
		return "", false
	}
	p := strings.TrimLeft(string(fields[5]), " ")
	if !strings.HasPrefix(p, "/") || mapped[p] || !r.library(p) {
		return "", false
	}
	from, to, ok := strings.Cut(string(fields[0]), "-")
	start, err1 := strconv.ParseUint(from, 16, 64)
	end, err2 := strconv.ParseUint(to, 16, 64)
	if !ok || err1 != nil || err2 != nil || end < start {
		return "", false
	}
	if end-start > MaxLibrary {
		// Not weighed: looking up its pages would take the sample's
		// time, and no library's code is near that size.
		pm.huge = fmt.Sprintf("an executable mapping of %d GiB named like a backend (%s): no library's code is near that size (at most %d GiB weighed)",
			(end-start)>>30, quote.Cut(p, 120), MaxLibrary>>30)
		return "", false
	}
	return p, pm.holds(ctx, start, end)
}

// readLine reads a line of maps into line, without its newline. Of a
// line longer than MaxLine it keeps the first and the last MaxLine/2
// bytes, joined by "…": the fields and the path's start, and its end,
// the file's name.
func readLine(br *bufio.Reader, line []byte) ([]byte, error) {
	const half = MaxLine / 2
	long := false
	for {
		b, err := br.ReadSlice('\n')
		if err == nil {
			b = b[:len(b)-1]
		}
		line = append(line, b...)
		if len(line) > MaxLine {
			long = true
			line = line[:half+copy(line[half:], line[len(line)-half:])]
		}
		if err != bufio.ErrBufferFull {
			if long {
				line = slices.Insert(line, half, []byte("…")...)
			}
			return line, err
		}
	}
}

// pagemap is a process's /proc/PID/pagemap, opened at the first mapping
// weighed: 8 bytes a page of its address space, bit 63 set where the page
// is present, bit 62 where it is swapped out.
type pagemap struct {
	file string
	f    *os.File
	buf  []byte
	err  error // why it could not be read; then no mapping is weighed
	said bool
	// pages is how many pages were looked up.
	pages int
	// huge says the first mapping too large to weigh.
	huge     string
	hugeSaid bool
}

// holds reports whether the mapping from start to end holds a page,
// present or swapped out: a file mapped holds none of an empty file (a
// page past a file's end cannot be faulted in), and some of a library
// whose code runs.
func (pm *pagemap) holds(ctx context.Context, start, end uint64) bool {
	if pm.err != nil {
		return false
	}
	if pm.f == nil {
		if pm.f, pm.err = os.Open(pm.file); pm.err != nil {
			return false
		}
		pm.buf = make([]byte, 8*512)
	}
	page := uint64(os.Getpagesize())
	for at, last := start/page, end/page; at < last; {
		k := min(last-at, uint64(len(pm.buf)/8))
		n, err := pm.f.ReadAt(pm.buf[:8*k], int64(at*8))
		pm.pages += n / 8
		for i := 0; i+8 <= n; i += 8 {
			if binary.NativeEndian.Uint64(pm.buf[i:])>>62 != 0 {
				return true
			}
		}
		switch {
		case errors.Is(err, io.EOF):
			return false
		case err != nil:
			pm.err = err
			return false
		case ctx.Err() != nil:
			pm.err = context.Cause(ctx)
			return false
		}
		at += k
	}
	return false
}

func (pm *pagemap) close() {
	if pm.f != nil {
		pm.f.Close()
	}
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
	c := Client{PID: pid}
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

// size is a memory figure of the usage stats: bytes, KiB or MiB. One
// past route.MaxMemoryBytes is that bound and one more (not believed),
// never a shift that overflows.
func size(val string) int64 {
	num, unit, _ := strings.Cut(val, " ")
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	shift := 0
	switch unit {
	case "KiB":
		shift = 10
	case "MiB":
		shift = 20
	}
	if n > route.MaxMemoryBytes>>shift {
		return route.MaxMemoryBytes + 1
	}
	return n << shift
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
// the driver's for them to be found). holds is, for the processes whose
// descriptors were all read, whether each holds a device node of the
// classes (nil where none are read, as on Windows): a row for one that
// holds none is no process of the serve's computing (none computes on an
// NVIDIA GPU without its node), but another PID namespace's pid that is
// the same number, and the table is not believed.
func (r *Reader) nvidiaSMI(ctx context.Context, pids []int, holds map[int]bool) Tool {
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
		if err1 != nil || err2 != nil || pid <= 0 || m < 0 || m > maxMiB {
			continue
		}
		t.Account = true // it lists processes: one it does not list holds none
		if h, read := holds[pid]; ours[pid] && read && !h {
			return Tool{Name: t.Name, Why: fmt.Sprintf("lists pid %d, a process of the serve that holds no device node of the fast route's classes: its table's pids are another PID namespace's: not believed", pid)}
		}
		if ours[pid] {
			t.Listed = true
			t.MemoryBytes += m << 20
			t.addProc(pid, m<<20)
		}
	}
	if t.Listed {
		t.pastDevice(r.nvidiaSize(ctx), "GPUs", "memory.total")
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
	toolGroup(cmd)
	// After the tool exits (or is killed), what still holds its output
	// has this long to let go.
	cmd.WaitDelay = 100 * time.Millisecond
	out := &capped{max: MaxToolOutput, over: cancel}
	cmd.Stdout = out
	err = cmd.Run()
	left := toolLeft(cmd)
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
	w.Excess = union(first.Excess, last.Excess)
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
	w.Usage, w.NoUsage = kernelUsage(first, last, w.Usage, w.NoUsage)
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
