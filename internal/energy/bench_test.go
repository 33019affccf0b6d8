//go:build !windows

package energy

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// BenchmarkRead is one reading of a sysfs-like file: what the meter pays
// every 10 ms. At 100 readings a second, the share of one core it takes is
// reported as core-%.
func BenchmarkRead(b *testing.B) {
	p := filepath.Join(b.TempDir(), "energy_uj")
	if err := os.WriteFile(p, []byte("123456789012\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	src := &fileSource{info: Info{Quantity: Counter}, path: p, scale: 1e-6}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := src.Read(); err != nil {
			b.Fatal(err)
		}
	}
	per := float64(b.Elapsed()) / float64(b.N)
	b.ReportMetric(per*100/float64(time.Second)*100, "core-%")
}

// BenchmarkMeterCPU runs a meter on a file for 500 ms an iteration, and
// as long with none, and reports the CPU time the process spent more with
// it (user and system, from getrusage) as a share of one core: the
// sampling's own cost while the serve decodes.
func BenchmarkMeterCPU(b *testing.B) {
	p := filepath.Join(b.TempDir(), "energy_uj")
	if err := os.WriteFile(p, []byte("123456789012\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	var with, without, wall time.Duration
	for b.Loop() {
		before := rusage()
		time.Sleep(500 * time.Millisecond)
		without += rusage() - before
		src := &fileSource{info: Info{Name: "bench", Quantity: Counter, Poll: DefaultPoll}, path: p, scale: 1e-6}
		before = rusage()
		t0 := time.Now()
		m := Start(src)
		time.Sleep(500 * time.Millisecond)
		m.Stop()
		wall += time.Since(t0)
		with += rusage() - before
	}
	b.ReportMetric(100*float64(with-without)/float64(wall), "core-%")
}

func rusage() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
