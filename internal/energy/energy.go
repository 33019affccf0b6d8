// Package energy reads the runner's energy sensors while the serve decodes
// and turns their readings into joules per decoded token.
//
// A Source is one sensor: a cumulative energy counter (NVML's total
// energy, hwmon's energyN_input, RAPL's energy_uj, any counter file) or an
// instantaneous power (hwmon's powerN_average or powerN_input, npu-smi, any
// power file). A Meter polls a source in the background; Integrate (pure)
// turns its readings into the joules of a window and the idle power around
// it.
package energy

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/vendortool"
)

// Quantities a source gives.
const (
	Counter = "energy" // a cumulative energy counter, joules
	Power   = "power"  // an instantaneous (or averaged) power, watts
)

// Methods: whether the sensor measures, models, or its maker does not say.
const (
	Measured  = "measured"
	Estimated = "estimated"
	NotKnown  = "not known"
)

// Info declares what a source gives.
type Info struct {
	Name     string // "nvml:0", "hwmon:amdgpu", "rapl:0", "counter:/path"
	Quantity string // Counter or Power
	Boundary string // what the figure covers: chip, board, package, system
	Method   string // Measured, Estimated or NotKnown
	// Period is the sensor's update period as declared; 0 when not known
	// (the readings then tell it).
	Period time.Duration
	// Lag is the length of the trailing average a power reading is, 0 for
	// an instantaneous one: the reading describes the Lag before it, so
	// it is placed Lag/2 earlier.
	Lag time.Duration
	// Range is the counter's range in joules, after which it wraps to 0;
	// 0 when not known (a counter that goes back is then an error).
	Range float64
	// Poll is how often the meter reads the source.
	Poll time.Duration
}

// Source is one sensor.
type Source interface {
	Info() Info
	// Read returns the counter in joules (Counter) or the power in watts
	// (Power).
	Read() (float64, error)
	Close() error
}

// Off is the --energy value that turns the readings off; Auto picks the
// first source the runner can read.
const (
	Off  = "off"
	Auto = "auto"
)

// Units of counter: and power: files.
var (
	energyUnits = map[string]float64{"uj": 1e-6, "mj": 1e-3, "j": 1}
	powerUnits  = map[string]float64{"uw": 1e-6, "mw": 1e-3, "w": 1}
)

// Spec is a parsed --energy value.
type Spec struct {
	Kind  string // Off, Auto, "nvml", "hwmon", "rapl", "npu-smi", "counter", "power"
	Arg   string // the device (nvml:1, hwmon:amdgpu, rapl:1, npu-smi:0) or the file
	Scale float64
}

// Kinds are the sources --energy names, in the order auto tries them when
// the preset names none: on Linux nvml, npu-smi, hwmon and rapl, on
// Windows nvml and emi (osKinds).
var Kinds = osKinds

// ParseSpec checks an --energy value: off, auto, nvml[:N], npu-smi[:N],
// hwmon[:NAME], rapl[:N], counter:PATH[:UNIT] or power:PATH[:UNIT].
func ParseSpec(s string) (Spec, error) {
	kind, arg, _ := strings.Cut(s, ":")
	switch kind {
	case Off, Auto:
		if arg != "" {
			return Spec{}, fmt.Errorf("%q takes no argument", kind)
		}
		return Spec{Kind: kind}, nil
	case "nvml", "npu-smi", "rapl", "emi":
		if arg != "" && !digits(arg) {
			return Spec{}, fmt.Errorf("%s:%s: the device is a number (%s:0)", kind, arg, kind)
		}
		return Spec{Kind: kind, Arg: arg}, nil
	case "hwmon":
		if strings.ContainsAny(arg, "/\x00") {
			return Spec{}, fmt.Errorf("hwmon:%s: the name is a hwmon device's name (its name file), not a path", arg)
		}
		return Spec{Kind: kind, Arg: arg}, nil
	case "counter", "power":
		units := energyUnits
		def := "uj"
		if kind == "power" {
			units, def = powerUnits, "uw"
		}
		path, unit := arg, def
		if i := strings.LastIndexByte(arg, ':'); i >= 0 {
			if _, ok := units[strings.ToLower(arg[i+1:])]; ok {
				path, unit = arg[:i], strings.ToLower(arg[i+1:])
			}
		}
		if path == "" {
			return Spec{}, fmt.Errorf("%s: needs a file: %s:PATH[:UNIT]", kind, kind)
		}
		if !localAbs(path) {
			return Spec{}, fmt.Errorf("%s:%s: the file must be an absolute path%s", kind, path, absHint)
		}
		return Spec{Kind: kind, Arg: path, Scale: units[unit]}, nil
	}
	return Spec{}, fmt.Errorf("%q is not a source: off, auto, nvml[:N], npu-smi[:N], hwmon[:NAME], rapl[:N], emi[:N], counter:PATH[:uj|mj|j] or power:PATH[:uw|mw|w]", s)
}

func digits(s string) bool {
	if s == "" || len(s) > 4 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Env is where the sources are found: the sysfs root (/sys) and how a
// vendor's library and tool are reached. Tests point them elsewhere.
type Env struct {
	Sys  string // "/sys"
	NVML func(dev int) (Source, error)
	// Tools are the vendors' tools, found on PATH before the serve
	// started and run with the serve's allow-listed environment; nil
	// finds them when a source is opened.
	Tools *vendortool.Set
	// ServeUID, where not 0, is the serve's user: a counter: or power:
	// file it owns is refused at each read (one it made in the sensor's
	// place once the configuration was checked). On Windows, where the
	// serve runs as the gate's own account, any value but 0 refuses a
	// file that account owns.
	ServeUID uint32
	// EMI lists the platform's energy meters (Windows's Energy Meter
	// Interface); nil is SystemEMI.
	EMI func() ([]EMIDevice, error)
}

// ErrUnavailable marks a source that this runner does not have or cannot
// read; its message says which and why.
var ErrUnavailable = errors.New("unavailable")

type unavailable struct{ why string }

func (u *unavailable) Error() string { return u.why }
func (u *unavailable) Is(err error) bool {
	return err == ErrUnavailable
}

func notHere(format string, args ...any) error {
	return &unavailable{fmt.Sprintf(format, args...)}
}

// Open opens the source spec names. With Auto it tries order (the preset's
// sources, else Kinds) and returns the first that reads, with why each
// before it was passed over.
func Open(spec Spec, order []string, env Env) (Source, []string, error) {
	if spec.Kind != Auto {
		src, err := openOne(spec, env)
		return src, nil, err
	}
	if len(order) == 0 {
		order = Kinds
	}
	order = withOSKinds(order)
	var passed []string
	for _, kind := range order {
		src, err := openOne(Spec{Kind: kind}, env)
		if err == nil {
			return src, passed, nil
		}
		passed = append(passed, kind+": "+err.Error())
	}
	return nil, passed, notHere("no energy source can be read here (%s)", strings.Join(passed, "; "))
}

func openOne(spec Spec, env Env) (Source, error) {
	var src Source
	var err error
	switch spec.Kind {
	case "counter":
		src, err = openFile(Info{Name: "counter:" + spec.Arg, Quantity: Counter, Boundary: "as the file's sensor covers it", Method: NotKnown, Poll: DefaultPoll}, spec.Arg, spec.Scale, env.ServeUID)
	case "power":
		src, err = openFile(Info{Name: "power:" + spec.Arg, Quantity: Power, Boundary: "as the file's sensor covers it", Method: NotKnown, Poll: DefaultPoll}, spec.Arg, spec.Scale, env.ServeUID)
	case "hwmon":
		src, err = openHwmon(env.sys(), spec.Arg)
	case "rapl":
		src, err = openRAPL(env.sys(), spec.Arg)
	case "nvml":
		dev := atoi(spec.Arg)
		if env.NVML == nil {
			return nil, notHere("NVML is not available in this build")
		}
		src, err = env.NVML(dev)
	case "npu-smi":
		src, err = openNPUSMI(env.Tools, atoi(spec.Arg))
	case "emi":
		src, err = openEMI(env, atoi(spec.Arg))
	default:
		return nil, fmt.Errorf("%q is not a source", spec.Kind)
	}
	if err != nil {
		return nil, err
	}
	// A source that opens but cannot be read is unavailable too.
	if _, err := src.Read(); err != nil {
		src.Close()
		return nil, notHere("%s: %v", src.Info().Name, err)
	}
	return src, nil
}

func (e Env) sys() string {
	if e.Sys == "" {
		return "/sys"
	}
	return e.Sys
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// DefaultEnv is where a run finds its sources: /sys, and nvidia-smi and
// npu-smi of tools (vendortool.Find, before the serve starts).
func DefaultEnv(tools *vendortool.Set) Env {
	return Env{Sys: "/sys", NVML: OpenNvidiaSMI(tools), Tools: tools}
}

// ToolOf is the program on PATH a source of info runs ("nvidia-smi",
// "npu-smi"), or "" for one that reads files.
func ToolOf(info Info) string {
	switch {
	case strings.HasPrefix(info.Name, "nvml:"):
		return "nvidia-smi"
	case strings.HasPrefix(info.Name, "npu-smi:"):
		return "npu-smi"
	}
	return ""
}

// Found is whether one kind of source can be read here, by this user.
type Found struct {
	Kind string
	Info Info   // when it can
	Why  string // when it cannot
}

// Survey tries each kind of source auto can use, as this user, and says
// which can be read and why each other cannot: npu-hold doctor's energy
// lines.
func Survey(env Env) []Found {
	var out []Found
	for _, kind := range Kinds {
		src, err := openOne(Spec{Kind: kind}, env)
		if err != nil {
			out = append(out, Found{Kind: kind, Why: err.Error()})
			continue
		}
		out = append(out, Found{Kind: kind, Info: src.Info()})
		src.Close()
	}
	return out
}

// DefaultPoll is how often a meter reads a sensor that is cheap to read:
// fast enough to see where a counter moves for sensors that update every
// 100 ms or so, at about a hundredth of a core.
const DefaultPoll = 20 * time.Millisecond
