package serve

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkReadyNotice is the delay between a serve's health first answering
// 200 and WaitReady noticing, with a real process as the serve and health on
// loopback. Reported: the median and the worst over b.N starts.
func BenchmarkReadyNotice(b *testing.B) {
	log, _ := os.Create(filepath.Join(b.TempDir(), "log"))
	defer log.Close()
	p, err := Start(Options{Argv: []string{"sleep", "600"}, Log: log})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Stop(time.Second)
	var readyAt atomic.Int64 // unix ns when health turned 200; 0 before
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if readyAt.Load() == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	var delays []float64
	for b.Loop() {
		readyAt.Store(0)
		// Turn ready at a moment unrelated to the poll's phase.
		t := time.AfterFunc(time.Duration(20+len(delays)%7)*time.Millisecond+time.Duration(len(delays)%10)*time.Millisecond/3, func() {
			readyAt.Store(time.Now().UnixNano())
		})
		if _, err := p.WaitReady(context.Background(), srv.URL, []string{"/health"}, time.Minute); err != nil {
			b.Fatal(err)
		}
		noticed := time.Now().UnixNano()
		t.Stop()
		delays = append(delays, float64(noticed-readyAt.Load())/1e6)
	}
	slices.Sort(delays)
	b.ReportMetric(delays[len(delays)/2], "median-notice-ms")
	b.ReportMetric(delays[len(delays)-1], "worst-notice-ms")
}

// BenchmarkKilledGate is the stop after a SIGKILL of the gate: a serve with
// 20 children that closed their descriptors, 4 helpers in sessions of their
// own and one that keeps forking and calling setsid (treePy), under each
// mechanism this machine offers. Each run kills the gate once its serve's
// tree is up and takes its ticket as the next run would. Reported: from
// the kill to the ticket free (the median and the worst), and the
// processes of the tree alive when it was free, over all runs (the goal is
// 0).
func BenchmarkKilledGate(b *testing.B) {
	for _, m := range available(b) {
		b.Run(m, func(b *testing.B) {
			tr := newTree(b, "bench-"+m+"-marker")
			var free []float64
			survivors := 0
			for b.Loop() {
				d, alive := killedGate(b, tr, m)
				free = append(free, float64(d)/float64(time.Millisecond))
				survivors += len(alive)
			}
			slices.Sort(free)
			b.ReportMetric(free[len(free)/2], "median-free-ms")
			b.ReportMetric(free[len(free)-1], "worst-free-ms")
			b.ReportMetric(float64(survivors), "survivors")
		})
	}
}
