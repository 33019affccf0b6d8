package route

import "fmt"

// Memory is the device memory the device's own account (nvidia-smi's
// compute apps, the DRM client usage stats in fdinfo, npu-smi's process
// table) attributes to the serve's processes, weighed against the size of
// the weights the serve was asked to load (the model file its command
// names). A serve at its default verbosity often prints no placement at
// all; the device knows where the weights sit:
//
//   - where the log names neither route, all of the weights on the device
//     (within MarginPercent) names the fast route, less the slow route (a
//     partial offload);
//   - where the log (or the serve's own account) names a route, the device
//     must agree, or the route fails naming both;
//   - no account readable, or weights that could not be sized, change
//     nothing, and where the log names neither route the detail says
//     why.
//
// Device memory is never bounded above by the weights: every serve
// allocates beside them (docs/measuring.md#device-memory).
type Memory struct {
	// WeightsBytes is the size of the weights the serve was asked to
	// load, WeightsFrom where it was read ("m.gguf: GGUF tensor data, 291
	// tensors"); NoWeights says why they were not sized.
	WeightsBytes int64  `json:"weights_bytes,omitempty"`
	WeightsFrom  string `json:"weights_from,omitempty"`
	NoWeights    string `json:"no_weights,omitempty"`
	// Samples are the device's account at the first and the last
	// sample.
	Samples []MemorySample `json:"samples,omitempty"`
}

// MemorySample is the device's account at one sample: the source that
// attributed the most memory to the serve's processes, and per process.
type MemorySample struct {
	Source    string          `json:"source,omitempty"` // "nvidia-smi", "fdinfo", "npu-smi"
	Bytes     int64           `json:"bytes"`
	Processes []ProcessMemory `json:"processes,omitempty"`
	// Why says why no source gave an account at this sample.
	Why string `json:"why,omitempty"`
}

// MaxMemoryProcesses is the most processes a sample lists (all of them
// counted in its Bytes).
const MaxMemoryProcesses = 32

// ProcessMemory is the device memory one of the serve's processes holds.
type ProcessMemory struct {
	PID   int   `json:"pid"`
	Bytes int64 `json:"bytes"`
}

// MarginPercent is how much of the weights may be missing from the device
// while all of them are said to be there, in percent of the weights.
// llama.cpp keeps the input layer, the token embedding, on the host at
// any -ngl ("there is very little benefit to offloading the input layer,
// so always keep it on the CPU": ggml-org/llama.cpp@a5410f046c01d01330c8a42f13b64a211fedf2c3:src/llama-model.cpp,
// load_tensors, dev_input), and Ollama loads through the same code. A
// model with tied embeddings gets a copy for its output layer on the
// device (TENSOR_DUPLICATED), so only an untied embedding is missing:
// 6.5% of Llama-3.1-8B (128256 x 4096 of 8.03 B parameters), 7.2% of
// Qwen2.5-7B (152064 x 3584 of 7.6 B), 7.6% of Qwen3-8B (151936 x 4096
// of 8.2 B), under 2% of Mistral-7B. 10% covers these; what the serve
// allocates beside its weights (its KV cache, compute buffers, the
// driver's context; Ollama plans 457 MiB a CUDA GPU beside them, and a
// vLLM worker takes gpu_memory_utilization, 0.9 of the device by
// default, at start: docs/presets.md cites the sources) only adds. A
// partial offload that leaves less than the margin on the host, with
// buffers making up the rest, is not told from a whole one: the log's
// count decides that.
const MarginPercent = 10

// MaxMemoryBytes bounds every figure of the account and of the weights:
// more than any node's devices hold (eight devices of 288 GB are 2.3 TB).
// A figure past it, or below zero, is not believed. 4 TiB, written out:
// a constant expression is no statement a test can reach.
const MaxMemoryBytes = 4398046511104

// onDevice is what the account says at its least over the samples that
// gave one, and whether any did: both samples must show the weights.
func (m *Memory) onDevice() (MemorySample, bool) {
	var least MemorySample
	ok := false
	for _, s := range m.Samples {
		if s.Source == "" || s.Why != "" || s.Bytes < 0 || s.Bytes > MaxMemoryBytes {
			continue
		}
		if !ok || s.Bytes < least.Bytes {
			least, ok = s, true
		}
	}
	return least, ok
}

// whyNot says why the account decides nothing, "" when it can decide.
func (m *Memory) whyNot() string {
	if m.WeightsBytes <= 0 || m.WeightsBytes > MaxMemoryBytes {
		if m.NoWeights != "" {
			return "the model's weights not sized: " + clip(m.NoWeights)
		}
		return fmt.Sprintf("the model's weights not sized: %d bytes is no size", m.WeightsBytes)
	}
	if _, ok := m.onDevice(); ok {
		return ""
	}
	var whys []string
	for _, s := range m.Samples {
		if s.Why != "" {
			whys = append(whys, clip(s.Why))
		} else if s.Bytes < 0 || s.Bytes > MaxMemoryBytes {
			whys = append(whys, fmt.Sprintf("%d bytes from %s is past any device's memory", s.Bytes, clip(s.Source)))
		}
	}
	if len(whys) == 0 {
		return "no account of the device's memory was read"
	}
	return "no account of the device's memory: " + someSep(whys, 2, "; ")
}

// all reports whether dev bytes on the device are all of weights, within
// MarginPercent.
func all(dev, weights int64) bool {
	return dev*100 >= weights*(100-MarginPercent)
}

// account says what the device's account shows of the weights, and the
// route it names: "12.1 of 24.9 GiB of the model's weights on the device
// (nvidia-smi, 1 process): a partial offload".
func (m *Memory) account(s MemorySample) (string, string) {
	w := m.WeightsBytes
	text := fmt.Sprintf("%s of %s %s of the model's weights on the device (%s: %s %s over %d %s; the weights: %s)",
		figure(min(s.Bytes, w), w), figure(w, w), unit(w),
		clip(s.Source), figure(s.Bytes, w), unit(w), len(s.Processes), plural(len(s.Processes), "process", "processes"), clip(m.WeightsFrom))
	if all(s.Bytes, m.WeightsBytes) {
		return RouteFast, text
	}
	if s.Bytes == 0 {
		return RouteSlow, text + ": none of them"
	}
	return RouteSlow, text + ": a partial offload"
}

// weigh weighs the device's account against the verdict the log and the
// other witnesses gave (a). noFast says why the account names no fast
// route for this run ("" where it may: Witness.noFast): memory held is
// not memory used, and a serve computing on the CPU, or a preset's slow
// route on the same device, can hold the weights' size there all the
// same.
func (m *Memory) weigh(a Verdict, ev Evidence, noFast string) Verdict {
	if m == nil {
		return a
	}
	neither := ev.Fast == nil && ev.Slow == nil
	if why := m.whyNot(); why != "" {
		// said where it could have decided: a log that names a route
		// stands as it did
		if neither {
			a.Detail += "; device memory: not witnessed (" + why + ")"
		}
		return a
	}
	s, _ := m.onDevice()
	names, text := m.account(s)
	fast := names == RouteFast
	if neither && fast && !a.OK && noFast != "" {
		a.Detail = "the device's own account holds the weights (" + text + "), but " + noFast + "; " + a.Detail
		return a
	}
	if neither && fast && !a.OK {
		a.OK = true
		a.Detail = "the device's own account names the fast route where the serve log names neither: " + text + "; " + a.Detail
		return a
	}
	if neither && !fast {
		a.OK = false
		a.Detail = "the device's own account names the slow route where the serve log names neither: " + text + "; this run is on the slow route; " + a.Detail
		return a
	}
	if neither {
		a.Detail += "; and the device's own account: " + text
		return a
	}
	if a.OK && !fast {
		a.OK = false
		a.Detail += "; but the device's own account names the slow route: " + text + ": the log and the device disagree, and the slow route wins the doubt"
		return a
	}
	if fast && ev.Slow != nil {
		a.Detail += "; the device's own account names the fast route (" + text + "), the log the slow route: the slow route wins the doubt"
		return a
	}
	a.Detail += "; the device's own account agrees: " + text
	return a
}

// figure is b in the unit of the weights (of): bytes below a MiB, MiB
// below a GiB, else GiB, with one decimal. (if, not switch: each
// condition a statement of its own, which mutation testing reaches.)
func figure(b, of int64) string {
	if of < 1<<20 {
		return fmt.Sprintf("%d", b)
	}
	if of < 1<<30 {
		return fmt.Sprintf("%.1f", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%.1f", float64(b)/(1<<30))
}

// unit is the unit figure writes sizes of the weights of in.
func unit(of int64) string {
	if of < 1<<20 {
		return "bytes"
	}
	if of < 1<<30 {
		return "MiB"
	}
	return "GiB"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
