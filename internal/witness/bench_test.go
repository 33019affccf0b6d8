//go:build !windows

package witness

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// BenchmarkSample is one reading of a process (this one) holding fds
// "device" descriptors and a mapped "backend": what each of a run's two
// readings costs, outside the timed replies.
func BenchmarkSample(b *testing.B) {
	dir := b.TempDir()
	lib := filepath.Join(dir, "libggml-cann.so")
	if err := os.WriteFile(lib, []byte("x"), 0o644); err != nil {
		b.Fatal(err)
	}
	defer mapExec(b, lib, true)()
	for _, fds := range []int{1, 1000} {
		b.Run(map[int]string{1: "1-device-fd", 1000: "1000-device-fds"}[fds], func(b *testing.B) {
			for range fds {
				f, err := os.Open("/dev/zero")
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
			}
			r := &Reader{Proc: "/proc", Devices: []string{"/dev/zero"}, Libraries: []string{"libggml-cann*.so*"}}
			pids := []int{os.Getpid()}
			for b.Loop() {
				s := r.Sample(context.Background(), pids)
				if len(s.Held) != 1 || len(s.Mapped) != 1 {
					b.Fatalf("Sample = %+v", s)
				}
			}
		})
	}
}

// BenchmarkSampleFlood is one reading of a serve that floods its maps:
// WITNESS_FLOOD_PROCS processes (default 16) of WITNESS_FLOOD_MAPS
// mappings each (default 60000, under the kernel's default
// vm.max_map_count of 65530), real processes (this test binary, as
// TestHelperFlood). ns/op is one reading's time (a serve's run takes
// two); it reports the processes read too.
func BenchmarkSampleFlood(b *testing.B) {
	procs, maps := envInt(b, "WITNESS_FLOOD_PROCS", 16), envInt(b, "WITNESS_FLOOD_MAPS", 60000)
	pids := make([]int, procs)
	for i := range pids {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperFlood$")
		cmd.Env = append(os.Environ(), "WITNESS_FLOOD="+strconv.Itoa(maps))
		in, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		defer cmd.Wait()
		defer in.Close()
		if line, err := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
			b.Fatalf("flood helper: %q, %v", line, err)
		}
		pids[i] = cmd.Process.Pid
	}
	r := &Reader{Proc: "/proc", Devices: []string{"/dev/accel/accel*"}, Libraries: []string{"libggml-cuda*.so*"}}
	var s Sample
	for b.Loop() {
		s = r.Sample(context.Background(), pids)
	}
	b.ReportMetric(float64(s.Processes), "processes-read")
	b.Logf("cut: %q", s.Cut)
	b.Logf("excess: %q", s.Excess)
}

func envInt(b *testing.B, name string, def int) int {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatalf("%s=%q: not a number", name, v)
		}
		return n
	}
	return def
}
