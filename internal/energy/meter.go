package energy

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Sample is one reading: joules of a counter, or watts.
type Sample struct {
	T time.Time
	V float64
}

// MaxSamples bounds what a meter keeps: readings that repeat the one
// before are kept only as the first and last of their run, so this is
// about half a million changes of the sensor's value.
const MaxSamples = 1 << 20

// Meter polls a source in the background from Start to Stop.
type Meter struct {
	src  Source
	info Info

	mu      sync.Mutex
	samples []Sample
	err     error
	changed chan struct{} // closed and replaced at each change of value

	stop chan struct{}
	done chan struct{}
}

// Start reads src once, then every Info().Poll until Stop.
func Start(src Source) *Meter {
	m := &Meter{src: src, info: src.Info(), changed: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	m.readOnce(time.Now())
	go m.loop()
	return m
}

// Info is the source's declaration.
func (m *Meter) Info() Info { return m.info }

func (m *Meter) loop() {
	defer close(m.done)
	poll := m.info.Poll
	if poll <= 0 {
		poll = DefaultPoll
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case now := <-t.C:
			if !m.readOnce(now) {
				return
			}
		}
	}
}

// readOnce takes one reading; false once the meter has stopped reading (an
// error, or too many readings).
func (m *Meter) readOnce(now time.Time) bool {
	v, err := m.src.Read()
	at := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return false
	}
	if err != nil {
		m.err = fmt.Errorf("%s: a reading failed at %s: %v", m.info.Name, at.Format("15:04:05.000"), err)
		return false
	}
	n := len(m.samples)
	if n >= 2 && m.samples[n-1].V == v && m.samples[n-2].V == v {
		m.samples[n-1].T = at
		return true
	}
	if n >= MaxSamples {
		m.err = fmt.Errorf("%s: more than %d readings kept; the run is too long for this sensor's poll", m.info.Name, MaxSamples)
		return false
	}
	m.samples = append(m.samples, Sample{T: at, V: v})
	if n == 0 || m.samples[n-1].V != v {
		close(m.changed)
		m.changed = make(chan struct{})
	}
	return true
}

// WaitChange waits until the source's value changes after t, at most
// limit: a counter's value at a window's end is known only once the
// counter has moved past it.
func (m *Meter) WaitChange(ctx context.Context, t time.Time, limit time.Duration) {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		m.mu.Lock()
		ch, err := m.changed, m.err
		moved := changedAfter(m.samples, t)
		m.mu.Unlock()
		if moved || err != nil {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			return
		case <-ctx.Done():
			return
		case <-m.done:
			return
		}
	}
}

// changedAfter: some reading after t differs from the one before it.
func changedAfter(s []Sample, t time.Time) bool {
	for i := len(s) - 1; i > 0; i-- {
		if !s[i].T.After(t) {
			return false
		}
		if s[i].V != s[i-1].V {
			return true
		}
	}
	return false
}

// Stop stops the polling and closes the source, returning the readings and
// the error that stopped them early, if one did.
func (m *Meter) Stop() ([]Sample, error) {
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
	<-m.done
	m.src.Close()
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Sample(nil), m.samples...), m.err
}
