package fakellm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
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
	// LoadSlice shares one device evenly between the requests decoding:
	// each token of each waits (requests decoding) / rate, so N streams
	// together decode at the rate of one, η = 1/N: time-slicing, not
	// batching.
	LoadSlice = "slice"
	// LoadBusy takes one request at a time and refuses in band the ones
	// that arrive while another is in flight: at once, 200 OK, its one
	// chunk BusyText and finish_reason "stop".
	LoadBusy = "busy"
)

// BusyText is what LoadBusy answers a request that arrived while another
// was in flight.
const BusyText = "Server busy, try again later."

// loadMode is what one --load-mode does with requests that come at once.
type loadMode struct {
	queue  bool   // one at a time, first in first out (fifo)
	batch  bool   // each rate divided by 1 + BatchCost x the others decoding at its first token
	slice  bool   // each token waits (requests decoding) / rate
	refuse string // one at a time; one arriving while another is in flight gets this, at once
}

// loadModes are the simulated serve's ways of taking requests that come at
// once, by --load-mode.
var loadModes = map[string]loadMode{
	LoadIndependent: {},
	LoadBatch:       {batch: true},
	LoadSerial:      {queue: true},
	LoadSlice:       {slice: true},
	LoadBusy:        {refuse: BusyText},
}

// LoadModeNames are the --load-mode values but the default, for flags.
func LoadModeNames() []string {
	return []string{LoadBatch, LoadSerial, LoadSlice, LoadBusy}
}

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
	if !loadModes[s.opt.LoadMode].batch {
		return rate
	}
	others := float64(s.decoding.Load() - 1)
	return rate / (1 + s.opt.BatchCost*max(others, 0))
}

// tokenWait is how long token i + 1 waits after token i at rate: under
// LoadSlice, as many times longer as requests are decoding.
func (s *Server) tokenWait(rate float64) time.Duration {
	d := time.Duration(float64(time.Second) / rate)
	if loadModes[s.opt.LoadMode].slice {
		d *= time.Duration(max(s.decoding.Load(), 1))
	}
	return d
}

// refuse answers a request that arrived while another was in flight, as
// LoadBusy does: at once, 200 OK, one chunk of text and finish "stop".
func (s *Server) refuse(w http.ResponseWriter, req chatRequest, n int, text string) {
	s.logf("request %d: busy, refused", n)
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "model": s.opt.Model,
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": text}, "finish_reason": "stop"}},
		})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	b, _ := json.Marshal(map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion.chunk", "created": s.start.Unix(), "model": s.opt.Model,
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": text}, "finish_reason": "stop"}},
	})
	fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", b)
}
