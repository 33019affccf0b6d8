//go:build !windows

package energy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/vendortool"
)

func TestParseSpec(t *testing.T) {
	good := map[string]Spec{
		"auto":                 {Kind: Auto},
		"off":                  {Kind: Off},
		"nvml":                 {Kind: "nvml"},
		"nvml:1":               {Kind: "nvml", Arg: "1"},
		"npu-smi:3":            {Kind: "npu-smi", Arg: "3"},
		"rapl":                 {Kind: "rapl"},
		"hwmon:amdgpu":         {Kind: "hwmon", Arg: "amdgpu"},
		"counter:/s/e":         {Kind: "counter", Arg: "/s/e", Scale: 1e-6},
		"counter:/s/e:mj":      {Kind: "counter", Arg: "/s/e", Scale: 1e-3},
		"counter:/s/e:J":       {Kind: "counter", Arg: "/s/e", Scale: 1},
		"power:/s/p":           {Kind: "power", Arg: "/s/p", Scale: 1e-6},
		"power:/s/p:mw":        {Kind: "power", Arg: "/s/p", Scale: 1e-3},
		"power:/s/p:w":         {Kind: "power", Arg: "/s/p", Scale: 1},
		"power:/a:b/p_average": {Kind: "power", Arg: "/a:b/p_average", Scale: 1e-6},
	}
	for in, want := range good {
		got, err := ParseSpec(in)
		if err != nil || got != want {
			t.Errorf("ParseSpec(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	bad := map[string]string{
		"":              "is not a source",
		"gpu":           "is not a source",
		"auto:1":        "takes no argument",
		"off:x":         "takes no argument",
		"nvml:x":        "the device is a number",
		"rapl:12345":    "the device is a number",
		"hwmon:../x":    "not a path",
		"counter:":      "needs a file",
		"counter:rel/x": "absolute path",
		"power::w":      "needs a file",
	}
	for in, want := range bad {
		if _, err := ParseSpec(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSpec(%q): %v, want %q", in, err, want)
		}
	}
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReadNumber(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "ok"), "123456\n")
	if v, err := readNumber(filepath.Join(dir, "ok")); err != nil || v != 123456 {
		t.Errorf("ok: %v %v", v, err)
	}
	for name, text := range map[string]string{"words": "N/A\n", "neg": "-5\n", "nan": "NaN", "inf": "+Inf", "long": strings.Repeat("1", 65), "empty": ""} {
		write(t, filepath.Join(dir, name), text)
		if _, err := readNumber(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s (%q): read as a number", name, text)
		}
	}
	if _, err := readNumber(filepath.Join(dir, "gone")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("a missing file: %v", err)
	}
	// A FIFO is refused at once, never waited on.
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readNumber(fifo); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a FIFO: %v", err)
	}
	if _, err := readNumber(dir); err == nil {
		t.Errorf("a directory read as a number")
	}
}

func TestHwmon(t *testing.T) {
	sys := t.TempDir()
	h := filepath.Join(sys, "class", "hwmon")
	write(t, filepath.Join(h, "hwmon0", "name"), "coretemp\n")
	write(t, filepath.Join(h, "hwmon1", "name"), "amdgpu\n")
	write(t, filepath.Join(h, "hwmon1", "power1_average"), "45000000\n")
	write(t, filepath.Join(h, "hwmon1", "power1_average_interval"), "1000\n")
	write(t, filepath.Join(h, "hwmon1", "power1_label"), "PPT\n")
	src, err := openHwmon(sys, "")
	if err != nil {
		t.Fatal(err)
	}
	info := src.Info()
	if info.Name != "hwmon:amdgpu" || info.Quantity != Power || info.Lag != time.Second || !strings.Contains(info.Boundary, "PPT") {
		t.Errorf("amdgpu's power1_average: %+v", info)
	}
	if v, err := src.Read(); err != nil || v != 45 {
		t.Errorf("45 W in µW: %v %v", v, err)
	}
	// A reading past what a sensor can say is an error, not a figure.
	write(t, filepath.Join(h, "hwmon1", "power1_average"), "1e300\n")
	if _, err := src.Read(); err == nil || !strings.Contains(err.Error(), "past what a sensor can say") {
		t.Errorf("1e300 µW: %v", err)
	}
	// An energy counter wins over power.
	write(t, filepath.Join(h, "hwmon1", "energy1_input"), "5000000\n")
	src, _ = openHwmon(sys, "amdgpu")
	if src.Info().Quantity != Counter {
		t.Errorf("energy1_input: %+v", src.Info())
	}
	if v, _ := src.Read(); v != 5 {
		t.Errorf("5 J in µJ: %v", v)
	}
	// By name; one without readings; none of that name.
	src, err = openHwmon(sys, "coretemp")
	if err == nil || !strings.Contains(err.Error(), "has no energy1_input") {
		t.Errorf("coretemp: %v %v", src, err)
	}
	if _, err := openHwmon(sys, "xe"); err == nil || !strings.Contains(err.Error(), `no hwmon device is one named "xe"; there are: coretemp, amdgpu`) {
		t.Errorf("xe: %v", err)
	}
	if _, err := openHwmon(t.TempDir(), ""); err == nil || !strings.Contains(err.Error(), "no hwmon device in") {
		t.Errorf("no hwmon: %v", err)
	}
	write(t, filepath.Join(h, "hwmon1", "name"), "nvme\n")
	if _, err := openHwmon(sys, ""); err == nil || !strings.Contains(err.Error(), "an accelerator's") {
		t.Errorf("no accelerator's hwmon: %v", err)
	}
}

func TestRAPL(t *testing.T) {
	sys := t.TempDir()
	d := filepath.Join(sys, "class", "powercap", "intel-rapl:0")
	write(t, filepath.Join(d, "name"), "package-0\n")
	write(t, filepath.Join(d, "energy_uj"), "1000000\n")
	write(t, filepath.Join(d, "max_energy_range_uj"), "262143328850\n")
	src, err := openRAPL(sys, "")
	if err != nil {
		t.Fatal(err)
	}
	info := src.Info()
	if info.Name != "rapl:0" || info.Quantity != Counter || info.Range != 262143.32885 || !strings.Contains(info.Boundary, "package-0") {
		t.Errorf("rapl: %+v", info)
	}
	if _, err := openRAPL(sys, "1"); err == nil || !strings.Contains(err.Error(), "no RAPL package 1") {
		t.Errorf("rapl:1: %v", err)
	}
}

// TestRAPLRootOnly: as an ordinary user, energy_uj of mode 0400 owned by
// root is unavailable, and the reason says what to change.
func TestRAPLRootOnly(t *testing.T) {
	if os.Getuid() == 0 {
		t.Skip("root reads a file of mode 0400; run as an ordinary user")
	}
	// /proc/1/environ is a root-only file every system has.
	if _, err := readNumber("/proc/1/environ"); !errors.Is(err, os.ErrPermission) {
		t.Skipf("no root-only file to read here: %v", err)
	}
	sys := t.TempDir()
	d := filepath.Join(sys, "class", "powercap", "intel-rapl:0")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/proc/1/environ", filepath.Join(d, "energy_uj")); err != nil {
		t.Fatal(err)
	}
	if _, err := openRAPL(sys, ""); err == nil || !strings.Contains(err.Error(), "readable by root only (kernels since CVE-2020-8694)") {
		t.Errorf("root-only: %v", err)
	}
}

// fakeTool writes an executable script and a look-up that finds it.
func fakeTool(t *testing.T, name, script string) *vendortool.Set {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	return vendortool.Find(append([]string{"PATH=" + dir + ":/usr/bin:/bin"}, stepSecrets...))
}

// stepSecrets are what a GitHub Actions step's environment holds and a
// vendor's tool never gets.
var stepSecrets = []string{"GITHUB_TOKEN=ghs_fake", "INPUT_GITHUB-TOKEN=ghs_fake", "ACTIONS_RUNTIME_TOKEN=runtime-secret",
	"ACTIONS_ID_TOKEN_REQUEST_TOKEN=oidc-secret", "GITHUB_OUTPUT=/tmp/out", "GITHUB_ENV=/tmp/env", "GITHUB_PATH=/tmp/path",
	"GITHUB_STEP_SUMMARY=/tmp/summary", "INPUT_SERVE=llama-server"}

// The vendors' tools start with the serve's allow-list of the environment
// they were found with: none of the step's secrets, file commands or
// inputs; the device runtimes' variables and PATH.
func TestToolEnvironment(t *testing.T) {
	dir := t.TempDir()
	seen := filepath.Join(dir, "seen")
	write := func(name, script string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\nenv >>"+seen+"-"+name+"\n"+script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("nvidia-smi", `case " $* " in *" -lms "*) while :; do echo 300; sleep 0.05; done;; esac
echo 250.5
`)
	write("npu-smi", "echo '        Power Dissipation(W)           : 16.9'\n")
	tools := vendortool.Find(append([]string{"PATH=" + dir + ":/usr/bin:/bin", "CUDA_VISIBLE_DEVICES=1", "ASCEND_RT_VISIBLE_DEVICES=2"}, stepSecrets...))
	env := Env{Sys: t.TempDir(), NVML: OpenNvidiaSMI(tools), Tools: tools}
	for _, kind := range []string{"nvml", "npu-smi"} {
		src, err := openOne(Spec{Kind: kind}, env)
		if err != nil {
			t.Fatalf("open %s: %v", kind, err)
		}
		src.Close()
	}
	for _, name := range []string{"nvidia-smi", "npu-smi"} {
		b, err := os.ReadFile(seen + "-" + name)
		if err != nil {
			t.Fatalf("%s did not run: %v", name, err)
		}
		for _, kv := range stepSecrets {
			k, _, _ := strings.Cut(kv, "=")
			if strings.Contains(string(b), "\n"+k+"=") || strings.HasPrefix(string(b), k+"=") {
				t.Errorf("%s ran with %s in its environment:\n%s", name, k, b)
			}
		}
		for _, want := range []string{"PATH=" + dir + ":/usr/bin:/bin", "CUDA_VISIBLE_DEVICES=1", "ASCEND_RT_VISIBLE_DEVICES=2"} {
			if !strings.Contains(string(b), want+"\n") {
				t.Errorf("%s ran without %s:\n%s", name, want, b)
			}
		}
	}
}

func TestNPUSMI(t *testing.T) {
	// As Huawei's reference prints it for an Atlas 200I A2.
	look := fakeTool(t, "npu-smi", `[ "$1 $2 $3 $4 $5" = "info -t power -i 0" ] || exit 3
cat <<X
        NPU ID                         : 0
        Chip Count                     : 1

        Chip ID                        : 0
        NPU Real-time Power(W)         : 9.1

        Power Dissipation(W)           : 16.9
        Chip Name                      : MCU
X
`)
	src, err := openNPUSMI(look, 0)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := src.Read(); err != nil || v != 16.9 || !strings.Contains(src.Info().Boundary, "card") {
		t.Errorf("the card's power: %v %v %+v", v, err, src.Info())
	}
	chip := fakeTool(t, "npu-smi", "echo '        NPU Real-time Power(W)         : 9.1'\n")
	src, err = openNPUSMI(chip, 0)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := src.Read(); v != 9.1 || !strings.Contains(src.Info().Boundary, "chip") {
		t.Errorf("the chip's power: %v %+v", v, src.Info())
	}
	if _, err := openNPUSMI(fakeTool(t, "npu-smi", "echo 'Error: no such device'\n"), 0); err == nil || !strings.Contains(err.Error(), "printed no power line") {
		t.Errorf("no power line: %v", err)
	}
	if _, err := openNPUSMI(fakeTool(t, "npu-smi", "exit 7\n"), 2); err == nil || !strings.Contains(err.Error(), "-i 2") {
		t.Errorf("failing npu-smi: %v", err)
	}
	if _, err := openNPUSMI(fakeTool(t, "other", ""), 0); err == nil || !strings.Contains(err.Error(), "not on PATH") {
		t.Errorf("no npu-smi: %v", err)
	}
}

func TestNvidiaSMI(t *testing.T) {
	// The loop mode prints a line every -lms; this one prints 250.5 then
	// 300 forever, and a query of power.draw.instant is refused as old
	// drivers refuse it.
	look := fakeTool(t, "nvidia-smi", `case "$1" in
--query-gpu=power.draw.instant) echo 'Field "power.draw.instant" is not a valid field to query.'; exit 2;;
esac
case " $* " in *" -lms "*) echo 250.5; while :; do echo 300.00; sleep 0.05; done;; esac
echo 250.5
`)
	src, err := OpenNvidiaSMI(look)(0)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if !strings.Contains(src.Info().Boundary, "power.draw.average)") || src.Info().Quantity != Power {
		t.Errorf("info: %+v", src.Info())
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, err := src.Read()
		if err != nil {
			t.Fatal(err)
		}
		if v == 300 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no second reading: %v", v)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := OpenNvidiaSMI(fakeTool(t, "nvidia-smi", "echo '[N/A]'\n"))(0); err == nil || !strings.Contains(err.Error(), "gives no power reading") {
		t.Errorf("[N/A]: %v", err)
	}
	if _, err := OpenNvidiaSMI(fakeTool(t, "x", ""))(0); err == nil || !strings.Contains(err.Error(), "not on PATH") {
		t.Errorf("no nvidia-smi: %v", err)
	}
}

func TestOpenAuto(t *testing.T) {
	sys := t.TempDir()
	env := Env{Sys: sys, Tools: fakeTool(t, "none", "")}
	src, passed, err := Open(Spec{Kind: Auto}, nil, env)
	if err == nil || src != nil || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("nothing here: %v %v", src, err)
	}
	want := []string{"nvml: NVML is not available", "npu-smi: npu-smi is not on PATH", "hwmon: no hwmon device in", "rapl: no RAPL package 0"}
	if len(passed) != len(want) {
		t.Fatalf("passed over: %q", passed)
	}
	for i, w := range want {
		if !strings.HasPrefix(passed[i], w) {
			t.Errorf("passed[%d] = %q, want %q...", i, passed[i], w)
		}
	}
	// The preset's order, and the first that reads wins.
	d := filepath.Join(sys, "class", "powercap", "intel-rapl:0")
	write(t, filepath.Join(d, "energy_uj"), "7\n")
	src, passed, err = Open(Spec{Kind: Auto}, []string{"hwmon", "rapl", "npu-smi"}, env)
	if err != nil || src.Info().Name != "rapl:0" || len(passed) != 1 || !strings.HasPrefix(passed[0], "hwmon:") {
		t.Errorf("auto with rapl: %v %v %v", src, passed, err)
	}
	// A named source that cannot be read is unavailable, with its reason.
	if _, _, err := Open(Spec{Kind: "counter", Arg: filepath.Join(sys, "none"), Scale: 1e-6}, nil, env); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "counter:") {
		t.Errorf("a missing counter file: %v", err)
	}
	if _, _, err := Open(Spec{Kind: "gpu"}, nil, env); err == nil || errors.Is(err, ErrUnavailable) {
		t.Errorf("not a source: %v", err)
	}
}

// fakeSource gives the values of a function of the time since its start.
type fakeSource struct {
	info  Info
	start time.Time
	f     func(time.Duration) (float64, error)
}

func (f *fakeSource) Info() Info             { return f.info }
func (f *fakeSource) Read() (float64, error) { return f.f(time.Since(f.start)) }
func (f *fakeSource) Close() error           { return nil }

func TestMeter(t *testing.T) {
	// A counter that moves every 20 ms: the meter keeps only the first and
	// last reading of each value, and WaitChange returns once it moved.
	src := &fakeSource{info: Info{Name: "f", Quantity: Counter, Poll: time.Millisecond}, start: time.Now(),
		f: func(d time.Duration) (float64, error) { return float64(d / (20 * time.Millisecond)), nil }}
	m := Start(src)
	mark := time.Now()
	m.WaitChange(t.Context(), mark, 10*time.Second)
	s, err := m.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if !changedAfter(s, mark) {
		t.Fatalf("WaitChange returned before a change after its mark: %v", s)
	}
	for i := 2; i < len(s); i++ {
		if s[i].V == s[i-1].V && s[i-1].V == s[i-2].V {
			t.Errorf("three readings of %v kept: %v", s[i].V, s)
		}
	}
	// A reading that fails stops the meter, and says when and why.
	bad := &fakeSource{info: Info{Name: "b", Quantity: Power, Poll: time.Millisecond}, start: time.Now(),
		f: func(d time.Duration) (float64, error) {
			if d > 30*time.Millisecond {
				return 0, errors.New("the sensor vanished")
			}
			return 5, nil
		}}
	m = Start(bad)
	m.WaitChange(t.Context(), time.Now(), 10*time.Second)
	s, err = m.Stop()
	if err == nil || !strings.Contains(err.Error(), "b: a reading failed at") || !strings.Contains(err.Error(), "the sensor vanished") || len(s) == 0 {
		t.Errorf("a failing sensor: %v, %d readings", err, len(s))
	}
}

// An nvidia-smi that is a wrapper script (a container's or an environment
// manager's shim) runs the real tool as its child, which holds the readings'
// pipe: closing the source ends the child too, and returns.
func TestNvidiaSMIWrapperClosed(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child")
	look := fakeTool(t, "nvidia-smi", `case " $* " in
*" -lms "*) sh -c 'echo $$ > `+pidFile+`; while :; do echo 300.00; sleep 0.05; done'; exit;;
esac
echo 250.5
`)
	src, err := OpenNvidiaSMI(look)(0)
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() {
		src.Close()
		close(closed)
	}()
	// A liveness bound, not a speed: Close took no time before the child
	// kept the pipe, and never returned after.
	select {
	case <-closed:
	case <-time.After(time.Minute):
		b, _ := os.ReadFile(pidFile)
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		<-closed
		t.Fatal("Close did not return while the wrapper's child held the pipe")
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	// Killed, it is gone once its new parent has reaped it.
	for end := time.Now().Add(10 * time.Second); pid > 0 && syscall.Kill(pid, 0) == nil && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if pid > 0 && syscall.Kill(pid, 0) == nil {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("the wrapper's child, pid %d, outlived Close", pid)
	}
}

// An npu-smi wrapper whose tool hangs (a wedged driver) and keeps the output
// pipe past the run's time limit: the reading fails, and the hung tool is
// ended with it.
func TestNPUSMIWrapperHung(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child")
	look := fakeTool(t, "npu-smi", `sh -c 'echo $$ > `+pidFile+`; exec sleep 600'
`)
	done := make(chan error, 1)
	go func() {
		_, err := openNPUSMI(look, 0)
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		b, _ := os.ReadFile(pidFile)
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		<-done
		t.Fatal("npu-smi's reading did not return while the wrapper's hung child held the pipe")
	}
	if err == nil {
		t.Error("a hung npu-smi gave a reading")
	}
	b, _ := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	for end := time.Now().Add(10 * time.Second); pid > 0 && syscall.Kill(pid, 0) == nil && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if pid > 0 && syscall.Kill(pid, 0) == nil {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("the hung tool, pid %d, outlived its reading", pid)
	}
}

// TestNvidiaSMIField: the instant power where the driver has it; else its
// average over a second, said as such (NVML's nvmlDeviceGetPowerUsage: on
// Ampere, GA100 aside, and newer, power.draw is that average too), so the
// readings are placed half a second earlier and a ceiling counts periods
// of a second; the field read is named in the boundary.
func TestNvidiaSMIField(t *testing.T) {
	refuse := func(fields ...string) string {
		s := `case "$1" in` + "\n"
		for _, f := range fields {
			s += "--query-gpu=" + f + `) echo 'Field "` + f + `" is not a valid field to query.'; exit 2;;` + "\n"
		}
		return s + "esac\n" + `case " $* " in *" -lms "*) while :; do echo 300.00; sleep 0.05; done;; esac
echo 250.5
`
	}
	for _, c := range []struct {
		name     string
		script   string
		field    string
		lag, per time.Duration
	}{
		{"instant", refuse(), "power.draw.instant", 0, 100 * time.Millisecond},
		{"average", refuse("power.draw.instant"), "power.draw.average", time.Second, time.Second},
		{"neither", refuse("power.draw.instant", "power.draw.average"), "power.draw", time.Second, time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			src, err := OpenNvidiaSMI(fakeTool(t, "nvidia-smi", c.script))(0)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			info := src.Info()
			if !strings.Contains(info.Boundary, "(nvidia-smi "+c.field+")") && !strings.Contains(info.Boundary, "(nvidia-smi "+c.field+",") || info.Lag != c.lag || info.Period != c.per {
				t.Errorf("%s: info %+v, want %s, lag %v, period %v", c.name, info, c.field, c.lag, c.per)
			}
		})
	}
}

func TestToolOf(t *testing.T) {
	for name, want := range map[string]string{"nvml:0": "nvidia-smi", "npu-smi:1": "npu-smi", "counter:/x": "", "hwmon:amdgpu": "", "rapl:0": ""} {
		if got := ToolOf(Info{Name: name}); got != want {
			t.Errorf("ToolOf(%q) = %q, want %q", name, got, want)
		}
	}
}

// With Env.ServeUID, a counter: or power: file is refused at each read
// while the serve's user owns it: one the serve made in the sensor's
// place (a sticky directory, between a daemon's unlink and its new file)
// after the configuration was checked is not read.
func TestFileServeUID(t *testing.T) {
	file := filepath.Join(t.TempDir(), "uj")
	if err := os.WriteFile(file, []byte("5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	serve := uint32(os.Geteuid())
	if serve == 0 {
		serve = 4242
		if err := os.Chown(file, int(serve), int(serve)); err != nil {
			t.Fatal(err)
		}
	}
	src, _, err := Open(Spec{Kind: "counter", Arg: file, Scale: 1e-6}, nil, Env{Sys: t.TempDir()})
	if err != nil {
		t.Fatalf("Open without ServeUID: %v", err)
	}
	src.Close()
	want := fmt.Sprintf("%s belongs to uid %d, the serve's user, who could set it", file, serve)
	if _, _, err := Open(Spec{Kind: "counter", Arg: file, Scale: 1e-6}, nil, Env{Sys: t.TempDir(), ServeUID: serve}); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Open(a file of uid %d, ServeUID %d) = %v, want %q", serve, serve, err, want)
	}
	if _, _, err := Open(Spec{Kind: "counter", Arg: file, Scale: 1e-6}, nil, Env{Sys: t.TempDir(), ServeUID: serve + 1}); err != nil {
		t.Errorf("Open(a file of uid %d, ServeUID %d) = %v, want it read", serve, serve+1, err)
	}
}
