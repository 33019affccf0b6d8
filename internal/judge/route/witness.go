package route

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/quote"
)

// Witness is what the serve's own processes showed while the judged replies
// decoded, and what the serve said of itself after the warm-up: recorded
// facts (internal/witness reads them), weighed here with the log.
//
// A log names the route in words that change with every release; the
// kernel knows which device nodes the serve's processes hold open and which
// backend libraries they mapped, and, where the driver or the vendor's tool
// tells, how much device memory and engine time they used. So:
//
//   - a log that names the fast route while no process of the serve holds a
//     device of the fast route's classes or maps one of its backends is
//     not on the fast route: the route fails, saying both;
//   - a preset whose route is binary (on the device or nothing: OVMS told
//     --target_device NPU, FastFlowLM) is on the fast route where the log
//     is silent when the serve's processes used the device's memory or
//     engine time while the judged replies decoded; a node merely held
//     open proves little and names nothing;
//   - witnesses that cannot be read change nothing: the detail says "not
//     witnessed" and why, and the verdict rests on the log. What a bound
//     left unread (Cut) is not witnessed either, never "holds nothing";
//     but where the serve made itself too large to read (Excess), the
//     fast route is not taken on the log's word alone.
//
// The serve's own account (Account) is weighed like a log line that can
// name the slow route; one that names the fast route is only a plan.
type Witness struct {
	// Devices are the fast route's device node classes (globs such as
	// /dev/accel/accel*), Libraries its backend libraries' (globs of a
	// file name, such as libggml-cann*.so*), as the preset or
	// --witness-device and --witness-library name them.
	Devices   []string `json:"devices,omitempty"`
	Libraries []string `json:"libraries,omitempty"`
	// Binary says the preset's route is binary: usage names the fast
	// route where the log is silent.
	Binary bool `json:"binary,omitempty"`
	// SlowOnDevice says why the preset's slow route holds all of the
	// weights on the same device as its fast route (vLLM's eager mode):
	// the device's memory then names no fast route, and can only take a
	// PASS away.
	SlowOnDevice string `json:"slow_on_device,omitempty"`

	// Processes is how many of the serve's processes were read.
	Processes int `json:"processes"`
	// NotRead says why no witness could be read at all.
	NotRead string `json:"not_read,omitempty"`
	// Unread are the serve's processes whose descriptors or maps could
	// not be read, and why ("pid 42: permission denied"): one of them may
	// hold what the others do not.
	Unread []string `json:"unread,omitempty"`
	// Hiding are those of Unread whose real user and group are the
	// gate's, and are not dumpable: the serve's own process hid its
	// descriptors (prctl PR_SET_DUMPABLE, an executable this user cannot
	// read, or a set-id program, which changes only the effective ids),
	// as no other user's rules or hidepid did.
	Hiding []string `json:"hiding,omitempty"`
	// Excess says where the serve is past any healthy serve's size
	// (processes, lines of maps, descriptors and maps read before a
	// sample's time ran out, a backend's mapping larger than any
	// library's code): what the bounds left unread is the serve's own
	// doing.
	Excess []string `json:"excess,omitempty"`
	// Held are the device nodes of the classes held open, Mapped the
	// backend libraries mapped, by any of the serve's processes.
	Held   []string `json:"held,omitempty"`
	Mapped []string `json:"mapped,omitempty"`
	// Cut says what the bounds left unread (a sample's time, processes,
	// lines of maps), and which of what was seen were kept.
	Cut string `json:"cut,omitempty"`
	// Absent says why a run's witnesses are taken as having seen nothing
	// when it is judged again (its result.json's witness section deleted
	// or emptied): unlike Cut, it keeps no PASS on the log's word. Set
	// only when a run is read back, never written.
	Absent string `json:"-"`

	// Usage is the device memory and engine time the serve's processes
	// used over the judged replies, by source; NoUsage says why a source
	// did not witness any.
	Usage   []Usage  `json:"usage,omitempty"`
	NoUsage []string `json:"no_usage,omitempty"`

	// Account is what the serve said of its own placement after the
	// warm-up.
	Account *Account `json:"account,omitempty"`

	// Memory is the device memory the device's own account attributes
	// to the serve's processes, against the weights it was asked to
	// load (memory.go).
	Memory *Memory `json:"memory,omitempty"`
}

// Usage is what one source witnessed of the device's use.
type Usage struct {
	Source string `json:"source"` // "fdinfo" (DRM client usage stats), "nvidia-smi"
	// EngineNS is the engine time the serve's descriptors used from the
	// first sample to the last (the judged replies); SpanNS is the time
	// between them.
	EngineNS int64 `json:"engine_ns,omitempty"`
	SpanNS   int64 `json:"span_ns,omitempty"`
	// MemoryBytes is the device memory the serve's processes held at the
	// last sample, while the serve still ran.
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
}

// Account is what a serve says of its own placement (Ollama's /api/ps).
type Account struct {
	Source string `json:"source"` // what was asked: "GET /api/ps"
	Text   string `json:"text"`   // what it answered, bounded
	// Route is RouteFast or RouteSlow when the answer names one, "" when
	// it names none.
	Route string `json:"route,omitempty"`
	Why   string `json:"why,omitempty"` // "none of the model on the device: size_vram 0 of size 1234"
}

// Routes an Account can name.
const (
	RouteFast = "fast"
	RouteSlow = "slow"
)

// maxListed is how many held nodes or mapped libraries a detail names, and
// how many unread processes and usage sources; maxClasses how many device
// classes or backend libraries (a preset names up to 13); maxText how many
// runes of one entry it keeps. A witness section is read back from a run's
// result.json, which anyone may edit: a padded list of unread processes
// once made a route line of 14.9 MB.
const (
	maxListed  = 4
	maxClasses = 16
	maxText    = 300
)

// JudgeWitnessed is the route assertion with the witnesses weighed:
// the log alone when there are none (--witness off, or a run made before
// them).
func JudgeWitnessed(ev Evidence, w *Witness) Verdict {
	if w == nil {
		return Judge(ev)
	}
	ev = w.Account.fold(ev)
	return w.Memory.weigh(w.weigh(Judge(ev), ev), ev, w.noFast())
}

// fold puts the serve's account among the log's matches, as a line of its
// own would be: it names the slow route only where the log does not
// already. It never names the fast route: a serve's account of its own
// placement is what it expects, not where its runner put the weights
// (Ollama's /api/ps shows the split its scheduler planned, and a runner
// that finds no GPU library runs on the CPU while ps says 100% GPU:
// ollama/ollama#10369; users met it in #7323, #9068, #9704, #10445), so
// one that puts all of the model on the device is only a plan.
func (a *Account) fold(ev Evidence) Evidence {
	if a == nil {
		return ev
	}
	m := &Match{Text: a.Text, Pattern: a.Source, Why: a.Why}
	if a.Route == RouteFast && ev.Plan == nil {
		ev.Plan = m
	}
	if a.Route == RouteSlow && ev.Slow == nil {
		ev.Slow = m
	}
	return ev
}

// weigh weighs the witnesses against the route the log named (a).
func (w *Witness) weigh(a Verdict, ev Evidence) Verdict {
	if w.NotRead != "" {
		a.Detail += "; witnesses: not witnessed (" + clip(w.NotRead) + "): the verdict rests on the log"
		return a
	}
	if len(w.Devices) == 0 && len(w.Libraries) == 0 {
		a.Detail += "; witnesses: not witnessed: no device class or backend library of the fast route is known for this serve (--witness-device, --witness-library): the verdict rests on the log"
		return a
	}
	took := len(w.Held) > 0 || len(w.Mapped) > 0
	neither := ev.Fast == nil && ev.Slow == nil
	if a.OK && !took && len(w.Hiding) > 0 {
		a.OK = false
		a.Detail += fmt.Sprintf("; but %s, and %d of the serve's processes run as the gate's own user yet hide their descriptors from it (%s: not dumpable: prctl PR_SET_DUMPABLE, an executable this user cannot read, or a set-id program): the fast route is not taken on the log's word alone",
			w.seen(), len(w.Hiding), some(w.Hiding, maxListed))
		return a
	}
	if a.OK && !took && len(w.Excess) > 0 {
		a.OK = false
		a.Detail += fmt.Sprintf("; but %s, and the serve is past any healthy serve's size (%s): what the bounds left unread is its own doing: the fast route is not taken on the log's word alone",
			w.seen(), someSep(w.Excess, maxListed, "; "))
		return a
	}
	if a.OK && !took && len(w.Unread) > 0 {
		a.Detail += fmt.Sprintf("; witnesses: not witnessed: %s, and %d of the serve's processes could not be read (%s): the verdict rests on the log",
			w.seen(), len(w.Unread), some(w.Unread, maxListed))
		return a
	}
	if a.OK && !took && w.Cut != "" && w.Absent == "" {
		a.Detail += "; witnesses: not witnessed: " + w.seen() + ": what was left unread may hold what the rest does not: the verdict rests on the log"
		return a
	}
	if a.OK && !took {
		a.OK = false
		a.Detail += "; but " + w.seen() + ": this run is not on the fast route"
		return a
	}
	if !a.OK && neither && w.Binary && w.used() {
		a.OK = true
		a.Detail = "the serve log names neither route, and the preset's route is the device or nothing (docs/presets.md): " + w.seen() + ": the fast route"
		return a
	}
	a.Detail += "; witnessed: " + w.seen()
	if !a.OK && neither && w.Binary && took {
		a.Detail += "; a device held open proves little: no device memory or engine time used while the judged replies decoded was witnessed"
	}
	return a
}

// used reports whether any source witnessed device memory or engine time.
func (w *Witness) used() bool {
	for _, u := range w.Usage {
		if u.EngineNS > 0 || u.MemoryBytes > 0 {
			return true
		}
	}
	return false
}

// noFast says why the device's memory names no fast route for this run,
// "" where it may: the serve's slow route holds the weights on the device
// too, or the engines were read idle over the judged replies.
func (w *Witness) noFast() string {
	if w.SlowOnDevice != "" {
		return "the serve's slow route holds them on the device too (" + clip(w.SlowOnDevice) + "): the device's memory names no fast route for it"
	}
	if idle := w.idle(); idle != "" {
		return "its engines did no work while the judged replies decoded (" + idle + "): memory held is not memory used, and the serve log names neither route"
	}
	return ""
}

// idle says what the sources that read the engines' time over the judged
// replies saw, where none of them saw any: "engine busy 0 ms of 2.1 s
// decoding (fdinfo)"; "" where one saw some, or none read it.
func (w *Witness) idle() string {
	var saw []string
	for _, u := range w.Usage {
		if u.SpanNS <= 0 {
			continue
		}
		if u.EngineNS > 0 {
			return ""
		}
		saw = append(saw, u.text())
	}
	return someSep(saw, maxListed, "; ")
}

// seen says what the witnesses saw, in one clause: "the serve's processes
// (3 read) hold "/dev/accel/accel0" and map "libggml-cann.so"; engine busy
// 1.9 s of 2.1 s decoding (fdinfo)". Every path is quoted: the serve names
// its own files.
func (w *Witness) seen() string {
	s := fmt.Sprintf("the serve's processes (%d read) ", w.Processes)
	if len(w.Held) > 0 {
		s += "hold " + listed(w.Held)
	} else {
		s += "hold no device of the fast route's classes (" + some(w.Devices, maxClasses) + ")"
	}
	if len(w.Mapped) > 0 {
		s += " and map " + listed(w.Mapped)
	} else {
		s += " and map none of its backends (" + some(w.Libraries, maxClasses) + ")"
	}
	for i, u := range w.Usage {
		if i == maxListed {
			s += fmt.Sprintf("; %d more sources", len(w.Usage)-maxListed)
			break
		}
		s += "; " + u.text()
	}
	for i, why := range w.NoUsage {
		if i == maxListed {
			s += fmt.Sprintf("; %d more sources not witnessed", len(w.NoUsage)-maxListed)
			break
		}
		s += "; device usage not witnessed: " + clip(why)
	}
	if w.Cut != "" {
		s += "; " + clip(w.Cut)
	}
	if w.Absent != "" {
		s += "; " + clip(w.Absent)
	}
	return s
}

// text says what one source witnessed.
func (u Usage) text() string {
	var parts []string
	if u.SpanNS > 0 {
		parts = append(parts, fmt.Sprintf("engine busy %s of %s decoding", seconds(u.EngineNS), seconds(u.SpanNS)))
	}
	if u.MemoryBytes > 0 {
		parts = append(parts, "device memory "+bytesText(u.MemoryBytes))
	}
	if len(parts) == 0 {
		parts = append(parts, "no device memory or engine time")
	}
	return strings.Join(parts, ", ") + " (" + clip(u.Source) + ")"
}

// listed quotes the first maxListed of what was seen, and counts the rest.
func listed(xs []string) string {
	var q []string
	for i, x := range xs {
		if i == maxListed {
			q = append(q, fmt.Sprintf("%d more", len(xs)-maxListed))
			break
		}
		q = append(q, quote.Cut(x, deviceQuote))
	}
	return strings.Join(q, ", ")
}

// some joins the first most of xs, each clipped, and counts the rest:
// "pid 1: gone, pid 2: gone, 41203 more".
func some(xs []string, most int) string { return someSep(xs, most, ", ") }

// someSep is some with sep between the entries.
func someSep(xs []string, most int, sep string) string {
	var q []string
	for i, x := range xs {
		if i == most {
			q = append(q, fmt.Sprintf("%d more", len(xs)-most))
			break
		}
		q = append(q, clip(x))
	}
	return strings.Join(q, sep)
}

// clip is s cut to maxText runes, with "..." after the cut.
func clip(s string) string {
	if utf8.RuneCountInString(s) <= maxText {
		return s
	}
	return string([]rune(s)[:maxText]) + "..."
}

func seconds(ns int64) string { return fmt.Sprintf("%.3g s", float64(ns)/1e9) }

func bytesText(b int64) string {
	const mib = 1 << 20
	if b < mib {
		return fmt.Sprintf("%d bytes", b)
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/mib)
}
