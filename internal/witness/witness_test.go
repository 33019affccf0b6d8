//go:build !windows

package witness

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
)

// fakeProc lays out a process under root as /proc shows it: fds maps a
// descriptor number to its target, fdinfo a descriptor to its text, maps
// the process's maps.
type fakeProc struct {
	fds    map[int]string
	fdinfo map[int]string
	maps   string
}

func writeProc(t *testing.T, root string, pid int, p fakeProc) {
	t.Helper()
	dir := filepath.Join(root, strconv.Itoa(pid))
	for _, d := range []string{"fd", "fdinfo"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for fd, target := range p.fds {
		if err := os.Symlink(target, filepath.Join(dir, "fd", strconv.Itoa(fd))); err != nil {
			t.Fatal(err)
		}
	}
	for fd, text := range p.fdinfo {
		if err := os.WriteFile(filepath.Join(dir, "fdinfo", strconv.Itoa(fd)), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "maps"), []byte(p.maps), 0o644); err != nil {
		t.Fatal(err)
	}
	// mapsLine's first page present, the rest of the address space not
	f, err := os.Create(filepath.Join(dir, "pagemap"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(binary.NativeEndian.AppendUint64(nil, 1<<63), 0x7f0000000000/int64(os.Getpagesize())*8); err != nil {
		t.Fatal(err)
	}
}

// devices is a CharDevice for a tree laid out like /proc: every path
// under /dev is a character device numbered by its name, and a
// descriptor's link the device its target names, except where is says
// which path a name truly is (another device's, or "" for no device).
func devices(is map[string]string) func(string) (uint64, bool) {
	return func(name string) (uint64, bool) {
		if p, ok := is[name]; ok {
			name = p
		} else if target, err := os.Readlink(name); err == nil {
			name = target
		}
		if !strings.HasPrefix(name, "/dev/") {
			return 0, false
		}
		h := fnv.New64a()
		h.Write([]byte(name))
		return h.Sum64(), true
	}
}

func mapsLine(path string) string {
	return "7f0000000000-7f0000100000 r-xp 00000000 08:01 1234                       " + path + "\n"
}

// amdxdna's fdinfo (drivers/accel/amdxdna) carries the common keys.
func usage(client int, engineNS int64, resident string) string {
	return fmt.Sprintf("pos:\t0\nflags:\t02100002\nmnt_id:\t25\nino:\t1\ndrm-driver:\tamdxdna_accel_driver\ndrm-client-id:\t%d\ndrm-engine-npu-amdxdna:\t%d ns\ndrm-total-memory:\t%s\ndrm-resident-memory:\t%s\n",
		client, engineNS, "9 MiB", resident)
}

func npuReader(root string) *Reader {
	return &Reader{Proc: root, Devices: []string{"/dev/accel/accel*"}, Libraries: []string{"libggml-cann*.so*", "libxrt_coreutil.so*"},
		Run: func(context.Context, string, ...string) ([]byte, error) { return nil, exec.ErrNotFound }, CharDevice: devices(nil),
		Wait: time.Minute} // no test rests on the machine's speed
}

func TestSample(t *testing.T) {
	root := t.TempDir()
	writeProc(t, root, 10, fakeProc{
		fds:    map[int]string{0: "/dev/null", 1: "pipe:[77]", 7: "/dev/accel/accel0", 8: "/dev/dri/renderD128"},
		fdinfo: map[int]string{7: usage(4, 1000, "2 MiB")},
		maps:   mapsLine("/usr/lib/libc.so.6") + mapsLine("/opt/xrt/lib/libxrt_coreutil.so.2") + "7f00-7f01 rw-p 00000000 00:00 0 \n" + mapsLine("/opt/my lib/libggml-cann.so (deleted)"),
	})
	// a child sharing the same client (forked): counted once
	writeProc(t, root, 11, fakeProc{fds: map[int]string{3: "/dev/accel/accel0"}, fdinfo: map[int]string{3: usage(4, 1000, "2 MiB")}, maps: mapsLine("/usr/lib/libc.so.6")})
	r := npuReader(root)
	s := r.Sample(context.Background(), []int{10, 11, 99}) // 99 has gone
	if s.Processes != 2 || len(s.Unread) != 0 || len(s.Cut) != 0 {
		t.Errorf("Sample: %d processes, unread %q, cut %q; want 2, none, none", s.Processes, s.Unread, s.Cut)
	}
	if diff := cmp.Diff([]string{"/dev/accel/accel0"}, s.Held); diff != "" {
		t.Errorf("Held (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/opt/my lib/libggml-cann.so (deleted)", "/opt/xrt/lib/libxrt_coreutil.so.2"}, s.Mapped); diff != "" {
		t.Errorf("Mapped (-want +got):\n%s", diff)
	}
	want := map[string]Client{"amdxdna_accel_driver client 4": {EngineNS: 1000, Engines: true, MemoryBytes: 2 << 20, Memory: true, PID: 11}}
	if diff := cmp.Diff(want, s.Clients); diff != "" {
		t.Errorf("Clients (-want +got):\n%s", diff)
	}
}

// TestHeldNodes: a descriptor counts as a device of the classes held only
// where it holds the character device the gate's own /dev has at the name
// it holds it by: not a file of that name in a mount namespace of the
// serve's own, nor another device put there, nor a name the gate's /dev
// has no device at.
func TestHeldNodes(t *testing.T) {
	root := t.TempDir()
	writeProc(t, root, 10, fakeProc{fds: map[int]string{3: "/dev/accel/accel0", 4: "/dev/accel/accel1", 5: "/dev/accel/accel2", 6: "/dev/accel/accel3", 7: "/dev/accel/accel2"}})
	r := npuReader(root)
	r.CharDevice = devices(map[string]string{
		filepath.Join(root, "10", "fd", "3"): "/dev/null", // another device bound at the name
		filepath.Join(root, "10", "fd", "4"): "",          // a regular file of the name
		"/dev/accel/accel3":                  "",          // no device at the name in the gate's /dev
		filepath.Join(root, "10", "fd", "7"): "/dev/accel/accel2",
	})
	s := r.Sample(context.Background(), []int{10})
	if diff := cmp.Diff([]string{"/dev/accel/accel2"}, s.Held); diff != "" || s.Processes != 1 {
		t.Errorf("Held (-want +got):\n%s; %d processes", diff, s.Processes)
	}
}

func TestFdinfoKeys(t *testing.T) {
	tests := []struct {
		name string
		text string
		want map[string]Client
	}{
		{"no usage keys (a driver without stats)", "pos:\t0\nflags:\t02\ndrm-driver:\tqaic\n", map[string]Client{}},
		{"total when no resident", "drm-driver:\tivpu\ndrm-client-id:\t9\ndrm-total-system:\t4 KiB\ndrm-total-vram:\t1 MiB\n",
			map[string]Client{"ivpu client 9": {MemoryBytes: 4<<10 + 1<<20, Memory: true, PID: 5}}},
		{"the older drm-memory, in bytes", "drm-driver:\tx\ndrm-memory-vram:\t512\n", map[string]Client{"x pid 5 3": {MemoryBytes: 512, Memory: true, PID: 5}}},
		{"engines summed; capacity and bad values left out", "drm-driver:\ti915\ndrm-client-id:\t1\ndrm-engine-render:\t10 ns\ndrm-engine-copy:\t5 ns\ndrm-engine-capacity-render:\t2\ndrm-engine-video:\t-4 ns\ndrm-engine-x:\t7 ms\n",
			map[string]Client{"i915 client 1": {EngineNS: 15, Engines: true, PID: 5}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeProc(t, root, 5, fakeProc{fds: map[int]string{3: "/dev/accel/accel1"}, fdinfo: map[int]string{3: tc.text}})
			s := npuReader(root).Sample(context.Background(), []int{5})
			if diff := cmp.Diff(tc.want, s.Clients); diff != "" {
				t.Errorf("Clients (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWitnessOfTwoSamples(t *testing.T) {
	root := t.TempDir()
	writeProc(t, root, 10, fakeProc{fds: map[int]string{7: "/dev/accel/accel0"}, fdinfo: map[int]string{7: usage(4, 1_000_000_000, "1 MiB")}})
	r := npuReader(root)
	first := r.Sample(context.Background(), []int{10})
	os.WriteFile(filepath.Join(root, "10", "fdinfo", "7"), []byte(usage(4, 2_900_000_000, "3 MiB")), 0o644)
	last := r.Sample(context.Background(), []int{10})
	last.At = first.At.Add(2100 * time.Millisecond)
	got := r.Witness(first, last, true)
	want := route.Witness{Devices: r.Devices, Libraries: r.Libraries, Binary: true, Processes: 1,
		Held:  []string{"/dev/accel/accel0"},
		Usage: []route.Usage{{Source: "fdinfo", EngineNS: 1_900_000_000, SpanNS: 2_100_000_000, MemoryBytes: 3 << 20}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Witness (-want +got):\n%s", diff)
	}
}

func TestWitnessNotRead(t *testing.T) {
	r := npuReader(t.TempDir())
	s := r.Sample(context.Background(), []int{10})
	w := r.Witness(s, s, false)
	if w.NotRead != "no process of the serve could be read" {
		t.Errorf("Witness of no process: NotRead %q", w.NotRead)
	}
}

func TestWitnessNoStats(t *testing.T) {
	root := t.TempDir()
	writeProc(t, root, 10, fakeProc{fds: map[int]string{7: "/dev/accel/accel0"}, fdinfo: map[int]string{7: "pos:\t0\n"}})
	r := npuReader(root)
	s := r.Sample(context.Background(), []int{10})
	w := r.Witness(s, s, false)
	want := []string{"fdinfo: the held devices' descriptors have no DRM client usage stats (drm-engine-*, drm-resident-*, drm-total-*): the driver exports none"}
	if diff := cmp.Diff(want, w.NoUsage); diff != "" || w.Usage != nil {
		t.Errorf("NoUsage (-want +got):\n%s; Usage %v", diff, w.Usage)
	}
}

func TestNvidiaSMI(t *testing.T) {
	root := t.TempDir()
	writeProc(t, root, 10, fakeProc{fds: map[int]string{7: "/dev/nvidia0"}, fdinfo: map[int]string{7: "pos:\t0\n"}})
	tests := []struct {
		name  string
		out   string
		err   error
		usage []route.Usage
		none  []string
		// the GPUs' size is asked only where the serve's pid is listed
		sized bool
	}{
		{"the serve's pid listed", "10, 1024\n77, 5\n", nil, []route.Usage{{Source: "nvidia-smi", MemoryBytes: 1024 << 20}}, nil, true},
		{"not listed", "77, 5\ngarbage\n", nil, []route.Usage{{Source: "nvidia-smi"}}, nil, false},
		{"not installed", "", exec.ErrNotFound, nil, []string{"nvidia-smi: not installed (not on PATH)"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var asked []string
			r := &Reader{Proc: root, Devices: []string{"/dev/nvidia[0-9]*"}, CharDevice: devices(nil), Run: func(_ context.Context, name string, args ...string) ([]byte, error) {
				asked = append(asked, name+" "+strings.Join(args, " "))
				return []byte(tc.out), tc.err
			}}
			s := r.Sample(context.Background(), []int{10})
			w := r.Witness(s, s, false)
			want := []string{"nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits"}
			if tc.sized {
				want = append(want, "nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits")
			}
			if diff := cmp.Diff(want, asked); diff != "" {
				t.Errorf("asked (-want +got):\n%s", diff)
			}
			// the fdinfo without stats is said first
			if diff := cmp.Diff(tc.usage, w.Usage); diff != "" {
				t.Errorf("Usage (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(append([]string{"fdinfo: the held devices' descriptors have no DRM client usage stats (drm-engine-*, drm-resident-*, drm-total-*): the driver exports none"}, tc.none...), w.NoUsage); diff != "" {
				t.Errorf("NoUsage (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBounds(t *testing.T) {
	root := t.TempDir()
	fds := map[int]string{}
	for i := range MaxSeen + 5 {
		fds[i] = fmt.Sprintf("/dev/accel/accel%d", i)
	}
	var maps strings.Builder
	for i := range MaxMaps + 1 {
		if i < MaxSeen+5 {
			maps.WriteString(mapsLine(fmt.Sprintf("/lib/libggml-cann.so.%d", i)))
		} else {
			maps.WriteString("7f0000000000-7f0000100000 r--p 00000000 08:01 1234 /lib/libggml-cann.so.data\n")
		}
	}
	writeProc(t, root, 10, fakeProc{fds: fds, maps: maps.String()})
	r := npuReader(root)
	pids := make([]int, MaxProcs+1)
	pids[0] = 10
	for i := 1; i < len(pids); i++ {
		pids[i] = 100000 + i // gone
	}
	s := r.Sample(context.Background(), pids)
	want := []string{
		fmt.Sprintf("%d of the serve's %d processes read (at most %d)", MaxProcs, MaxProcs+1, MaxProcs),
		fmt.Sprintf("pid 10: %d lines of maps read (more are mapped)", MaxMaps),
		fmt.Sprintf("%d device nodes seen, %d kept", MaxSeen+5, MaxSeen),
		fmt.Sprintf("%d libraries seen, %d kept", MaxSeen+5, MaxSeen),
	}
	if diff := cmp.Diff(want, s.Cut); diff != "" {
		t.Errorf("Cut (-want +got):\n%s", diff)
	}
	if len(s.Held) != MaxSeen || len(s.Mapped) != MaxSeen {
		t.Errorf("kept %d held, %d mapped; want %d each", len(s.Held), len(s.Mapped), MaxSeen)
	}
	// Past the bounds is past any healthy serve: the serve's own doing.
	excess := []string{
		fmt.Sprintf("%d processes, where a healthy serve has a few", MaxProcs+1),
		fmt.Sprintf("pid 10: more than %d lines of maps, past the kernel's default vm.max_map_count (65530)", MaxMaps),
	}
	if diff := cmp.Diff(excess, s.Excess); diff != "" {
		t.Errorf("Excess (-want +got):\n%s", diff)
	}
	if w := r.Witness(Sample{}, s, false); !slices.Equal(w.Excess, excess) {
		t.Errorf("Witness's Excess = %q, want %q", w.Excess, excess)
	}

	// At the bounds, nothing past.
	pids = pids[:MaxProcs]
	root = t.TempDir()
	r = npuReader(root)
	writeProc(t, root, 10, fakeProc{maps: strings.Repeat("7f0000000000-7f0000100000 r--p 00000000 08:01 1234 /lib/x.so\n", MaxMaps)})
	if s := r.Sample(context.Background(), pids); len(s.Excess) != 0 || len(s.Cut) != 0 {
		t.Errorf("Sample of %d processes, %d lines of maps: excess %q, cut %q; want none", len(pids), MaxMaps, s.Excess, s.Cut)
	}
}

// TestPast: a sample whose time ran out is past a healthy serve's whole
// when it read more descriptors, lines of maps or pages of backends than
// a healthy serve has in all; at the figures exactly it is not.
func TestPast(t *testing.T) {
	at := Sample{procs: HealthyProcs, fds: HealthyFds, lines: HealthyMaps, pages: HealthyPages}
	if got := at.past(); got != "" {
		t.Errorf("past() at the healthy figures = %q, want none", got)
	}
	for _, s := range []Sample{
		{procs: HealthyProcs + 1},
		{fds: HealthyFds + 1},
		{lines: HealthyMaps + 1},
		{pages: HealthyPages + 1},
	} {
		want := fmt.Sprintf("%d processes, and %d descriptors, %d lines of maps and %d pages of backends' mappings read before the sample's time ran out, where a healthy serve has at most 1024, 16384, 262144 and 4194304 in all", s.procs, s.fds, s.lines, s.pages)
		if got := s.past(); got != want {
			t.Errorf("past() = %q, want %q", got, want)
		}
	}
	if HealthyProcs != 1024 || HealthyFds != 16384 || HealthyMaps != 262144 || HealthyPages != 1<<22 || MaxLibrary != 4<<30 {
		t.Errorf("healthy figures %d, %d, %d, %d, library %d: the docs say 1024, 16384, 262144, 4194304 and 4 GiB", HealthyProcs, HealthyFds, HealthyMaps, HealthyPages, MaxLibrary)
	}
}

// TestMapsLongLine: a line of maps over the bound (a file at a long path)
// is no end to the process's maps: the lines after it are read, and a
// backend at a long path is seen by its name, the path's start and end
// kept, however long (here past the read buffer).
func TestMapsLongLine(t *testing.T) {
	root := t.TempDir()
	long := "/opt/" + strings.Repeat("d", 5000) + "/libc.so.6"
	longer := "/opt/" + strings.Repeat("e", 3*mapsBufSize) + "/libggml-cann.so.2"
	writeProc(t, root, 10, fakeProc{maps: mapsLine("/usr/lib/libc.so.6") + mapsLine(long) + mapsLine("/opt/lib/libggml-cann.so") + mapsLine(longer)})
	s := npuReader(root).Sample(context.Background(), []int{10})
	if s.Processes != 1 || len(s.Cut) != 0 || len(s.Mapped) != 2 || s.Mapped[1] != "/opt/lib/libggml-cann.so" {
		t.Fatalf("Sample: %d processes, cut %q, mapped %.80q; want 1, none, 2", s.Processes, s.Cut, s.Mapped)
	}
	got := s.Mapped[0]
	if !strings.HasPrefix(got, "/opt/eee") || !strings.HasSuffix(got, "eee/libggml-cann.so.2") || strings.Count(got, "…") != 1 || len(got) > MaxLine {
		t.Errorf("a backend at a %d-byte path: mapped as %d bytes, %.40q…%.40q; want its start and end, joined by one …", len(longer), len(got), got, got[len(got)-40:])
	}
}

// TestCutShort: a process's descriptors or maps read in part (the run
// cancelled, the sample's time run out) say so.
func TestCutShort(t *testing.T) {
	root := t.TempDir()
	var maps strings.Builder
	for range 300 {
		maps.WriteString(mapsLine("/usr/lib/libc.so.6"))
	}
	writeProc(t, root, 10, fakeProc{fds: map[int]string{3: "/dev/accel/accel0"}, maps: maps.String()})
	r := npuReader(root)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var s Sample
	if err := r.descriptors(ctx, &s, 10, map[string]bool{}); err != nil {
		t.Fatal(err)
	}
	if err := r.maps(ctx, &s, 10, map[string]bool{}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"pid 10: 0 descriptors looked at, more may be open: the run was cancelled",
		"pid 10: 255 lines of maps read, more may be mapped: the run was cancelled",
	}
	if diff := cmp.Diff(want, s.Cut); diff != "" {
		t.Errorf("Cut (-want +got):\n%s", diff)
	}

	r.Wait = -1 // already past
	s = r.Sample(context.Background(), []int{10})
	want = []string{"the descriptors of 0 of the serve's 1 processes read: the sample's time ran out (at most -1ns)"}
	if diff := cmp.Diff(want, s.Cut); diff != "" || s.Processes != 0 {
		t.Errorf("Cut of a sample out of time (-want +got):\n%s; %d processes", diff, s.Processes)
	}
	if len(s.Excess) != 0 {
		t.Errorf("Excess of a serve of 1 process out of time = %q, want none: the machine's doing", s.Excess)
	}

	// Out of time with more processes than a healthy serve has: the
	// serve's own doing; the run cancelled is not.
	pids := make([]int, HealthyProcs+1)
	for i := range pids {
		pids[i] = 10
	}
	s = r.Sample(context.Background(), pids)
	excess := []string{"1025 processes, and 0 descriptors, 0 lines of maps and 0 pages of backends' mappings read before the sample's time ran out, where a healthy serve has at most 1024, 16384, 262144 and 4194304 in all"}
	if diff := cmp.Diff(excess, s.Excess); diff != "" {
		t.Errorf("Excess of %d processes out of time (-want +got):\n%s", len(pids), diff)
	}
	r.Wait = time.Minute
	if s := r.Sample(ctx, pids); len(s.Excess) != 0 || len(s.Cut) != 1 {
		t.Errorf("Sample of %d processes, the run cancelled: excess %q, cut %q; want none, the cancellation", len(pids), s.Excess, s.Cut)
	}
}

// TestOwnProcess reads the test's own process through the real /proc: it
// holds a file it opened as a "device" and maps a file named like a
// backend library.
func TestOwnProcess(t *testing.T) {
	dir := t.TempDir()
	dev := filepath.Join(dir, "accel0")
	lib := filepath.Join(dir, "libggml-cann.so")
	for _, f := range []string{dev, lib} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	defer mapExec(t, lib, true)()
	r := &Reader{Proc: "/proc", Devices: []string{dev}, Libraries: []string{"libggml-cann*.so*"}, Wait: time.Minute, CharDevice: func(name string) (uint64, bool) {
		st, err := os.Stat(name) // the file opened stands for a device
		return 1, err == nil && os.SameFile(st, must(os.Stat(dev)))
	}}
	s := r.Sample(context.Background(), []int{os.Getpid()})
	if s.Processes != 1 || !cmp.Equal(s.Held, []string{dev}) || !cmp.Equal(s.Mapped, []string{lib}) {
		t.Errorf("Sample of this process = %d processes, held %q, mapped %q; want 1, %q, %q", s.Processes, s.Held, s.Mapped, dev, lib)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// mapFile maps the first byte of a file, readable, as data is mapped.
func mapFile(file string) (unmap func(), err error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := syscall.Mmap(int(f.Fd()), 0, 1, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	return func() { syscall.Munmap(b) }, nil
}

// TestHidden: a process of the serve's tree that the proc root does not
// show, yet runs (hidepid, another user's), is unread, never taken to be
// gone; one that has gone is passed over.
func TestHidden(t *testing.T) {
	r := npuReader(t.TempDir())
	r.Alive = func(pid int) bool { return pid == 7 }
	s := r.Sample(context.Background(), []int{7, 8})
	want := []string{"pid 7: alive but not in " + r.Proc + " (hidepid, or another PID namespace)"}
	if diff := cmp.Diff(want, s.Unread); diff != "" || s.Processes != 0 {
		t.Errorf("Unread (-want +got):\n%s; %d processes", diff, s.Processes)
	}
	w := r.Witness(s, s, false)
	if w.NotRead != "no process of the serve could be read: "+want[0] {
		t.Errorf("NotRead = %q", w.NotRead)
	}
	if !Alive(os.Getpid()) || Alive(1<<22+1) {
		t.Errorf("Alive(self) = %v, Alive(a pid past pid_max) = %v", Alive(os.Getpid()), Alive(1<<22+1))
	}
}

// TestRefused: a process whose descriptors are refused is unread, with
// the reason.
func TestRefused(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads any directory: run as an ordinary user")
	}
	root := t.TempDir()
	writeProc(t, root, 10, fakeProc{fds: map[int]string{3: "/dev/accel/accel0"}})
	os.Chmod(filepath.Join(root, "10", "fd"), 0)
	defer os.Chmod(filepath.Join(root, "10", "fd"), 0o755)
	s := npuReader(root).Sample(context.Background(), []int{10})
	if diff := cmp.Diff([]string{"pid 10: permission denied"}, s.Unread); diff != "" {
		t.Errorf("Unread (-want +got):\n%s", diff)
	}
}

func TestOutside(t *testing.T) {
	for argv, want := range map[string]bool{
		"docker run --device /dev/accel ovms":      true,
		"/usr/bin/podman run -it img":              true,
		"env A=1 docker run img":                   true,
		"npu-hold -- docker run img":               true,
		"llama-server -m docker":                   false,
		"env OLLAMA_HOST=127.0.0.1:1 ollama serve": false,
		"/opt/docker-tools/llama-server --port 1":  false,
	} {
		got := Outside(strings.Fields(argv))
		if (got != "") != want {
			t.Errorf("Outside(%s) = %q, want a reason: %v", argv, got, want)
		}
	}
}

// TestOwnUser: a process refused whose real user and group ids are the
// gate's hid its descriptors itself, a set-id program's too (it changed
// only its effective ids); another user's, or one whose status cannot be
// read, did not.
func TestOwnUser(t *testing.T) {
	u, g := os.Getuid(), os.Getgid()
	ids := func(uid, gid [4]int) string {
		return fmt.Sprintf("Name:\tpython3\nUid:\t%d\t%d\t%d\t%d\nGid:\t%d\t%d\t%d\t%d\nGroups:\t\n", uid[0], uid[1], uid[2], uid[3], gid[0], gid[1], gid[2], gid[3])
	}
	root := t.TempDir()
	for pid, status := range map[int]string{
		10: ids([4]int{u, u, u, u}, [4]int{g, g, g, g}),
		11: ids([4]int{u + 1, u + 1, u + 1, u + 1}, [4]int{g, g, g, g}),
		12: ids([4]int{u, u + 1, u + 1, u + 1}, [4]int{g, g, g, g}), // set-user-id
		13: ids([4]int{u, u, u, u}, [4]int{g, g + 1, g + 1, g + 1}), // set-group-id
		14: "Name:\tpython3\nUid:\t" + strconv.Itoa(u) + "\n",
		16: ids([4]int{u + 1, u, u, u}, [4]int{g, g, g, g}), // another user's, set-user-id to the gate's
		17: ids([4]int{u, u, u, u}, [4]int{g + 1, g, g, g}), // another group's, set-group-id to the gate's
	} {
		if err := os.MkdirAll(filepath.Join(root, strconv.Itoa(pid)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, strconv.Itoa(pid), "status"), []byte(status), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := &Reader{Proc: root}
	for pid, want := range map[int]bool{10: true, 11: false, 12: true, 13: true, 14: false, 15: false, 16: false, 17: false} {
		if got := r.ownUser(pid); got != want {
			t.Errorf("ownUser(%d) = %v, want %v", pid, got, want)
		}
	}
}

// TestHiding: a process of the gate's own user that made itself not
// dumpable (its descriptors refused to that same user) is said to hide
// them. Run as an ordinary user: root reads every process's descriptors.
func TestHiding(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads any process's descriptors: run as an ordinary user")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	cmd := exec.Command(py, "-c", "import ctypes,sys; ctypes.CDLL(None).prctl(4, 0, 0, 0, 0); print(flush=True); sys.stdin.read()")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer in.Close()
	if _, err := out.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	r := &Reader{Proc: "/proc", Devices: []string{"/dev/accel/accel*"}}
	s := r.Sample(context.Background(), []int{os.Getpid(), cmd.Process.Pid})
	want := []string{fmt.Sprintf("pid %d", cmd.Process.Pid)}
	if diff := cmp.Diff(want, s.Hiding); diff != "" {
		t.Errorf("Hiding (-want +got):\n%s; Unread %v", diff, s.Unread)
	}
	if w := r.Witness(s, s, false); !cmp.Equal(w.Hiding, want) {
		t.Errorf("Witness.Hiding = %v, want %v", w.Hiding, want)
	}
}
