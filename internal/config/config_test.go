package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/prompts"
)

// found finds only the executables named here.
func found(names ...string) LookPath {
	return func(file string) (string, error) {
		for _, n := range names {
			if file == n {
				return "/usr/bin/" + n, nil
			}
		}
		return "", &os.PathError{Op: "exec", Path: file, Err: errors.New("executable file not found in $PATH")}
	}
}

func good(t *testing.T) Config {
	c := Default()
	c.Serve = "llama-server -m {model} --port {port} --host 127.0.0.1"
	c.Model = "/models/Qwen3-0.6B.gguf"
	c.Out = filepath.Join(t.TempDir(), "out")
	return c
}

func TestCheckGood(t *testing.T) {
	c := good(t)
	p, err := c.Check(found("llama-server"))
	if err != nil {
		t.Fatalf("Check() error = %v", err)
	}
	wantArgv := []string{"llama-server", "-m", "/models/Qwen3-0.6B.gguf", "--port", "{port}", "--host", "127.0.0.1"}
	if diff := cmp.Diff(wantArgv, p.Argv); diff != "" {
		t.Errorf("Argv (-want +got):\n%s", diff)
	}
	if p.Executable != "/usr/bin/llama-server" {
		t.Errorf("Executable = %q", p.Executable)
	}
	if diff := cmp.Diff(AutoHealthPaths, p.HealthPaths); diff != "" {
		t.Errorf("HealthPaths (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(prompts.Builtin(), p.Prompts); diff != "" {
		t.Errorf("Prompts (-want +got):\n%s", diff)
	}
	if fi, err := os.Stat(c.Out); err != nil || !fi.IsDir() {
		t.Errorf("Check() did not create --out: %v", err)
	}
	if l := c.Limits(); l.Floor != 60 || l.FirstTokenMS != 600 || l.RateSource != "client" {
		t.Errorf("Limits() = %+v", l)
	}
}

func TestCheckOptions(t *testing.T) {
	c := good(t)
	c.Health = "/api/v1/health"
	pf := filepath.Join(t.TempDir(), "prompts.txt")
	os.WriteFile(pf, []byte("one\n{\"prompt\":\"two\",\"expect\":\"x\"}\n"), 0o644)
	c.Prompts = pf
	c.Hold = "command:npu-hold"
	c.Out = ""
	p, err := c.Check(found("llama-server", "npu-hold"))
	if err != nil {
		t.Fatalf("Check() error = %v", err)
	}
	if diff := cmp.Diff([]string{"/api/v1/health"}, p.HealthPaths); diff != "" {
		t.Errorf("HealthPaths (-want +got):\n%s", diff)
	}
	if len(p.Prompts) != 2 || p.Prompts[1].Expect != "x" {
		t.Errorf("Prompts = %+v, want the file's two", p.Prompts)
	}
	if p.HoldCommand != "/usr/bin/npu-hold" {
		t.Errorf("HoldCommand = %q", p.HoldCommand)
	}
}

func TestCheckBad(t *testing.T) {
	readOnly := filepath.Join(t.TempDir(), "ro")
	os.Mkdir(readOnly, 0o555)
	used := t.TempDir()
	os.WriteFile(filepath.Join(used, "reply_1.json"), []byte("{}"), 0o644)
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)

	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"empty serve", func(c *Config) { c.Serve = "  " }, "--serve is empty"},
		{"unbalanced quotes", func(c *Config) { c.Serve = `llama-server -m '{model}` }, "--serve: a single quote (') is not closed"},
		{"executable not found", func(c *Config) { c.Serve = "llama-serverx --port {port}" }, `--serve: the executable "llama-serverx" was not found`},
		{"model missing for {model}", func(c *Config) { c.Model = "" }, "--serve uses {model} but --model is empty"},
		{"no {port} with port 0", func(c *Config) { c.Serve = "llama-server -m {model}" }, "--serve has no {port} and --port is 0"},
		{"port too high", func(c *Config) { c.Port = 70000 }, "--port 70000 is out of range"},
		{"port negative", func(c *Config) { c.Port = -1 }, "--port -1 is out of range"},
		{"health without slash", func(c *Config) { c.Health = "health" }, `--health "health": pass a path that starts with /`},
		{"replies below 1", func(c *Config) { c.Replies = 0 }, "--replies 0: pass 1 or more"},
		{"warmup negative", func(c *Config) { c.Warmup = -1 }, "--warmup -1: pass 0 or more"},
		{"max-tokens below 2", func(c *Config) { c.MaxTokens = 1 }, "--max-tokens 1: pass 2 or more"},
		{"floor zero", func(c *Config) { c.Floor = 0 }, "--floor 0: pass a positive number"},
		{"floor negative", func(c *Config) { c.Floor = -5 }, "--floor -5: pass a positive number"},
		{"floor infinite", func(c *Config) { c.Floor = inf() }, "--floor +Inf: pass a positive number"},
		{"floor NaN", func(c *Config) { c.Floor = nan() }, "--floor NaN: pass a positive number"},
		{"first-token zero", func(c *Config) { c.FirstTokenMS = 0 }, "--first-token-ms 0: pass a positive number"},
		{"first-token infinite", func(c *Config) { c.FirstTokenMS = inf() }, "--first-token-ms +Inf"},
		{"invalid route pattern", func(c *Config) { c.FastRoute = []string{"route ("} }, `--fast-route "route (" is not a valid RE2 pattern`},
		{"missing prompts file", func(c *Config) { c.Prompts = "/nonexistent/p.txt" }, "--prompts: open /nonexistent/p.txt"},
		{"thinking", func(c *Config) { c.Thinking = "maybe" }, `--thinking "maybe": pass on or off`},
		{"rate source", func(c *Config) { c.RateSource = "both" }, `--rate-source "both": pass client or server`},
		{"ready timeout", func(c *Config) { c.ReadyTimeout = 0 }, "--ready-timeout 0s: pass a positive duration"},
		{"request timeout", func(c *Config) { c.RequestTimeout = -time.Second }, "--request-timeout -1s"},
		{"hold timeout", func(c *Config) { c.HoldTimeout = 0 }, "--hold-timeout 0s"},
		{"device with a slash", func(c *Config) { c.Device = "../etc" }, `--device "../etc"`},
		{"hold unknown", func(c *Config) { c.Hold = "maybe" }, `--hold "maybe": pass builtin, none, or command:NAME`},
		{"hold command empty", func(c *Config) { c.Hold = "command:" }, `--hold "command:"`},
		{"hold command not found", func(c *Config) { c.Hold = "command:nohold" }, `--hold command:nohold: "nohold" was not found`},
		{"check name empty", func(c *Config) { c.CheckName = " " }, "--check-name is empty"},
		{"comment", func(c *Config) { c.Comment = "always" }, `--comment "always": pass on-pr or never`},
		{"out not writable", func(c *Config) { c.Out = readOnly }, "--out " + readOnly + " cannot be written"},
		{"out is a file", func(c *Config) { c.Out = file + "/sub" }, "--out " + file + "/sub cannot be created"},
		{"out holds a run", func(c *Config) { c.Out = used }, "already holds a run (reply_1.json)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "out not writable" && os.Geteuid() == 0 {
				t.Skip("root writes to any directory")
			}
			c := good(t)
			tt.edit(&c)
			p, err := c.Check(found("llama-server"))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Check() = %v, %v; want an error containing %q", p, err, tt.want)
			}
		})
	}
}

func TestCheckListsEveryProblem(t *testing.T) {
	c := good(t)
	c.Replies, c.MaxTokens, c.Floor, c.Serve = 0, 1, -1, ""
	_, err := c.Check(found())
	for _, want := range []string{"--replies", "--max-tokens", "--floor", "--serve is empty"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check() error = %v, want it to list %s", err, want)
		}
	}
	if _, serr := os.Stat(c.Out); serr == nil {
		t.Errorf("Check() created --out %s for a bad configuration", c.Out)
	}
}

func inf() float64 { var z float64; return 1 / z }
func nan() float64 { var z float64; return z / z }
