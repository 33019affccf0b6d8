package witness

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
)

// fakeAdapters are the kernel's adapter statistics as a test sets them.
type fakeAdapters struct {
	list    []Adapter
	listErr error
	use     map[int]map[uint64]AdapterUse // by pid, by LUID
	useErr  error
}

func (f *fakeAdapters) List() ([]Adapter, error) { return f.list, f.listErr }

func (f *fakeAdapters) Use(pid int, a Adapter) (AdapterUse, error) {
	if f.useErr != nil {
		return AdapterUse{}, f.useErr
	}
	return f.use[pid][a.LUID], nil
}

var (
	npuAdapter  = Adapter{LUID: 0x1234, Vendor: 0x1022, Device: 0x17f0, ComputeOnly: true}
	gpuAdapter  = Adapter{LUID: 0x5678, Vendor: 0x1002, Device: 0x150e, Render: true}
	warpAdapter = Adapter{LUID: 0x9abc, Vendor: 0x1414, Device: 0x008c, Software: true, Render: true}
)

// fakeModules lists each process's modules, or refuses.
func fakeModules(mods map[int][]string, errs map[int]error) func(int) ([]string, error) {
	return func(pid int) ([]string, error) {
		if err := errs[pid]; err != nil {
			return nil, err
		}
		return mods[pid], nil
	}
}

// flmReader reads a FastFlowLM serve of two processes on Windows: flm.exe
// (pid 10), which loads XRT, and a helper (pid 11) that loads nothing of
// the route.
func flmReader(ad *fakeAdapters) *Reader {
	return &Reader{
		Devices:   []string{"/dev/accel/accel*"},
		Libraries: []string{"libxrt_coreutil.so*"},
		Modules: fakeModules(map[int][]string{
			10: {`C:\Program Files\flm\flm.exe`, `C:\Windows\SYSTEM32\ntdll.dll`, `C:\Windows\System32\XRT_COREUTIL.DLL`},
			11: {`C:\Program Files\flm\helper.exe`, `C:\Windows\System32\KERNEL32.DLL`},
		}, nil),
		Adapters: ad,
	}
}

// samples takes a first and a last sample, the adapters' use set before
// each, a second apart.
func loadedSamples(t *testing.T, r *Reader, ad *fakeAdapters, before, after map[int]map[uint64]AdapterUse) (Sample, Sample) {
	t.Helper()
	ad.use = before
	first := r.Sample(context.Background(), []int{10, 11})
	ad.use = after
	last := r.Sample(context.Background(), []int{10, 11})
	last.At = first.At.Add(time.Second)
	return first, last
}

func TestLoadedNPUUsed(t *testing.T) {
	ad := &fakeAdapters{list: []Adapter{npuAdapter, gpuAdapter, warpAdapter}}
	r := flmReader(ad)
	first, last := loadedSamples(t, r, ad,
		map[int]map[uint64]AdapterUse{10: {npuAdapter.LUID: {RunningNS: 5e8, MemoryBytes: 1 << 30}, gpuAdapter.LUID: {RunningNS: 7e9}}},
		map[int]map[uint64]AdapterUse{10: {npuAdapter.LUID: {RunningNS: 1.4e9, MemoryBytes: 3 << 29}, gpuAdapter.LUID: {RunningNS: 9e9, MemoryBytes: 1 << 20}}})
	w := r.Witness(first, last, true)
	if w.Processes != 2 || len(w.Held) != 0 || !slices.Equal(w.Mapped, []string{`C:\Windows\System32\XRT_COREUTIL.DLL`}) {
		t.Fatalf("witness: %d processes, held %q, mapped %q; want 2, none (no device nodes on Windows), XRT", w.Processes, w.Held, w.Mapped)
	}
	// The NPU's engine time between the samples (0.9 s) and its memory
	// at the last; the GPU is not of the classes and counts nothing.
	want := []route.Usage{{Source: "d3dkmt", EngineNS: 9e8, SpanNS: 1e9, MemoryBytes: 3 << 29}}
	if !slices.Equal(w.Usage, want) || len(w.NoUsage) != 0 {
		t.Fatalf("usage %+v, none %q; want %+v", w.Usage, w.NoUsage, want)
	}
	// FastFlowLM's log names neither route: the NPU's use names the fast
	// route.
	v := route.JudgeWitnessed(route.Evidence{}, &w)
	if !v.OK || !strings.Contains(v.Detail, "engine busy 0.9 s of 1 s decoding, device memory 1536.0 MiB (d3dkmt)") {
		t.Errorf("verdict %v: %s", v.OK, v.Detail)
	}
}

func TestLoadedNPUUnused(t *testing.T) {
	ad := &fakeAdapters{list: []Adapter{npuAdapter}}
	r := flmReader(ad)
	first, last := loadedSamples(t, r, ad, nil, nil)
	w := r.Witness(first, last, true)
	want := []route.Usage{{Source: "d3dkmt", SpanNS: 1e9}}
	if !slices.Equal(w.Usage, want) {
		t.Fatalf("usage %+v, want %+v", w.Usage, want)
	}
	v := route.JudgeWitnessed(route.Evidence{}, &w)
	if v.OK || !strings.Contains(v.Detail, "engine busy 0 s of 1 s decoding (d3dkmt)") {
		t.Errorf("verdict %v: %s; want no PASS: the NPU was not used", v.OK, v.Detail)
	}
	// Nothing loaded of the route, while the log names the fast route:
	// not on it.
	r.Modules = fakeModules(map[int][]string{10: {`C:\flm\flm.exe`}, 11: nil}, nil)
	first, last = loadedSamples(t, r, ad, nil, nil)
	w = r.Witness(first, last, true)
	v = route.JudgeWitnessed(route.Evidence{Fast: &route.Match{Text: "NPU ready"}}, &w)
	if v.OK || !strings.Contains(v.Detail, "map none of its backends") || !strings.Contains(v.Detail, "this run is not on the fast route") {
		t.Errorf("verdict %v: %s", v.OK, v.Detail)
	}
}

func TestLoadedStatisticsUnread(t *testing.T) {
	fast := route.Evidence{Fast: &route.Match{Text: "NPU ready"}}
	for _, c := range []struct {
		name string
		ad   *fakeAdapters
		why  string
	}{
		{"no statistics", &fakeAdapters{listErr: errors.New("D3DKMTEnumAdapters2: not in gdi32.dll")},
			"d3dkmt: the adapters could not be listed: D3DKMTEnumAdapters2: not in gdi32.dll"},
		{"refused", &fakeAdapters{list: []Adapter{npuAdapter}, useErr: fmt.Errorf("OpenProcess: %w", fs.ErrPermission)},
			"d3dkmt: the adapters' statistics of no process could be read: pid 10, adapter 0x1234 (1022:17f0, NPU (compute only)): permission denied"},
		{"no NPU", &fakeAdapters{list: []Adapter{gpuAdapter, warpAdapter}},
			"d3dkmt: none of the 2 adapters is of the fast route's classes (/dev/accel/accel*): adapter 0x5678 (1002:150e, GPU), adapter 0x9abc (1414:008c, software)"},
	} {
		r := flmReader(c.ad)
		first, last := loadedSamples(t, r, c.ad, nil, nil)
		w := r.Witness(first, last, true)
		if len(w.Usage) != 0 || len(w.NoUsage) != 1 || !strings.HasPrefix(w.NoUsage[0], c.why) {
			t.Errorf("%s: usage %+v, none %q; want none, %q", c.name, w.Usage, w.NoUsage, c.why)
		}
		// The log named the fast route and XRT is loaded: the verdict
		// stands, saying what was not witnessed.
		v := route.JudgeWitnessed(fast, &w)
		if !v.OK || !strings.Contains(v.Detail, "device usage not witnessed: "+c.why[:40]) {
			t.Errorf("%s: verdict %v: %s", c.name, v.OK, v.Detail)
		}
		// Where the log is silent, unread statistics name nothing.
		if v := route.JudgeWitnessed(route.Evidence{}, &w); v.OK {
			t.Errorf("%s: a silent log passed on unread statistics: %s", c.name, v.Detail)
		}
	}
}

func TestLoadedProcessesUnread(t *testing.T) {
	ad := &fakeAdapters{list: []Adapter{npuAdapter}}
	r := flmReader(ad)
	r.Modules = fakeModules(nil, map[int]error{10: fmt.Errorf("module snapshot: %w", fs.ErrPermission), 11: ErrGone})
	first, last := loadedSamples(t, r, ad, nil, nil)
	w := r.Witness(first, last, true)
	if w.NotRead != "no process of the serve could be read: pid 10: permission denied" {
		t.Errorf("not read %q", w.NotRead)
	}
	// One process read, one refused: the refused one is said.
	r.Modules = fakeModules(map[int][]string{11: {`C:\x\helper.exe`}}, map[int]error{10: fmt.Errorf("module snapshot: %w", fs.ErrPermission)})
	first, last = loadedSamples(t, r, ad, nil, nil)
	w = r.Witness(first, last, true)
	if w.Processes != 1 || !slices.Equal(w.Unread, []string{"pid 10: permission denied"}) {
		t.Errorf("processes %d, unread %q", w.Processes, w.Unread)
	}
	v := route.JudgeWitnessed(route.Evidence{Fast: &route.Match{Text: "NPU ready"}}, &w)
	if !v.OK || !strings.Contains(v.Detail, "not witnessed") {
		t.Errorf("verdict %v: %s; want the log's, not witnessed", v.OK, v.Detail)
	}
}

func TestLoadedModulesBound(t *testing.T) {
	mods := make([]string, MaxModules+1)
	for i := range mods {
		mods[i] = fmt.Sprintf(`C:\m\%d.dll`, i)
	}
	mods[MaxModules] = `C:\m\xrt_coreutil.dll` // past the bound: not read
	r := &Reader{Devices: []string{"/dev/accel/accel*"}, Libraries: []string{"libxrt_coreutil.so*"},
		Modules: fakeModules(map[int][]string{10: mods}, nil), Adapters: &fakeAdapters{list: []Adapter{npuAdapter}}}
	s := r.Sample(context.Background(), []int{10})
	if len(s.Mapped) != 0 || len(s.Cut) != 1 || len(s.Excess) != 1 || !strings.Contains(s.Cut[0], "16384 of its 16385 modules read") {
		t.Errorf("mapped %q, cut %q, excess %q", s.Mapped, s.Cut, s.Excess)
	}
	r.Modules = fakeModules(map[int][]string{10: mods[1:]}, nil) // MaxModules exactly: read whole
	if s := r.Sample(context.Background(), []int{10}); len(s.Mapped) != 1 || len(s.Cut) != 0 {
		t.Errorf("at the bound: mapped %q, cut %q", s.Mapped, s.Cut)
	}
}

func TestAdapterClasses(t *testing.T) {
	nv := Adapter{Vendor: vendorNVIDIA, Render: true}
	other := Adapter{Vendor: vendorNVIDIA + 1}
	for _, c := range []struct {
		devices []string
		a       Adapter
		want    bool
	}{
		{[]string{"/dev/accel/accel*"}, npuAdapter, true},
		{[]string{"/dev/accel/accel*"}, gpuAdapter, false},
		{[]string{"/dev/nvidia[0-9]*"}, nv, true},
		{[]string{"/dev/nvidia[0-9]*"}, other, false},
		{[]string{"/dev/nvidia[0-9]*"}, gpuAdapter, false},
		{[]string{"/dev/dri/renderD*"}, gpuAdapter, true},
		{[]string{"/dev/dri/renderD*"}, npuAdapter, false},
		{[]string{"/dev/kfd"}, gpuAdapter, true},
		{[]string{"/dev/kfd"}, other, false},
		{[]string{"/dev/davinci[0-9]*"}, npuAdapter, false},
		{[]string{"/dev/dri/renderD*", "/dev/accel/accel*"}, warpAdapter, false}, // the CPU's
		{nil, npuAdapter, false},
	} {
		if got := adapterClasses(c.devices, c.a); got != c.want {
			t.Errorf("adapterClasses(%q, %s) = %v, want %v", c.devices, c.a, got, c.want)
		}
	}
	if got := (Adapter{LUID: 1, Vendor: 2, Device: 3}).String(); got != "adapter 0x1 (0002:0003, display only)" {
		t.Errorf("String = %q", got)
	}
}

func TestLoadedNoClasses(t *testing.T) {
	r := &Reader{Libraries: []string{"libxrt_coreutil.so*"}, Modules: fakeModules(map[int][]string{10: {`C:\a.exe`}}, nil), Adapters: &fakeAdapters{list: []Adapter{npuAdapter}}}
	s := r.Sample(context.Background(), []int{10})
	if !strings.HasPrefix(s.KernelWhy, "no device class of the fast route is known") {
		t.Errorf("why %q", s.KernelWhy)
	}
}
