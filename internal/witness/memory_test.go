//go:build !windows

package witness

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
)

const noMemKeys = "fdinfo: the held devices' descriptors have no drm-resident-*, drm-total-* or drm-memory-* keys"

// TestDeviceMemory reads the device's account of each of the serve's
// processes at a sample: nvidia-smi's compute apps, the DRM client usage
// stats (amdgpu in KiB, xe in MiB; a client shared by a forked child
// counted once), the larger source where two give one.
func TestDeviceMemory(t *testing.T) {
	amdgpu := func(client int, vram string) string {
		return fmt.Sprintf("pos:\t0\ndrm-driver:\tamdgpu\ndrm-client-id:\t%d\ndrm-pdev:\t0000:03:00.0\ndrm-total-vram:\t%s\ndrm-resident-vram:\t%s\ndrm-total-gtt:\t2048 KiB\ndrm-resident-gtt:\t2048 KiB\n", client, vram, vram)
	}
	xe := "drm-driver:\txe\ndrm-client-id:\t31\ndrm-total-vram0:\t600 MiB\ndrm-resident-vram0:\t512 MiB\ndrm-total-system:\t0\n"
	tests := []struct {
		name    string
		devices []string
		procs   map[int]fakeProc
		smi     string
		smiErr  error
		want    route.MemorySample
	}{
		{"nvidia-smi: each of the serve's processes", []string{"/dev/nvidia[0-9]*"},
			map[int]fakeProc{10: {fds: map[int]string{7: "/dev/nvidia0"}}, 11: {fds: map[int]string{3: "/dev/nvidia0"}}},
			"11, 512\n10, 1024\n77, 9000\n", nil,
			route.MemorySample{Source: "nvidia-smi", Bytes: 1536 << 20, Processes: []route.ProcessMemory{{PID: 10, Bytes: 1024 << 20}, {PID: 11, Bytes: 512 << 20}}}},
		{"nvidia-smi lists a pid of the serve's that holds no NVIDIA node: another PID namespace's table, not believed", []string{"/dev/nvidia[0-9]*"},
			map[int]fakeProc{10: {fds: map[int]string{7: "/dev/nvidia0"}}, 11: {}}, "11, 9000\n", nil,
			route.MemorySample{Why: noMemKeys + "; nvidia-smi: lists pid 11, a process of the serve that holds no device node of the fast route's classes: its table's pids are another PID namespace's: not believed"}},
		{"nvidia-smi lists another's process alone: the serve's hold none", []string{"/dev/nvidia[0-9]*"},
			map[int]fakeProc{10: {fds: map[int]string{7: "/dev/nvidia0"}}}, "77, 9000\n", nil,
			route.MemorySample{Source: "nvidia-smi"}},
		{"nvidia-smi lists no process at all: no account", []string{"/dev/nvidia[0-9]*"},
			map[int]fakeProc{10: {fds: map[int]string{7: "/dev/nvidia0"}}}, "", nil,
			route.MemorySample{Why: noMemKeys + "; nvidia-smi: lists no process at all (a PID namespace not the driver's, or none computing)"}},
		{"nvidia-smi not installed: no account", []string{"/dev/nvidia[0-9]*"},
			map[int]fakeProc{10: {fds: map[int]string{7: "/dev/nvidia0"}}}, "", exec.ErrNotFound,
			route.MemorySample{Why: noMemKeys + "; nvidia-smi: not installed (not on PATH)"}},
		{"a row past any device, or below zero: not believed", []string{"/dev/nvidia[0-9]*"},
			map[int]fakeProc{10: {fds: map[int]string{7: "/dev/nvidia0"}}}, fmt.Sprintf("10, %d\n10, -5\n10, 4194304\n", maxMiB+1), nil,
			route.MemorySample{Source: "nvidia-smi", Bytes: 4 << 40, Processes: []route.ProcessMemory{{PID: 10, Bytes: 4 << 40}}}},
		{"amdgpu fdinfo: resident VRAM and GTT per process, a forked child's shared client once", []string{"/dev/dri/renderD*"},
			map[int]fakeProc{
				10: {fds: map[int]string{5: "/dev/dri/renderD128"}, fdinfo: map[int]string{5: amdgpu(4, "1048576 KiB")}},
				11: {fds: map[int]string{5: "/dev/dri/renderD128", 6: "/dev/dri/renderD128"}, fdinfo: map[int]string{5: amdgpu(4, "1048576 KiB"), 6: amdgpu(5, "4096 KiB")}},
			}, "", nil,
			route.MemorySample{Source: "fdinfo", Bytes: 1<<30 + 4<<20 + 2*2<<20, Processes: []route.ProcessMemory{{PID: 11, Bytes: 1<<30 + 4<<20 + 2*2<<20}}}},
		{"xe fdinfo in MiB", []string{"/dev/dri/renderD*"},
			map[int]fakeProc{10: {fds: map[int]string{5: "/dev/dri/renderD128"}, fdinfo: map[int]string{5: xe}}}, "", nil,
			route.MemorySample{Source: "fdinfo", Bytes: 512 << 20, Processes: []route.ProcessMemory{{PID: 10, Bytes: 512 << 20}}}},
		{"a figure that would overflow: past the bound, not believed by the judge", []string{"/dev/dri/renderD*"},
			map[int]fakeProc{10: {fds: map[int]string{5: "/dev/dri/renderD128"}, fdinfo: map[int]string{5: "drm-driver:\txe\ndrm-resident-vram0:\t9223372036854775807 MiB\n"}}}, "", nil,
			route.MemorySample{Source: "fdinfo", Bytes: 4<<40 + 1, Processes: []route.ProcessMemory{{PID: 10, Bytes: 4<<40 + 1}}}},
		{"fdinfo and nvidia-smi: the larger", []string{"/dev/nvidia[0-9]*", "/dev/dri/renderD*"},
			map[int]fakeProc{10: {fds: map[int]string{5: "/dev/dri/renderD128", 7: "/dev/nvidia0"}, fdinfo: map[int]string{5: xe}}}, "10, 2048\n", nil,
			route.MemorySample{Source: "nvidia-smi", Bytes: 2048 << 20, Processes: []route.ProcessMemory{{PID: 10, Bytes: 2048 << 20}}}},
		{"fdinfo the larger", []string{"/dev/nvidia[0-9]*", "/dev/dri/renderD*"},
			map[int]fakeProc{10: {fds: map[int]string{5: "/dev/dri/renderD128", 7: "/dev/nvidia0"}, fdinfo: map[int]string{5: xe}}}, "10, 511\n", nil,
			route.MemorySample{Source: "fdinfo", Bytes: 512 << 20, Processes: []route.ProcessMemory{{PID: 10, Bytes: 512 << 20}}}},
		{"no device held: no account asked", []string{"/dev/nvidia[0-9]*"},
			map[int]fakeProc{10: {}}, "10, 2048\n", nil,
			route.MemorySample{Why: "the serve's processes hold no device of the fast route's classes: no device's account to ask"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			var pids []int
			for pid, p := range tc.procs {
				writeProc(t, root, pid, p)
				pids = append(pids, pid)
			}
			slices.Sort(pids) // a shared client is the last reader's
			r := &Reader{Proc: root, Devices: tc.devices, CharDevice: devices(nil), Run: func(context.Context, string, ...string) ([]byte, error) {
				return []byte(tc.smi), tc.smiErr
			}}
			s := r.Sample(context.Background(), pids)
			weights := route.Memory{WeightsBytes: 1 << 30, WeightsFrom: "m.gguf"}
			m := DeviceMemory(Sample{}, s, weights)
			want := &route.Memory{WeightsBytes: 1 << 30, WeightsFrom: "m.gguf", Samples: []route.MemorySample{
				{Why: "the serve's processes hold no device of the fast route's classes: no device's account to ask"}, tc.want}}
			if diff := cmp.Diff(want, m); diff != "" {
				t.Errorf("DeviceMemory (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDeviceMemoryProcesses: at most MaxSeen processes are listed, all
// of them counted.
func TestDeviceMemoryProcesses(t *testing.T) {
	procs := map[int]int64{}
	const most = route.MaxMemoryProcesses
	for pid := 1; pid <= most+1; pid++ {
		procs[pid] = 1 << 20
	}
	s := accountOf(Sample{Held: []string{"/dev/nvidia0"}, Tools: []Tool{{Name: "nvidia-smi", Account: true, Procs: procs}}})
	if s.Bytes != (most+1)<<20 || len(s.Processes) != most || s.Processes[most-1].PID != most {
		t.Errorf("accountOf(%d processes) = %d bytes, %d listed, want %d and %d", most+1, s.Bytes, len(s.Processes), (most+1)<<20, most)
	}
	if got := MemoryLine(&route.Memory{WeightsBytes: 5, WeightsFrom: "m.gguf", Samples: []route.MemorySample{s, {Why: "x"}}}); got != "weights 5 bytes (m.gguf); device memory at the samples: 34603008 bytes (nvidia-smi, 32 processes), no account (x)" {
		t.Errorf("MemoryLine = %q", got)
	}
	if got := MemoryLine(&route.Memory{NoWeights: "y"}); got != "weights not sized (y); device memory at the samples: " {
		t.Errorf("MemoryLine = %q", got)
	}
	if got := MemoryLine(&route.Memory{NoWeights: strings.Repeat("é", 301)}); got != "weights not sized ("+strings.Repeat("é", 300)+"...); device memory at the samples: " {
		t.Errorf("MemoryLine of a long reason = %q", got)
	}
	if got := MemoryLine(nil); got != "not read" {
		t.Errorf("MemoryLine(nil) = %q", got)
	}
}

// smiReader is a Reader of NVIDIA's classes whose nvidia-smi answers
// apps to --query-compute-apps and gpus to --query-gpu=memory.total
// (gpusErr instead, where set).
func smiReader(root, apps, gpus string, gpusErr error) *Reader {
	return &Reader{Proc: root, Devices: []string{"/dev/nvidia[0-9]*"}, CharDevice: devices(nil), Run: func(_ context.Context, name string, args ...string) ([]byte, error) {
		switch strings.Join(args, " ") {
		case "--query-compute-apps=pid,used_memory --format=csv,noheader,nounits":
			return []byte(apps), nil
		case "--query-gpu=memory.total --format=csv,noheader,nounits":
			return []byte(gpus), gpusErr
		}
		return nil, fmt.Errorf("asked %s %v", name, args)
	}}
}

// TestNvidiaSMIDeviceSize: a figure nvidia-smi gives the serve's
// processes past the memory its GPUs hold (memory.total, summed over
// them) is not believed: the sample is no account, and says why. Exactly
// the devices' memory is believed.
func TestNvidiaSMIDeviceSize(t *testing.T) {
	root := t.TempDir()
	writeProc(t, root, 10, fakeProc{fds: map[int]string{7: "/dev/nvidia0"}})
	writeProc(t, root, 11, fakeProc{fds: map[int]string{7: "/dev/nvidia1"}})
	tests := []struct {
		name       string
		apps, gpus string
		gpusErr    error
		want       route.MemorySample
	}{
		{"one process exactly the devices' memory", "10, 81559\n", "81559\n", nil,
			route.MemorySample{Source: "nvidia-smi", Bytes: 81559 << 20, Processes: []route.ProcessMemory{{PID: 10, Bytes: 81559 << 20}}}},
		{"one process a MiB past the device's memory", "10, 81560\n", "81559\n", nil,
			route.MemorySample{Why: noMemKeys + "; nvidia-smi: attributes 81560 MiB to pid 10, past the 81559 MiB its GPUs hold (memory.total): not believed"}},
		{"two GPUs: their sum bounds", "10, 81559\n10, 81559\n11, 1\n", "81559\n81559\n", nil,
			route.MemorySample{Why: noMemKeys + "; nvidia-smi: attributes 163119 MiB to the serve's processes, past the 163118 MiB its GPUs hold (memory.total): not believed"}},
		{"two GPUs: within their sum", "10, 81559\n10, 81558\n11, 1\n", "81559\n81559\n", nil,
			route.MemorySample{Source: "nvidia-smi", Bytes: 163118 << 20, Processes: []route.ProcessMemory{{PID: 10, Bytes: 163117 << 20}, {PID: 11, Bytes: 1 << 20}}}},
		{"a GPU's size not given: the fixed bound", "10, 900000\n", "81559\n[N/A]\n", nil,
			route.MemorySample{Source: "nvidia-smi", Bytes: 900000 << 20, Processes: []route.ProcessMemory{{PID: 10, Bytes: 900000 << 20}}}},
		{"sizes not read: the fixed bound", "10, 900000\n", "", errors.New("exit status 2"), route.MemorySample{Source: "nvidia-smi", Bytes: 900000 << 20, Processes: []route.ProcessMemory{{PID: 10, Bytes: 900000 << 20}}}},
		{"a size past the fixed bound: the fixed bound", "10, 900000\n", fmt.Sprintf("%d\n", maxMiB+1), nil,
			route.MemorySample{Source: "nvidia-smi", Bytes: 900000 << 20, Processes: []route.ProcessMemory{{PID: 10, Bytes: 900000 << 20}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := smiReader(root, tc.apps, tc.gpus, tc.gpusErr)
			s := r.Sample(context.Background(), []int{10, 11})
			if diff := cmp.Diff(tc.want, accountOf(s)); diff != "" {
				t.Errorf("accountOf (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPastDevice pins the bound to the byte: a process's figure or the
// sum of the serve's at the devices' size is believed, one byte more is
// not; no size known leaves the figures as they are.
func TestPastDevice(t *testing.T) {
	tool := func(procs map[int]int64) Tool {
		tl := Tool{Name: "x", Listed: true, Account: true, Procs: procs}
		for _, b := range procs {
			tl.MemoryBytes += b
		}
		return tl
	}
	tests := []struct {
		name  string
		procs map[int]int64
		size  int64
		why   string
	}{
		{"one process at the size", map[int]int64{3: 100 << 20}, 100 << 20, ""},
		{"one process a byte past", map[int]int64{3: 100<<20 + 1}, 100 << 20, "attributes 100 MiB to pid 3, past the 100 MiB its devices hold (d): not believed"},
		{"two at the size", map[int]int64{3: 50 << 20, 4: 50 << 20}, 100 << 20, ""},
		{"two a byte past", map[int]int64{3: 50 << 20, 4: 50<<20 + 1}, 100 << 20, "attributes 100 MiB to the serve's processes, past the 100 MiB its devices hold (d): not believed"},
		{"no size", map[int]int64{3: 100<<20 + 1}, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tl := tool(tc.procs)
			want := tl
			if tc.why != "" {
				want = Tool{Name: "x", Why: tc.why}
			}
			tl.pastDevice(tc.size, "devices", "d")
			if diff := cmp.Diff(want, tl); diff != "" {
				t.Errorf("pastDevice (-want +got):\n%s", diff)
			}
		})
	}
}
