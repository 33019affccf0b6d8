package witness

import (
	"context"
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
