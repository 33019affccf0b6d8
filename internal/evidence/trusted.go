package evidence

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/witness/libname"
)

// Trusted is what whoever judges an artifact sets of their own where
// result.json holds the run's settings: the load assertion's limits and the
// fast route's witness classes. publish and the fleet merge judge a fork's
// artifact, whose result.json is the fork's to write: its load.limits and
// its witness section's classes (devices, libraries, binary) are claims, and
// so is the absence of either section. What the run observed stays its
// evidence, as its serve.log and replies are: the load rounds' replies, and
// what the witnesses saw (processes, held, mapped, unread, hiding, not_read,
// usage, the serve's own account).
type Trusted struct {
	// Load is the load assertion's limits. Streams above 0 asks for load:
	// an artifact without rounds of that many streams fails the load
	// row. Streams 0 asks none: rounds the artifact holds are judged all
	// the same, with these limits, at the streams they were asked with.
	Load judge.LoadLimits
	// Witness says whether the serve's processes witness the route (the
	// gate's --witness on); Devices and Libraries are the fast route's
	// classes, Binary whether its route is the device or nothing
	// (config.PresetWitnesses).
	Witness   bool
	Devices   []string
	Libraries []string
	Binary    bool
	// SlowOnDevice: the preset's slow route holds the weights on the
	// same device, so device memory names no fast route
	// (config.PresetWitnesses).
	SlowOnDevice string
}

// Trust puts t's settings into res, read from an artifact, in place of the
// ones its result.json holds, before it is judged (Judge). note is what the
// judge should hear of its own settings, if anything: an artifact holding
// load rounds where no load is asked, whose deletion would go unseen.
func Trust(res *report.Result, t Trusted) (note string) {
	var notes []string
	if n := trustLoad(res, t.Load); n != "" {
		notes = append(notes, n)
	}
	if n := trustWitness(res, t); n != "" {
		notes = append(notes, n)
	}
	return strings.Join(notes, "; ")
}

// trustLoad judges the artifact's load rounds with the limits l.
func trustLoad(res *report.Result, l judge.LoadLimits) (note string) {
	lr := res.Load
	if l.Streams == 0 {
		if lr != nil {
			// The streams the run asked, which its rounds hold
			// (report.Read refuses a round of another size).
			l.Streams = lr.Limits.Streams
			if l.Efficiency == 0 {
				l.Efficiency = judge.DefaultEfficiency(l.Streams)
			}
			lr.Limits = l
			note = fmt.Sprintf("%s holds load rounds of %d streams, while no --load is asked here: they are judged all the same, but the same artifact with its load section deleted would have no load row at all; pass the gate's --load %d", report.ResultFile, l.Streams, l.Streams)
		}
		return note
	}
	if lr == nil {
		res.Load = &judge.LoadRun{Limits: l, Skipped: fmt.Sprintf("%s holds no load section, while --load %d is asked here (a run asked --load writes its rounds there)", report.ResultFile, l.Streams)}
		return ""
	}
	for i, rd := range lr.Rounds {
		if len(rd) != l.Streams {
			res.Load = &judge.LoadRun{Limits: l, Skipped: fmt.Sprintf("%s's load round %d holds %d streams, while --load %d is asked here", report.ResultFile, i+1, len(rd), l.Streams)}
			return ""
		}
	}
	lr.Limits = l
	return ""
}

// Why the witnesses of an artifact are not believed.
const (
	noWitness    = "result.json holds no witness section, which a run with witnesses on writes (it was deleted, or the run had --witness off or was made before witnesses): nothing is taken as witnessed"
	emptyWitness = "result.json's witness section names no process read and no reason (the gate writes one or the other): nothing is taken as witnessed"
)

// trustWitness weighs the artifact's witnesses against t's classes. note
// says when the run weighed them against classes of its own while t knows
// none: they are not weighed here, and a judge given no --preset would not
// hear it otherwise.
func trustWitness(res *report.Result, t Trusted) (note string) {
	if !t.Witness {
		res.Witness = nil
		return ""
	}
	known := len(t.Devices) > 0 || len(t.Libraries) > 0
	w := res.Witness
	if !known && w != nil && (len(w.Devices) > 0 || len(w.Libraries) > 0) {
		note = fmt.Sprintf("%s's witnesses were weighed by the run against %d device classes and %d backend libraries, while none is known here: they are not weighed, and the route rests on the log; pass the gate's --preset (or its --witness-device and --witness-library)",
			report.ResultFile, len(w.Devices), len(w.Libraries))
	}
	switch {
	case w == nil:
		w = &route.Witness{}
		if known {
			w.Absent = noWitness
		}
		res.Witness = w
	case known && w.Processes <= 0 && w.NotRead == "":
		w.Absent = emptyWitness
	}
	w.Devices, w.Libraries, w.Binary, w.SlowOnDevice = slices.Clone(t.Devices), slices.Clone(t.Libraries), t.Binary, t.SlowOnDevice
	// What the run saw held and mapped, of these classes only: the
	// reader keeps what matches its classes, and the run's were its own.
	w.Held = slices.DeleteFunc(w.Held, func(node string) bool { return !matchAny(t.Devices, node) })
	// A library's name matches as on the OS it ran on (a Windows run's
	// ggml-cuda.dll for libggml-cuda*.so*).
	w.Mapped = slices.DeleteFunc(w.Mapped, func(file string) bool { return !libname.Match(t.Libraries, file) })
	return note
}

// matchAny reports whether name matches one of the globs (path.Match, as
// the witness reader matches them).
func matchAny(globs []string, name string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}
