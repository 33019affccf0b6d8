package config

import (
	"math"
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
)

func TestCheckLoad(t *testing.T) {
	t.Setenv("OLLAMA_NUM_PARALLEL", "")
	for _, tc := range []struct {
		name string
		set  func(c *Config)
		want string // "" for none
	}{
		{"off", func(c *Config) {}, ""},
		{"batch", func(c *Config) { c.Load = 4 }, ""},
		{"one", func(c *Config) { c.Load = 1 }, "--load 1: pass 0 (off) or 2 to 64 streams at once"},
		{"negative", func(c *Config) { c.Load = -3 }, "--load -3: pass 0 (off) or 2 to 64"},
		{"absurd", func(c *Config) { c.Load = 65 }, "--load 65: pass 0 (off) or 2 to 64"},
		{"most", func(c *Config) { c.Load = 64 }, ""},
		{"expect", func(c *Config) { c.Load, c.LoadExpect = 4, "both" }, `--load-expect "both": pass batch`},
		{"efficiency default", func(c *Config) { c.Load, c.LoadEfficiency = 2, 0 }, ""},
		{"efficiency negative", func(c *Config) { c.Load, c.LoadEfficiency = 4, -0.5 }, "--load-efficiency -0.5: pass a fraction above 0 and at most 1"},
		{"efficiency NaN", func(c *Config) { c.Load, c.LoadEfficiency = 4, math.NaN() }, "--load-efficiency NaN: pass a fraction"},
		{"efficiency at 1/N", func(c *Config) { c.Load, c.LoadEfficiency = 2, 0.5 },
			"--load-efficiency 0.5 at --load 2: a serve that time-slices one device between 2 streams decodes them at η 1/2 = 0.5, so a floor at or below it cannot tell time-slicing from batching; pass 0.51 or more (the default at --load 2, 0.65, is 30% above 1/2), leave it out, or ask more streams"},
		// 1/N and the least floor as they are: 0.333 is not "at or below
		// 0.33; pass more than 0.33".
		{"efficiency just under 1/3", func(c *Config) { c.Load, c.LoadEfficiency = 3, 0.333 }, "--load-efficiency 0.333 at --load 3: a serve that time-slices one device between 3 streams decodes them at η 1/3 = 0.3333, so a floor at or below it cannot tell time-slicing from batching; pass 0.34 or more (the default at --load 3, 0.50, is 50% above 1/3)"},
		{"efficiency just above 1/3", func(c *Config) { c.Load, c.LoadEfficiency = 3, 0.3334 }, ""},
		{"efficiency under 1/64", func(c *Config) { c.Load, c.LoadEfficiency = 64, 0.0156 }, "decodes them at η 1/64 = 0.01562, so a floor at or below it cannot tell time-slicing from batching; pass 0.02 or more"},
		{"efficiency below 1/N", func(c *Config) { c.Load, c.LoadEfficiency = 4, 0.2 }, "--load-efficiency 0.2 at --load 4: a serve that time-slices one device between 4 streams decodes them at η 1/4 = 0.25"},
		{"efficiency above 1/N", func(c *Config) { c.Load, c.LoadEfficiency = 4, 0.2501 }, ""},
		{"efficiency at 1/N, serial", func(c *Config) { c.Load, c.LoadEfficiency, c.LoadExpect = 2, 0.5, judge.LoadSerial }, ""},
		{"efficiency above 1", func(c *Config) { c.Load, c.LoadEfficiency = 4, 1.01 }, "--load-efficiency 1.01: pass a fraction above 0 and at most 1 of N single streams' rate, e.g. 0.50, the default at --load 4, or 0 for it"},
		// The example is a floor --load 2 takes: 0.5 is bad input there.
		{"efficiency above 1 at --load 2", func(c *Config) { c.Load, c.LoadEfficiency = 2, 1.5 }, "--load-efficiency 1.5: pass a fraction above 0 and at most 1 of N single streams' rate, e.g. 0.65, the default at --load 2, or 0 for it"},
		{"efficiency 1", func(c *Config) { c.Load, c.LoadEfficiency = 4, 1 }, ""},
		{"first token", func(c *Config) { c.Load, c.LoadFirstTokenMS = 4, -1 }, "--load-first-token-ms -1"},
		{"rounds even", func(c *Config) { c.Load, c.LoadMaxRounds = 4, 10 }, "--load-max-rounds 10: pass an odd number"},
		{"rounds zero", func(c *Config) { c.Load, c.LoadMaxRounds = 4, 0 }, "--load-max-rounds 0"},
		{"rounds past what a run's directory may hold", func(c *Config) { c.Load, c.LoadMaxRounds = 4, 101 }, "--load-max-rounds 101: pass an odd number from 1 to 99"},
		{"rounds one", func(c *Config) { c.Load, c.LoadMaxRounds = 4, 1 }, ""},
		{"rounds most", func(c *Config) { c.Load, c.LoadMaxRounds = 4, 99 }, ""},
		{"record", func(c *Config) { c.Load, c.Kind = 4, report.KindReference }, "--load 4: record makes a reference"},
		{"np", func(c *Config) { c.Load, c.Serve = 4, "llama-server -m {model} --port {port} -np 2" },
			"--load 4 is above what the serve was started for: -np 2 in --serve (llama-server's slots); pass --load 2 or less, start the serve for 4, or --load-expect serial"},
		{"np enough", func(c *Config) { c.Load, c.Serve = 4, "llama-server -m {model} --port {port} --parallel=4" }, ""},
		{"np serial", func(c *Config) {
			c.Load, c.LoadExpect, c.Serve = 4, judge.LoadSerial, "llama-server -m {model} --port {port} -np 1"
		}, ""},
		{"vllm", func(c *Config) { c.Load, c.Serve = 8, "llama-server --port {port} --max-num-seqs 4" }, "--max-num-seqs 4 in --serve (vLLM's sequences at once)"},
		{"ollama env word", func(c *Config) {
			c.Load, c.Preset, c.Serve = 4, "ollama", "env OLLAMA_NUM_PARALLEL=1 llama-server serve {port}"
		}, "OLLAMA_NUM_PARALLEL=1 in --serve (Ollama's requests at once)"},
		{"context", func(c *Config) {
			c.Load, c.Serve = 4, "llama-server -m {model} --port {port} -np 4 -c 512"
		}, "--serve: --ctx-size 512 shared among 4 slot(s) leaves 128 tokens a request, fewer than --max-tokens 128 and the longest prompt"},
		{"context enough", func(c *Config) {
			c.Load, c.Serve = 4, "llama-server -m {model} --port {port} -np 4 --ctx-size=4096"
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good(t)
			tc.set(&c)
			_, err := c.Check(found("llama-server", "env"))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestServeSlotsOllamaEnvironment(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "OLLAMA_NUM_PARALLEL" {
				return v
			}
			return ""
		}
	}
	n, where := ServeSlots("ollama", []string{"ollama", "serve"}, env("2"))
	if n != 2 || where != "OLLAMA_NUM_PARALLEL=2 in the environment the serve inherits (Ollama's requests at once)" {
		t.Errorf("%d, %q", n, where)
	}
	if n, _ := ServeSlots("ollama", []string{"ollama", "serve"}, env("")); n != 0 {
		t.Errorf("unset: %d", n)
	}
	if n, _ := ServeSlots("", []string{"/opt/bin/ollama", "serve"}, env("3")); n != 3 {
		t.Errorf("by executable: %d", n)
	}
	if n, _ := ServeSlots("vllm", []string{"vllm", "serve", "-np", "2"}, env("3")); n != 0 {
		t.Errorf("-np of another serve: %d", n)
	}
}

func TestLoadPresetExpect(t *testing.T) {
	for preset, want := range map[string]string{"ovms": judge.LoadSerial, "flm": judge.LoadSerial, "llama.cpp": judge.LoadBatch, "vllm-ascend": judge.LoadBatch, "ollama": judge.LoadBatch} {
		c := Default()
		c.Preset = preset
		if err := c.ApplyPreset(func(string) bool { return false }); err != nil {
			t.Fatal(err)
		}
		if c.LoadExpect != want {
			t.Errorf("%s: %q, want %q", preset, c.LoadExpect, want)
		}
		c.LoadExpect = "given"
		c.ApplyPreset(func(f string) bool { return f == "load-expect" })
		if c.LoadExpect != "given" {
			t.Errorf("%s: a given --load-expect was replaced", preset)
		}
	}
	c := Default()
	c.Load = 4
	if l := c.LoadLimits(); l.Expect != judge.LoadBatch || l.FirstTokenMS != 1200 || l.Efficiency != 0.5 || l.MaxRounds != 11 {
		t.Errorf("defaults %+v", l)
	}
	// At --load 2 the default floor sits above 1/2, time-slicing's η.
	c.Load = 2
	if l := c.LoadLimits(); l.Efficiency != judge.DefaultEfficiency(2) || l.Efficiency <= 0.5 {
		t.Errorf("defaults at --load 2: %+v", l)
	}
	c.LoadEfficiency = 0.55
	if l := c.LoadLimits(); l.Efficiency != 0.55 {
		t.Errorf("given: %+v", l)
	}
	c.LoadFirstTokenMS = 900
	if l := c.LoadLimits(); l.FirstTokenMS != 900 {
		t.Errorf("given %+v", l)
	}
}
