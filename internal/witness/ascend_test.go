//go:build !windows

package witness

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/rogpeppe/go-internal/txtar"
)

// npuSMIReader is a Reader of Ascend's classes whose npu-smi answers out
// (or err), and records what it was asked.
// Another tool asked is not installed.
func npuSMIReader(out string, err error, asked *string) *Reader {
	return &Reader{Devices: []string{"/dev/davinci[0-9]*"}, CharDevice: devices(nil), Run: func(_ context.Context, name string, args ...string) ([]byte, error) {
		if name != "npu-smi" {
			return nil, exec.ErrNotFound
		}
		*asked = name + " " + strings.Join(args, " ")
		return []byte(out), err
	}}
}

// TestNpuSMISamples reads the real outputs in testdata/npu-smi (each
// file's comment names its source, the pids listed and their memory):
// the serve's pids listed give their memory; a serve none of whose pids
// is listed is not witnessed, and said.
func TestNpuSMISamples(t *testing.T) {
	files, _ := filepath.Glob("testdata/npu-smi/*.txtar")
	if len(files) < 4 {
		t.Fatalf("%d samples", len(files))
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			a, err := txtar.ParseFile(file)
			if err != nil || len(a.Files) != 1 || a.Files[0].Name != "out" {
				t.Fatalf("%s: %v", file, err)
			}
			var pids []int
			var mib int64
			for line := range strings.SplitSeq(string(a.Comment), "\n") {
				if v, ok := strings.CutPrefix(line, "pids:"); ok {
					for f := range strings.FieldsSeq(v) {
						p, _ := strconv.Atoi(f)
						pids = append(pids, p)
					}
				}
				if v, ok := strings.CutPrefix(line, "memory_mib:"); ok {
					mib, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				}
			}
			out := string(a.Files[0].Data)
			var asked string
			r := npuSMIReader(out, nil, &asked)
			if len(pids) > 0 {
				got := r.npuSMI(context.Background(), append([]int{1}, pids...))
				want := Tool{Name: "npu-smi", Listed: true, MemoryBytes: mib << 20, Account: true}
				if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Tool{}, "Procs")); diff != "" {
					t.Errorf("the serve's pids %v (-want +got):\n%s", pids, diff)
				}
				if asked != "npu-smi info" {
					t.Errorf("asked %q", asked)
				}
			}
			got := r.npuSMI(context.Background(), []int{1, 2})
			want := Tool{Name: "npu-smi", Why: fmt.Sprintf("lists none of the serve's processes (%d listed)", len(pids)), Account: len(pids) > 0}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("pids not listed (-want +got):\n%s", diff)
			}
		})
	}
}

const npuSMIHeader = "| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |\n" +
	"+===========================+===============+====================================================+\n"

// TestNpuSMIUntrusted: the table's rows are read bounded and untrusted.
func TestNpuSMIUntrusted(t *testing.T) {
	row := func(pid, name, mem string) string {
		return fmt.Sprintf("| 0       0                 | %-13s | %-24s | %-23s |\n", pid, name, mem)
	}
	many := npuSMIHeader
	for range MaxToolRows {
		many += row("77", "python", "5")
	}
	tests := []struct {
		name string
		out  string
		err  error
		want Tool
	}{
		{"a name holding a bar", npuSMIHeader + row("10", "a|b|c", "2048"), nil, Tool{Name: "npu-smi", Listed: true, MemoryBytes: 2048 << 20}},
		{"two chips, two processes of the serve", npuSMIHeader + row("10", "python", "100") + row("11", "python", "28") + row("77", "python", "9000"), nil,
			Tool{Name: "npu-smi", Listed: true, MemoryBytes: 128 << 20}},
		{"memory not a count", npuSMIHeader + row("10", "python", "NA") + row("10", "python", "-5") + row("10", "python", "99999999999999999999"), nil,
			Tool{Name: "npu-smi", Why: "lists none of the serve's processes (0 listed)"}},
		{"an id not a number", npuSMIHeader + row("ten", "python", "5") + row("0", "python", "5"), nil,
			Tool{Name: "npu-smi", Why: "lists none of the serve's processes (0 listed)"}},
		{"the pid the container knows", strings.Replace(npuSMIHeader, "Process memory(MB)      |", "Process memory(MB)    | Process id in container |", 1) +
			"| 0       0                 | 632268        | python3.1          | 197                   | 10                      |\n", nil,
			Tool{Name: "npu-smi", Listed: true, MemoryBytes: 197 << 20}},
		{"no table", "dcmi model initialized failed, because the device is used. ret is -8020\n", nil,
			Tool{Name: "npu-smi", Why: `printed no process table (no "Process id" column)`}},
		{"a table past the bound", many + row("10", "python", "5"), nil,
			Tool{Name: "npu-smi", Why: fmt.Sprintf("more than %d rows in its process table: not read", MaxToolRows)}},
		{"not installed", "", exec.ErrNotFound, Tool{Name: "npu-smi", Why: "not installed (not on PATH)"}},
		{"it failed", "", errors.New("exit status 255"), Tool{Name: "npu-smi", Why: "exit status 255"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var asked string
			got := npuSMIReader(tc.out, tc.err, &asked).npuSMI(context.Background(), []int{10, 11})
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(Tool{}, "Procs", "Account")); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestNpuSMIAsked: npu-smi is asked where the classes are Ascend's and the
// serve holds one of their nodes, and what it says is a witness's usage.
func TestNpuSMIAsked(t *testing.T) {
	root := t.TempDir()
	writeProc(t, root, 10, fakeProc{fds: map[int]string{7: "/dev/davinci3"}, fdinfo: map[int]string{7: "pos:\t0\n"}})
	writeProc(t, root, 11, fakeProc{fds: map[int]string{7: "/dev/null"}})
	writeProc(t, root, 12, fakeProc{fds: map[int]string{7: "/dev/nvidia0"}, fdinfo: map[int]string{7: "pos:\t0\n"}})
	nvidiaSMIAbsent := "nvidia-smi: not installed (not on PATH)"
	noStats := "fdinfo: the held devices' descriptors have no DRM client usage stats (drm-engine-*, drm-resident-*, drm-total-*): the driver exports none"
	out := npuSMIHeader + "| 3       0                 | 10            | python                   | 3028                    |\n"
	tests := []struct {
		name    string
		devices []string
		pids    []int
		asked   string
		usage   []route.Usage
		none    []string
	}{
		{"Ascend's node held", []string{"/dev/davinci[0-9]*"}, []int{10}, "npu-smi info", []route.Usage{{Source: "npu-smi", MemoryBytes: 3028 << 20}}, []string{noStats}},
		{"no node held", []string{"/dev/davinci[0-9]*"}, []int{11}, "", nil, nil},
		{"another vendor's classes", []string{"/dev/dri/renderD*", "/dev/davinci3"}, []int{10}, "npu-smi info", []route.Usage{{Source: "npu-smi", MemoryBytes: 3028 << 20}}, []string{noStats}},
		{"not Ascend's classes", []string{"/dev/dav*"}, []int{10}, "", nil, []string{noStats}},
		{"another vendor's node held", []string{"/dev/nvidia[0-9]*", "/dev/davinci[0-9]*"}, []int{12}, "", nil, []string{noStats, nvidiaSMIAbsent}},
		{"another vendor's node and Ascend's held", []string{"/dev/nvidia[0-9]*", "/dev/davinci[0-9]*"}, []int{10, 12}, "npu-smi info", []route.Usage{{Source: "npu-smi", MemoryBytes: 3028 << 20}}, []string{noStats, nvidiaSMIAbsent}},
		{"a node of a class the user named", []string{"/dev/davinci[0-9]*", "/dev/null"}, []int{11}, "npu-smi info", nil, []string{noStats, "npu-smi: lists none of the serve's processes (1 listed)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var asked string
			r := npuSMIReader(out, nil, &asked)
			r.Proc, r.Devices = root, tc.devices
			s := r.Sample(context.Background(), tc.pids)
			w := r.Witness(s, s, false)
			if asked != tc.asked {
				t.Errorf("asked %q, want %q", asked, tc.asked)
			}
			if diff := cmp.Diff(tc.usage, w.Usage); diff != "" {
				t.Errorf("Usage (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.none, w.NoUsage); diff != "" {
				t.Errorf("NoUsage (-want +got):\n%s", diff)
			}
		})
	}
	// Not listed: not witnessed, and why.
	var asked string
	r := npuSMIReader(npuSMIHeader+"| No running processes found in NPU 3 |\n", nil, &asked)
	r.Proc = root
	s := r.Sample(context.Background(), []int{10})
	w := r.Witness(s, s, false)
	if diff := cmp.Diff([]string{noStats, "npu-smi: lists none of the serve's processes (0 listed)"}, w.NoUsage); diff != "" {
		t.Errorf("NoUsage (-want +got):\n%s", diff)
	}
}

// TestNpuSMIDeviceSize: the chips' HBM (or, with no HBM column, their
// memory) that npu-smi info's chip table gives, summed, bounds what its
// process table attributes to the serve's processes: exactly that is
// believed, a MB more is not. A chip table with no header naming the
// column leaves the fixed bound.
func TestNpuSMIDeviceSize(t *testing.T) {
	chips := "| NPU   Name           | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|\n" +
		"| Chip                 | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |\n" +
		"+======================+===============+====================================================+\n" +
		"| 0     910ProB        | OK            | 78.4        33                0    / 0             |\n" +
		"| 0                    | 0000:C1:00.0  | 0           1198 / 15137      30711/ 32768         |\n" +
		"| 1     910ProB        | OK            | 78.4        33                0    / 0             |\n" +
		"| 0                    | 0000:C2:00.0  | 0           1198 / 15137      30711/ 32768         |\n"
	ddr := "| Chip                 | Bus-Id        | AICore(%)   Memory-Usage(MB)                       |\n" +
		"| 0                    | 0000:C1:00.0  | 0           1198 / 15137                           |\n"
	row := func(pid, mem string) string {
		return fmt.Sprintf("| 0       0                 | %-13s | python                   | %-23s |\n", pid, mem)
	}
	tests := []struct {
		name string
		out  string
		want Tool
	}{
		{"the chips' HBM exactly", chips + npuSMIHeader + row("10", "32768") + row("11", "32768"), Tool{Name: "npu-smi", Listed: true, Account: true, MemoryBytes: 65536 << 20}},
		{"a MB past the chips' HBM", chips + npuSMIHeader + row("10", "32768") + row("11", "32769"),
			Tool{Name: "npu-smi", Why: "attributes 65537 MiB to the serve's processes, past the 65536 MiB its chips hold (npu-smi info's HBM-Usage(MB)): not believed"}},
		{"a process past all of it", chips + npuSMIHeader + row("10", "65537"),
			Tool{Name: "npu-smi", Why: "attributes 65537 MiB to pid 10, past the 65536 MiB its chips hold (npu-smi info's HBM-Usage(MB)): not believed"}},
		{"no HBM column: the chip's memory", ddr + npuSMIHeader + row("10", "15138"),
			Tool{Name: "npu-smi", Why: "attributes 15138 MiB to pid 10, past the 15137 MiB its chips hold (npu-smi info's Memory-Usage(MB)): not believed"}},
		{"no header: the fixed bound", "| 0                    | 0000:C1:00.0  | 0           1198 / 15137      30711/ 32768         |\n" + npuSMIHeader + row("10", "65537"),
			Tool{Name: "npu-smi", Listed: true, Account: true, MemoryBytes: 65537 << 20}},
		{"a chip's size not a number: the fixed bound", strings.Replace(chips, "30711/ 32768  ", "30711/ NA     ", 1) + npuSMIHeader + row("10", "65537"),
			Tool{Name: "npu-smi", Listed: true, Account: true, MemoryBytes: 65537 << 20}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var asked string
			got := npuSMIReader(tc.out, nil, &asked).npuSMI(context.Background(), []int{10, 11})
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(Tool{}, "Procs")); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
