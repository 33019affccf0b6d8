package fakellm

import (
	"context"
	"sync"
	"time"
)

// How the simulated serve takes requests that come at once (--load-mode).
const (
	// LoadIndependent ("") streams each request as if it were alone: a
	// perfect batcher.
	LoadIndependent = ""
	// LoadBatch decodes requests together, each at its rate divided by
	// 1 + BatchCost x (others decoding), as a batching serve's step grows
	// with the batch.
	LoadBatch = "batch"
	// LoadSerial takes one request at a time, first in first out, and
	// pauses PauseMS before it takes the next one that waited, as
	// FastFlowLM's server does (its WebServer::process_next_npu_request
	// sleeps an npu_cooldown of 333 ms before each queued request).
	LoadSerial = "serial"
)

// DefaultPauseMS is FastFlowLM's pause between queued requests.
const DefaultPauseMS = 333

// fifo is one request at a time, first in first out.
type fifo struct {
	mu    sync.Mutex
	busy  bool
	queue []chan struct{}
	pause time.Duration
}

// acquire waits for the request's turn; false when ctx ended first (the turn,
// if it comes later, is passed on).
func (f *fifo) acquire(ctx context.Context) bool {
	f.mu.Lock()
	if !f.busy {
		f.busy = true
		f.mu.Unlock()
		return true
	}
	turn := make(chan struct{})
	f.queue = append(f.queue, turn)
	f.mu.Unlock()
	select {
	case <-turn:
		return true
	case <-ctx.Done():
		go func() {
			<-turn
			f.release()
		}()
		return false
	}
}

// release hands the turn to the next request that waited, after the pause;
// with none waiting, the serve is free at once.
func (f *fifo) release() {
	f.mu.Lock()
	if len(f.queue) == 0 {
		f.busy = false
		f.mu.Unlock()
		return
	}
	next := f.queue[0]
	f.queue = f.queue[1:]
	f.mu.Unlock()
	time.AfterFunc(f.pause, func() { close(next) })
}

// batchRate is a request's rate when others decode with it.
func (s *Server) batchRate(rate float64) float64 {
	if s.opt.LoadMode != LoadBatch {
		return rate
	}
	others := float64(s.decoding.Load() - 1)
	return rate / (1 + s.opt.BatchCost*max(others, 0))
}
