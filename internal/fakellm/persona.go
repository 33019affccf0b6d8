package fakellm

import (
	"fmt"
	"io"
	"strings"
	"sync"
)

// RoutePartial is a serve on part of the fast route: some layers or roles
// on the device, the rest not. Its log looks fast at a glance and names
// counts short of the total.
const RoutePartial = "partial"

// persona is how one kind of serve answers and what it prints, as its
// source shows. Log lines are copied from the serve's source (format
// strings filled in) or from a real run; {model} is the model's name. The
// table in docs/presets.md names each source and version.
type persona struct {
	health         string   // answers 200 when ready
	chatPaths      []string // take chat requests
	statsPath      string   // Lemonade's figures of the last request
	reasoningField string   // the delta field reasoning streams in
	thinkingOff    string   // "kwargs": chat_template_kwargs.enable_thinking; "effort": reasoning_effort "none"; "think": FastFlowLM's "think", then reasoning_effort
	timings        bool     // llama.cpp's timings in the last chunk
	flmUsage       bool     // FastFlowLM's own figures in the usage chunk
	logprobs       string   // how it answers a request for logprobs (Shape...; "": ShapeLlamaCpp)
	ps             bool     // Ollama's /api/ps: the loaded model's size and size_vram, by route
	vllmMetrics    bool     // vLLM's /metrics: its cache_config_info, cpu_kvcache_space_bytes set on its CPU platform (--cpu-platform)

	fast, slow, partial, neither []string // start-up lines of each route
	// firstRequest are printed when the first request arrives, on the fast
	// route (a serve that proves its route only once it ran something).
	firstRequest []string
}

// Personas the simulated serve can take.
const (
	PersonaLlamaCpp   = "llama.cpp"
	PersonaVLLM       = "vllm"
	PersonaVLLMAscend = "vllm-ascend"
	PersonaOVMS       = "ovms"
	PersonaFLM        = "flm"
	PersonaLemonade   = "lemonade"
	PersonaOllama     = "ollama"
	Persona1bit       = "1bit"
)

// llama-server b10116 at -lv 4 on one H200, as it printed (the ready
// lines), and a build without a device backend, which prints no offload
// line (src/llama-model.cpp, load_tensors).
var (
	llamaFast = []string{
		"I llama_prepare_model_devices: using device CUDA0 (NVIDIA H200) (0000:00:06.0) - 142629 MiB free",
		"I load_tensors: offloading output layer to GPU",
		"I load_tensors: offloading 11 repeating layers to GPU",
		"I load_tensors: offloaded 13/13 layers to GPU",
		"I load_tensors:   CPU_Mapped model buffer size =    62.50 MiB",
		"I load_tensors:        CUDA0 model buffer size =   356.60 MiB",
		"I llama_kv_cache:      CUDA0 KV buffer size =   192.00 MiB",
	}
	llamaSlow = []string{
		"I load_tensors:   CPU_Mapped model buffer size =    32.88 MiB",
		"I llama_kv_cache:        CPU KV buffer size =    16.00 MiB",
	}
	llamaPartial = []string{
		"I load_tensors: offloading output layer to GPU",
		"I load_tensors: offloading 0 repeating layers to GPU",
		"I load_tensors: offloaded 1/3 layers to GPU",
		"I load_tensors:   CPU_Mapped model buffer size =    32.88 MiB",
		"I load_tensors:        CUDA0 model buffer size =     1.12 MiB",
	}
	// At its default verbosity llama-server prints no load line; the only
	// device line of the real run was a warning.
	llamaNeither = []string{
		"W resolve_fused_ops: layer 0 is assigned to device CUDA0 but Flash Attention is assigned to device CPU (usually due to missing support)",
		"main: server is listening on http://127.0.0.1:8080 - starting the main loop",
	}
)

// Ollama v0.6.5: slog.Info("offload", "", estimate) (llm/server.go) with
// MemoryEstimate.LogValue (llm/memory.go), then its runner's llama.cpp lines.
func ollamaLines(library string, offload int, buffers ...string) []string {
	return append([]string{
		fmt.Sprintf(`time=2026-11-30T02:10:00.000Z level=INFO source=server.go:138 msg=offload library=%s layers.requested=-1 layers.model=29 layers.offload=%d layers.split="" memory.available="[15.1 GiB]" memory.gpu_overhead="0 B" memory.required.full="1.9 GiB" memory.required.partial="0 B" memory.required.kv="224.0 MiB"`, library, offload),
		`time=2026-11-30T02:10:00.100Z level=INFO source=server.go:405 msg="starting llama server"`,
	}, buffers...)
}

// personas are the serves the simulated serve can be, by --persona, made on
// first use: as a package variable, the map (and Ollama's formatted lines)
// would be made at every start of the gate's binary, which runs the
// simulated serve only as a process of its own.
var personas = sync.OnceValue(func() map[string]persona {
	return map[string]persona{
		"": {health: "/health", chatPaths: []string{"/v1/chat/completions"}, reasoningField: "reasoning_content", thinkingOff: "kwargs", timings: true,
			fast:    []string{"fakellm: {model} ready on the private route dx (4 of 4 roles have a 16-row decode kernel)"},
			slow:    []string{"fakellm: no 16-row decode kernel found for {model}; serving with the per-op forward"},
			partial: []string{"fakellm: {model} ready on the private route dx (2 of 4 role(s) have a 16-row decode kernel)"}},
		Persona1bit: {health: "/health", chatPaths: []string{"/v1/chat/completions"}, reasoningField: "reasoning_content", thinkingOff: "kwargs", timings: true,
			fast:    []string{"npu: {model} ready on the private route dx (4 of 4 roles have a 16-row decode kernel)"},
			slow:    []string{"npu: no 16-row decode kernel for {model}; using the per-op forward"},
			partial: []string{"npu: {model} ready on the private route dx (2 of 4 role(s) have a 16-row decode kernel)"}},
		PersonaLlamaCpp: {health: "/health", chatPaths: []string{"/v1/chat/completions", "/chat/completions"}, reasoningField: "reasoning_content", thinkingOff: "kwargs", timings: true,
			fast: llamaFast, slow: llamaSlow, partial: llamaPartial, neither: llamaNeither},
		// vLLM: vllm/platforms/cuda.py, vllm/v1/worker/gpu_model_runner.py,
		// vllm/config/vllm.py.
		PersonaVLLM: {health: "/health", chatPaths: []string{"/v1/chat/completions"}, reasoningField: "reasoning", thinkingOff: "kwargs", logprobs: ShapeVLLM, vllmMetrics: true,
			fast: []string{
				"(EngineCore_DP0 pid=270) INFO 11-30 02:10:00 [cuda.py:367] Using FLASH_ATTN attention backend out of potential backends: ['FLASH_ATTN', 'FLASHINFER', 'TRITON_ATTN', 'FLEX_ATTENTION'].",
				"(EngineCore_DP0 pid=270) INFO 11-30 02:10:20 [gpu_model_runner.py:4650] Graph capturing finished in 12 secs, took 0.45 GiB",
			},
			slow: []string{
				"(APIServer pid=1) WARNING 11-30 02:10:00 [vllm.py:1172] Enforce eager set, disabling torch.compile and CUDAGraphs. This is equivalent to setting -cc.mode=none -cc.cudagraph_mode=none",
				"(APIServer pid=1) INFO 11-30 02:10:00 [vllm.py:1401] Cudagraph is disabled under eager mode",
				"(EngineCore_DP0 pid=270) INFO 11-30 02:10:01 [cuda.py:367] Using FLASH_ATTN attention backend out of potential backends: ['FLASH_ATTN', 'FLASHINFER', 'TRITON_ATTN', 'FLEX_ATTENTION'].",
			}},
		// vllm-ascend: vllm_ascend/platform.py, worker/model_runner_v1.py,
		// compilation/acl_graph.py ("Replaying aclgraph", once, at the first
		// replay).
		PersonaVLLMAscend: {health: "/health", chatPaths: []string{"/v1/chat/completions"}, reasoningField: "reasoning", thinkingOff: "kwargs", logprobs: ShapeVLLM,
			fast: []string{
				"INFO 11-30 02:10:00 [__init__.py:216] Platform plugin ascend is activated",
				"INFO 11-30 02:10:30 [model_runner_v1.py:4862] Graph capturing finished in 30 secs, took 0.52 GiB",
			},
			firstRequest: []string{"INFO 11-30 02:11:00 [acl_graph.py:252] Replaying aclgraph"},
			slow: []string{
				"INFO 11-30 02:10:00 [__init__.py:216] Platform plugin ascend is activated",
				"INFO 11-30 02:10:00 [platform.py:969] Compilation disabled, using eager mode by default",
			}},
		// OpenVINO Model Server: src/modelmanager.cpp, src/llm/servable_initializer.cpp,
		// continuous_batching/servable_initializer.cpp.
		PersonaOVMS: {health: "/v2/health/ready", chatPaths: []string{"/v3/chat/completions"}, reasoningField: "reasoning_content", thinkingOff: "kwargs", logprobs: ShapeReject,
			fast: []string{
				"[2026-11-30 02:10:00.000][1][serving][debug][server.cpp:139] target_device: NPU",
				"[2026-11-30 02:10:00.000][1][modelmanager][info][modelmanager.cpp:169] Available devices for Open VINO: CPU, GPU, NPU",
				"[2026-11-30 02:10:01.000][1][modelmanager][info][servable_initializer.cpp:577] Initializing Language Model Legacy servable",
			},
			slow: []string{
				"[2026-11-30 02:10:00.000][1][serving][debug][server.cpp:139] target_device: ",
				"[2026-11-30 02:10:00.000][1][modelmanager][info][modelmanager.cpp:169] Available devices for Open VINO: CPU, NPU",
				"[2026-11-30 02:10:00.500][1][serving][info][servable_initializer.cpp:195] No device specified, using recommended device: CPU",
				"[2026-11-30 02:10:01.000][1][modelmanager][info][servable_initializer.cpp:557] Initializing Language Model Continuous Batching servable",
			}},
		// FastFlowLM: src/server/server.cpp ("NPU Locked!" when a request gets
		// the NPU), src/src/main.cpp (flm validate's "No NPU device found.", in
		// red on stderr; a wrapper that runs validate before serve shows it).
		// Thinking: src/server/rest_handler.cpp (configure_chat_engine_parameters).
		PersonaFLM: {health: "/v1/models", chatPaths: []string{"/v1/chat/completions"}, reasoningField: "reasoning_content", thinkingOff: "think", flmUsage: true, logprobs: ShapeNone,
			fast:         []string{"[FLM]  Loading model: {model}", "[FLM]  WebServer started on port 52625 with 4 I/O threads"},
			firstRequest: []string{"[🟢 ]  NPU Locked!"},
			slow:         []string{"\x1b[31m[ERROR]  No NPU device found.\x1b[0m", "[FLM]  Loading model: {model}"}},
		PersonaLemonade: {health: "/v1/health", chatPaths: []string{"/v1/chat/completions", "/api/v1/chat/completions"}, statsPath: "/v1/stats", reasoningField: "reasoning_content", thinkingOff: "kwargs",
			fast: llamaFast, slow: llamaSlow, partial: llamaPartial},
		PersonaOllama: {health: "/", chatPaths: []string{"/v1/chat/completions"}, reasoningField: "reasoning", thinkingOff: "effort", logprobs: ShapeOllama, ps: true,
			fast:    ollamaLines("cuda", 29, "load_tensors: offloaded 29/29 layers to GPU", "load_tensors:        CUDA0 model buffer size =  1041.71 MiB"),
			slow:    ollamaLines("cpu", 0, "load_tensors:          CPU model buffer size =  1041.71 MiB"),
			partial: ollamaLines("cuda", 20, "load_tensors: offloaded 20/29 layers to GPU", "load_tensors:        CUDA0 model buffer size =   718.40 MiB")},
	}
})

// PersonaNames are the personas, for flags.
func PersonaNames() []string {
	return []string{PersonaLlamaCpp, PersonaVLLM, PersonaVLLMAscend, PersonaOVMS, PersonaFLM, PersonaLemonade, PersonaOllama, Persona1bit}
}

func (p persona) print(w io.Writer, lines []string, model string) {
	for _, l := range lines {
		fmt.Fprintln(w, strings.ReplaceAll(l, "{model}", model))
	}
}

// startLines prints what the serve prints at start on a route.
func (p persona) startLines(w io.Writer, route, model string) {
	switch route {
	case RouteFast, RouteBoth:
		p.print(w, p.fast, model)
	case RouteSlow:
		p.print(w, p.slow, model)
	case RoutePartial:
		lines := p.partial
		if lines == nil {
			lines = p.slow
		}
		p.print(w, lines, model)
	default:
		p.print(w, p.neither, model)
		fmt.Fprintf(w, "fakellm: %s ready\n", model)
	}
}

// firstRequestLines prints what the serve prints when its first request
// arrives: on the fast route, any proof that waits for a request; on both
// routes, a fault and the slow route's lines.
func (p persona) firstRequestLines(w io.Writer, route, model string) {
	switch route {
	case RouteFast:
		p.print(w, p.firstRequest, model)
	case RouteBoth:
		fmt.Fprintln(w, "fakellm: kernel fault in role ffn; retrying")
		p.print(w, p.slow, model)
	}
}
