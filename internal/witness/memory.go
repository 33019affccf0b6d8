package witness

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
)

// maxMiB is the most MiB one row of a vendor tool's table may give a
// process: a figure past route.MaxMemoryBytes is not believed.
const maxMiB = route.MaxMemoryBytes >> 20

// addProc counts b bytes of device memory to process pid.
func (t *Tool) addProc(pid int, b int64) {
	if t.Procs == nil {
		t.Procs = map[int]int64{}
	}
	t.Procs[pid] += b
}

// DeviceMemory is the device's own account of the serve's processes'
// memory at the first and the last sample, against the weights the serve
// was asked to load (Weights): what the judge weighs (route.Memory).
func DeviceMemory(first, last Sample, weights route.Memory) *route.Memory {
	m := weights
	m.Samples = []route.MemorySample{accountOf(first), accountOf(last)}
	return &m
}

// accountOf is the device's account at one sample: of the sources that
// gave one (the held descriptors' DRM client usage stats, nvidia-smi's
// compute apps, npu-smi's process table), the one that attributes the
// most memory to the serve's processes. They are not added: each counts
// the same memory its own way, and a serve computes on one kind of
// device.
func accountOf(s Sample) route.MemorySample {
	var best route.MemorySample
	found := false
	var whys []string
	consider := func(source string, procs map[int]int64) {
		ms := route.MemorySample{Source: source}
		pids := make([]int, 0, len(procs))
		for pid := range procs {
			pids = append(pids, pid)
		}
		slices.Sort(pids)
		for _, pid := range pids {
			b := min(max(procs[pid], 0), route.MaxMemoryBytes+1)
			ms.Bytes = min(ms.Bytes+b, route.MaxMemoryBytes+1)
			if len(ms.Processes) < route.MaxMemoryProcesses {
				ms.Processes = append(ms.Processes, route.ProcessMemory{PID: pid, Bytes: b})
			}
		}
		if !found || ms.Bytes > best.Bytes {
			best, found = ms, true
		}
	}
	if len(s.Held) == 0 {
		return route.MemorySample{Why: "the serve's processes hold no device of the fast route's classes: no device's account to ask"}
	}
	procs, any := map[int]int64{}, false
	for _, c := range s.Clients {
		if c.Memory {
			any = true
			procs[c.PID] += c.MemoryBytes
		}
	}
	if any {
		consider("fdinfo", procs)
	} else {
		whys = append(whys, "fdinfo: the held devices' descriptors have no drm-resident-*, drm-total-* or drm-memory-* keys")
	}
	for _, t := range s.Tools {
		switch {
		case t.Account:
			consider(t.Name, t.Procs)
		case t.Why != "":
			whys = append(whys, t.Name+": "+t.Why)
		default:
			whys = append(whys, t.Name+": lists no process at all (a PID namespace not the driver's, or none computing)")
		}
	}
	if found {
		return best
	}
	return route.MemorySample{Why: strings.Join(whys, "; ")}
}

// MemoryLine says what DeviceMemory found, for the console: the weights
// and the device's account at each sample, each reason cut to 300 runes.
func MemoryLine(m *route.Memory) string {
	if m == nil {
		return "not read"
	}
	w := "weights not sized (" + cut(m.NoWeights) + ")"
	if m.WeightsBytes > 0 {
		w = fmt.Sprintf("weights %d bytes (%s)", m.WeightsBytes, cut(m.WeightsFrom))
	}
	var parts []string
	for _, s := range m.Samples {
		if s.Why != "" {
			parts = append(parts, "no account ("+cut(s.Why)+")")
			continue
		}
		parts = append(parts, fmt.Sprintf("%d bytes (%s, %d processes)", s.Bytes, s.Source, len(s.Processes)))
	}
	return w + "; device memory at the samples: " + strings.Join(parts, ", ")
}

// cut is s cut to 300 runes, with "..." after the cut.
func cut(s string) string {
	if r := []rune(s); len(r) > 300 {
		return string(r[:300]) + "..."
	}
	return s
}

// pastDevice refuses the tool's account where it attributes to one of the
// serve's processes, or to all of them together, more than size bytes:
// the memory its devices hold, as the tool itself gives it (from). The
// table is then not believed, and says why (no account from this tool).
// size 0 (the tool gave none) leaves the fixed bound, maxMiB, alone.
func (t *Tool) pastDevice(size int64, devices, from string) {
	if size <= 0 {
		return
	}
	pids := make([]int, 0, len(t.Procs))
	for pid := range t.Procs {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	why := ""
	for _, pid := range pids {
		if t.Procs[pid] > size {
			why = fmt.Sprintf("attributes %d MiB to pid %d", t.Procs[pid]>>20, pid)
			break
		}
	}
	if why == "" && t.MemoryBytes > size {
		why = fmt.Sprintf("attributes %d MiB to the serve's processes", t.MemoryBytes>>20)
	}
	if why != "" {
		*t = Tool{Name: t.Name, Why: fmt.Sprintf("%s, past the %d MiB its %s hold (%s): not believed", why, size>>20, devices, from)}
	}
}

// nvidiaSize is the memory all the GPUs nvidia-smi shows hold, in bytes
// (--query-gpu=memory.total, MiB a GPU, summed: the compute apps' rows are
// matched to the serve by pid alone, and a process may use several GPUs).
// 0 where it gives none, or a row that is no size (a GPU's "[N/A]", a
// figure past maxMiB): then maxMiB alone bounds the figures.
func (r *Reader) nvidiaSize(ctx context.Context) int64 {
	out, err := r.run(ctx, "nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits")
	if err != nil {
		return 0
	}
	var sum int64
	rows := 0
	for line := range strings.SplitSeq(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		m, err := strconv.ParseInt(line, 10, 64)
		if rows++; err != nil || m <= 0 || m > maxMiB || rows > MaxToolRows {
			return 0
		}
		sum = min(sum+m, maxMiB)
	}
	return sum << 20
}
