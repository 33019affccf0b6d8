//go:build windows

package witness

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// The test binary's own process has loaded kernel32.dll and ntdll.dll:
// its module snapshot lists them, by full path.
func TestLoadedModulesOwn(t *testing.T) {
	mods, err := LoadedModules(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	base := func(name string) bool {
		return slices.ContainsFunc(mods, func(m string) bool {
			return strings.EqualFold(m[strings.LastIndexAny(m, `/\`)+1:], name) && strings.Contains(m, `\`)
		})
	}
	if !base("kernel32.dll") || !base("ntdll.dll") || !strings.HasSuffix(strings.ToLower(mods[0]), ".exe") {
		t.Errorf("modules of the test's own process: %q; want its .exe first, kernel32.dll and ntdll.dll by path", mods)
	}
	t.Logf("%d modules: %q", len(mods), mods)
}

// A process that is not there is gone, never unread.
func TestLoadedModulesGone(t *testing.T) {
	// Windows gives process ids as multiples of 4: 0x7ffffffd is none.
	if _, err := LoadedModules(0x7ffffffd); err != ErrGone {
		t.Errorf("LoadedModules(no such process) = %v, want ErrGone", err)
	}
	if Alive(0x7ffffffd) || !Alive(os.Getpid()) {
		t.Errorf("Alive: a process that is not there runs, or this one does not")
	}
}

// The reader on Windows reads the modules of the serve's processes, here
// the test's own, judged by the preset's globs' Windows names.
func TestSampleWindowsOwn(t *testing.T) {
	r := &Reader{Proc: "/proc", Devices: []string{"/dev/accel/accel*"}, Libraries: []string{"libkernel32*.so*"}, Adapters: &fakeAdapters{}}
	s := r.Sample(context.Background(), []int{os.Getpid()})
	if s.Processes != 1 || len(s.Unread) != 0 || len(s.Mapped) != 0 {
		t.Errorf("sample: %d processes, unread %q, mapped %q; want 1, none, none (no Windows name for the glob)", s.Processes, s.Unread, s.Mapped)
	}
	r.Libraries = []string{"KERNEL32.dll"}
	s = r.Sample(context.Background(), []int{os.Getpid()})
	if len(s.Mapped) != 1 || !strings.EqualFold(s.Mapped[0][strings.LastIndex(s.Mapped[0], `\`)+1:], "kernel32.dll") {
		t.Errorf("mapped %q, want kernel32.dll", s.Mapped)
	}
}

// The structures' layouts, as the SDK's header has them on a 64-bit build.
func TestD3DKMTLayout(t *testing.T) {
	var q queryStatistics
	var e enumAdapters2
	var a queryAdapterInfo
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"sizeof D3DKMT_QUERYSTATISTICS", unsafe.Sizeof(q), 0x328},
		{"hProcess", unsafe.Offsetof(q.process), 16},
		{"QueryResult", unsafe.Offsetof(q.result), 24},
		{"QueryProcessNode.NodeId", unsafe.Offsetof(q.queryID), 800},
		{"sizeof D3DKMT_ADAPTERINFO", unsafe.Sizeof(adapterInfo{}), 20},
		{"sizeof D3DKMT_ENUMADAPTERS2", unsafe.Sizeof(e), 16},
		{"pAdapters", unsafe.Offsetof(e.adapters), 8},
		{"sizeof D3DKMT_QUERYADAPTERINFO", unsafe.Sizeof(a), 24},
		{"pPrivateDriverData", unsafe.Offsetof(a.data), 8},
		{"PrivateDriverDataSize", unsafe.Offsetof(a.size), 16},
		{"sizeof D3DKMT_QUERY_DEVICE_IDS", unsafe.Sizeof(queryDeviceIDs{}), 28},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.name, c.got, c.want)
		}
	}
}

// What this Windows (or Wine) answers of the adapters' statistics: logged,
// never judged (Wine keeps none).
func TestSystemAdapters(t *testing.T) {
	ad := SystemAdapters()
	list, err := ad.List()
	t.Logf("adapters: %v, err %v", list, err)
	for _, a := range list {
		u, err := ad.Use(os.Getpid(), a)
		t.Logf("%s: this process's use %+v, err %v", a, u, err)
	}
}
