package config

import (
	"errors"
	"fmt"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/energy"
)

// DefaultEnergyIdle is how long the serve's idle power is read before the
// first judged request and after the last, at least: a window of ten
// periods of a sensor that updates every 100 ms.
const DefaultEnergyIdle = time.Second

// MaxEnergyIdle bounds --energy-idle: each run pays it twice.
const MaxEnergyIdle = time.Minute

// checkEnergy checks --energy, --energy-idle and --max-joules-per-token. A
// ceiling needs a source this runner can read now: one that cannot be read
// is bad input, found before anything starts.
func (c *Config) checkEnergy(p *Plan) []error {
	var errs []error
	spec, err := energy.ParseSpec(c.Energy)
	if err != nil {
		errs = append(errs, fmt.Errorf("--energy: %v", err))
	}
	if c.EnergyIdle < 0 || c.EnergyIdle > MaxEnergyIdle {
		errs = append(errs, fmt.Errorf("--energy-idle %v: pass a duration from 0 (no idle reading, no net figure) to %v, e.g. 1s", c.EnergyIdle, MaxEnergyIdle))
	}
	p.EnergySpec, p.EnergyOrder = spec, Presets[c.Preset].Energy
	if p.EnergyEnv.Sys == "" {
		p.EnergyEnv = energy.DefaultEnv(p.Tools)
	}
	if err != nil || !(c.MaxJoulesPerToken > 0) {
		return errs
	}
	if spec.Kind == energy.Off {
		return append(errs, fmt.Errorf("--max-joules-per-token %g needs an energy source, and --energy is off; pass --energy auto or a source", c.MaxJoulesPerToken))
	}
	if c.EnergyIdle == 0 {
		errs = append(errs, fmt.Errorf("--max-joules-per-token %g judges the net figure, which needs the idle power: --energy-idle 0 reads none; pass e.g. --energy-idle 1s", c.MaxJoulesPerToken))
	}
	src, _, err := energy.Open(spec, p.EnergyOrder, p.EnergyEnv)
	if err != nil {
		what := "--energy " + c.Energy
		if errors.Is(err, energy.ErrUnavailable) {
			return append(errs, fmt.Errorf("--max-joules-per-token %g needs an energy source this runner can read, and %s has none: %v (npu-hold doctor lists the sources; docs/measuring.md: energy)", c.MaxJoulesPerToken, what, err))
		}
		return append(errs, fmt.Errorf("%s: %v", what, err))
	}
	src.Close()
	return errs
}
