package witness

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/witness/libname"
)

// Where the OS has no proc file system (Windows), the serve's processes
// are read otherwise, and judged by the same rules:
//
//   - the backends mapped are the modules each process has loaded
//     (Modules: a module snapshot of the process), named like the fast
//     route's libraries on that OS (libname: ggml-cuda.dll for
//     libggml-cuda.so);
//   - there are no device nodes to hold: the device's use is the
//     kernel's own statistics of each adapter by process (Adapters: on
//     Windows D3DKMTQueryStatistics, the figures behind Task Manager's
//     per-process GPU and NPU columns), engine running time between the
//     samples and device memory committed at the last, over the adapters
//     of the fast route's classes (adapterClasses);
//   - nvidia-smi as on Linux, where the classes are NVIDIA's.
//
// What cannot be read is said, and is "not witnessed".

// MaxModules bounds the modules of one process read (a serve loads a few
// hundred).
const MaxModules = 16384

// ErrGone is what Modules and Adapters answer for a process that exited
// since the tree was listed.
var ErrGone = errors.New("the process is gone")

// Adapter is a GPU or NPU adapter whose statistics the kernel keeps.
type Adapter struct {
	LUID   uint64 // the adapter's locally unique id
	Vendor uint32 // PCI vendor id, 0 where unknown
	Device uint32 // PCI device id
	// Render says it renders (a GPU), ComputeOnly that it only computes
	// (an NPU: MCDM, no render and no display), Software that it is the
	// CPU's (Microsoft Basic Render Driver, WARP).
	Render, ComputeOnly, Software bool
}

// String names the adapter in a witness's words.
func (a Adapter) String() string {
	kind := "GPU"
	switch {
	case a.Software:
		kind = "software"
	case a.ComputeOnly:
		kind = "NPU (compute only)"
	case !a.Render:
		kind = "display only"
	}
	return fmt.Sprintf("adapter %#x (%04x:%04x, %s)", a.LUID, a.Vendor, a.Device, kind)
}

// AdapterUse is one process's use of one adapter: engine running time
// summed over the adapter's engines (nodes) since the process started,
// and device memory committed over its segments now.
type AdapterUse struct {
	RunningNS   int64
	MemoryBytes int64
}

// Adapters reads the kernel's per-process statistics of the adapters.
type Adapters interface {
	// List is the adapters there are.
	List() ([]Adapter, error)
	// Use is process pid's use of adapter a (ErrGone where it exited).
	Use(pid int, a Adapter) (AdapterUse, error)
}

// PCI vendor ids of the classes' vendors.
const vendorNVIDIA = 0x10de

// adapterClasses reports whether an adapter is of the fast route's
// device classes, the same globs Linux matches its nodes with: the
// kernel's accelerator nodes (/dev/accel/) are a compute-only adapter
// (an NPU), NVIDIA's nodes an NVIDIA adapter, a render node or ROCm's
// kfd any GPU that renders. The CPU's software adapter is none.
func adapterClasses(devices []string, a Adapter) bool {
	if a.Software {
		return false
	}
	for _, g := range devices {
		switch {
		case strings.HasPrefix(g, "/dev/accel/"):
			if a.ComputeOnly {
				return true
			}
		case strings.HasPrefix(g, "/dev/nvidia"):
			if a.Vendor == vendorNVIDIA {
				return true
			}
		case strings.HasPrefix(g, "/dev/dri/"), g == "/dev/kfd":
			if a.Render {
				return true
			}
		}
	}
	return false
}

// sampleLoaded is Sample where the modules are read (Modules): the
// processes' loaded modules, and the adapters' statistics of each.
func (r *Reader) sampleLoaded(ctx context.Context, pids []int) Sample {
	s := Sample{At: time.Now(), Clients: map[string]Client{}, Kernel: map[string]Client{}, procs: len(pids)}
	if len(pids) > MaxProcs {
		s.Cut = append(s.Cut, fmt.Sprintf("%d of the serve's %d processes read (at most %d)", MaxProcs, len(pids), MaxProcs))
		s.Excess = append(s.Excess, fmt.Sprintf("%d processes, where a healthy serve has a few", len(pids)))
		pids = pids[:MaxProcs]
	}
	wait := cmp.Or(r.Wait, SampleWait)
	rctx, cancel := context.WithTimeoutCause(ctx, wait, fmt.Errorf("%w (at most %s)", errSampleWait, wait))
	defer cancel()
	modules := r.Modules
	if modules == nil {
		modules = LoadedModules
	}
	adapters, why := r.adapters()
	names := slices.Concat(r.Libraries, libname.Of(r.Libraries))
	mapped := map[string]bool{}
	var unread []string
	for i, pid := range pids {
		if rctx.Err() != nil {
			s.Cut = append(s.Cut, fmt.Sprintf("the modules of %d of the serve's %d processes read: %s", i, len(pids), stopped(rctx)))
			break
		}
		mods, err := modules(pid)
		switch {
		case errors.Is(err, ErrGone):
			continue
		case err != nil:
			s.Unread = append(s.Unread, fmt.Sprintf("pid %d: %s", pid, reason(err)))
			continue
		}
		if len(mods) > MaxModules {
			s.Cut = append(s.Cut, fmt.Sprintf("pid %d: %d of its %d modules read", pid, MaxModules, len(mods)))
			s.Excess = append(s.Excess, fmt.Sprintf("pid %d: %d modules loaded, where a healthy serve loads a few hundred", pid, len(mods)))
			mods = mods[:MaxModules]
		}
		for _, m := range mods {
			if libname.Match(names, m) {
				mapped[m] = true
			}
		}
		s.Processes++
		for _, a := range adapters {
			u, err := r.Adapters.Use(pid, a)
			if errors.Is(err, ErrGone) {
				break
			}
			if err != nil {
				unread = append(unread, fmt.Sprintf("pid %d, %s: %s", pid, a, reason(err)))
				continue
			}
			s.Kernel[fmt.Sprintf("pid %d %s", pid, a)] = Client{EngineNS: max(u.RunningNS, 0), Engines: true, MemoryBytes: max(u.MemoryBytes, 0), Memory: true}
		}
	}
	switch {
	case why != "":
		s.KernelWhy = why
	case len(unread) > 0 && len(s.Kernel) == 0:
		s.KernelWhy = "the adapters' statistics of no process could be read: " + joinSome(unread, 4)
	case len(unread) > 0:
		s.Cut = append(s.Cut, "the adapters' statistics of some processes not read: "+joinSome(unread, 4))
	}
	s.Mapped = kept(mapped, &s.Cut, "libraries")
	if r.nvidia() {
		s.Tools = append(s.Tools, r.nvidiaSMI(ctx, pids, nil))
	}
	return s
}

// adapters is the adapters of the fast route's classes whose statistics
// are read, or why none is.
func (r *Reader) adapters() ([]Adapter, string) {
	if r.Adapters == nil {
		r.Adapters = SystemAdapters()
	}
	if r.Adapters == nil {
		return nil, "the kernel keeps no adapter statistics by process that this OS lets be read"
	}
	if len(r.Devices) == 0 {
		return nil, "no device class of the fast route is known for this serve (--witness-device)"
	}
	all, err := r.Adapters.List()
	if err != nil {
		return nil, "the adapters could not be listed: " + reason(err)
	}
	var ours []Adapter
	for _, a := range all {
		if adapterClasses(r.Devices, a) {
			ours = append(ours, a)
		}
	}
	if len(ours) == 0 {
		var seen []string
		for _, a := range all {
			seen = append(seen, a.String())
		}
		return nil, fmt.Sprintf("none of the %d adapters is of the fast route's classes (%s)%s", len(all), joinSome(r.Devices, 4), listedOr(seen))
	}
	return ours, ""
}

func listedOr(seen []string) string {
	if len(seen) == 0 {
		return ""
	}
	return ": " + joinSome(seen, 4)
}

// joinSome joins the first most of xs, and counts the rest.
func joinSome(xs []string, most int) string {
	if len(xs) <= most {
		return strings.Join(xs, ", ")
	}
	return strings.Join(xs[:most], ", ") + fmt.Sprintf(", %d more", len(xs)-most)
}

// kernelUsage is the engine time the serve's processes used on the
// adapters between the samples, and their device memory at the last,
// from the kernel's statistics; nothing where they were not read at all
// (the proc file system was).
func kernelUsage(first, last Sample, usage []route.Usage, none []string) ([]route.Usage, []string) {
	switch {
	case last.KernelWhy != "":
		return usage, append(none, "d3dkmt: "+last.KernelWhy)
	case last.Kernel == nil:
		return usage, none
	}
	u := route.Usage{Source: "d3dkmt", SpanNS: last.At.Sub(first.At).Nanoseconds()}
	for id, c := range last.Kernel {
		u.EngineNS += max(c.EngineNS-first.Kernel[id].EngineNS, 0)
		u.MemoryBytes += c.MemoryBytes
	}
	return append(usage, u), none
}
