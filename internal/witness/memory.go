package witness

import (
	"fmt"
	"slices"
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
