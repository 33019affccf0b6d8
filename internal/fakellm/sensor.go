package fakellm

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Sensor plays a device's energy sensor for the gate's --energy readings:
// the device draws IdleWatts, and BusyWatts while a request streams. Every
// Period it writes, to Path, the energy used since the start in µJ (a
// counter, as hwmon's energy1_input or RAPL's energy_uj) or the power at
// that moment in µW (as power1_input).
type Sensor struct {
	Path      string
	Power     bool // write power (µW), not the energy counter (µJ)
	Period    time.Duration
	IdleWatts float64
	BusyWatts float64

	mu        sync.Mutex
	start     time.Time
	busy      int           // requests streaming now
	busySince time.Time     // when busy went from 0 to 1
	busyTime  time.Duration // time with a request streaming, before busySince
	ripple    int           // a power reading's last digits, moved at each update, as a real sensor's move
}

// Busy marks a request streaming until the returned function is called.
func (s *Sensor) Busy() func() {
	if s == nil {
		return func() {}
	}
	s.mu.Lock()
	if s.busy == 0 {
		s.busySince = time.Now()
	}
	s.busy++
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.busy--
		if s.busy == 0 {
			s.busyTime += time.Since(s.busySince)
		}
		s.mu.Unlock()
	}
}

// reading is the counter's joules, or the power's watts, now: the time is
// taken under the lock, so a counter never goes back.
func (s *Sensor) reading() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.Power {
		// A real sensor's reading moves a little at each update, so its
		// period shows in its readings: a few microwatts, stepping through
		// seven values (so a reader at twice or thrice the period still
		// sees each update move).
		s.ripple = (s.ripple + 1) % 7
		w := s.IdleWatts
		if s.busy > 0 {
			w = s.BusyWatts
		}
		return w + float64(s.ripple)*1e-6
	}
	busy := s.busyTime
	if s.busy > 0 {
		busy += now.Sub(s.busySince)
	}
	return s.IdleWatts*now.Sub(s.start).Seconds() + (s.BusyWatts-s.IdleWatts)*busy.Seconds()
}

// Run writes the readings every Period until stop is closed.
func (s *Sensor) Run(stop <-chan struct{}) error {
	s.mu.Lock()
	s.start = time.Now()
	s.mu.Unlock()
	if err := s.write(); err != nil {
		return err
	}
	t := time.NewTicker(s.Period)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return nil
		case <-t.C:
			if err := s.write(); err != nil {
				return err
			}
		}
	}
}

// write replaces the file whole, so a reader never sees half a number.
func (s *Sensor) write() error {
	tmp := filepath.Join(filepath.Dir(s.Path), "."+filepath.Base(s.Path)+".tmp")
	v := s.reading() * 1e6
	if err := os.WriteFile(tmp, fmt.Appendf(nil, "%.0f\n", v), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, s.Path)
}
