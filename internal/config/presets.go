package config

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
)

// Preset is what one kind of serve needs: where it answers, how thinking is
// turned off, where its own figures are, and the log lines that name its
// route. A preset sets only what the user did not set. Each fact's source
// and the version it was read in are in docs/presets.md's table.
type Preset struct {
	Health          string
	ChatPath        string
	ThinkingControl string
	StatsPath       string
	FastRoute       []string
	SlowRoute       []string
	// Hint says how to make the serve print its evidence, when it hides it
	// by default; it is given unless the serve's words already do it.
	Hint *Hint
	// NoLogprobs: the serve is known not to stream logprobs on its chat
	// path (it ignores or rejects the fields), so --top-logprobs defaults
	// to 0; otherwise to DefaultTopLogprobs. docs/presets.md#logprobs.
	NoLogprobs bool
	// Energy is the order in which --energy auto tries the sensors, by the
	// devices the serve runs on; nil tries energy.Kinds.
	Energy []string
	// Serial: the serve takes one request at a time, first in first out,
	// so --load-expect defaults to serial; otherwise to batch.
	Serial bool
}

// Hint is a way to make a serve print its route evidence.
type Hint struct {
	Text  string   // what to do, as the route detail says it
	Flags []string // any of these among the serve's words: already done
}

// Ways of turning thinking off.
const (
	ThinkingKwargs = "chat-template-kwargs" // chat_template_kwargs.enable_thinking (llama.cpp --jinja, vLLM, Qwen3 templates)
	ThinkingEffort = "reasoning-effort"     // reasoning_effort: "none" (Ollama's OpenAI-compatible API)
	ThinkingBoth   = "both"                 // chat-template-kwargs and reasoning-effort
	ThinkingThink  = "think"                // a top-level "think": false (FastFlowLM's own field)
)

// llama.cpp's load_tensors lines (src/llama-model.cpp). "offloaded N/M
// layers to GPU" is printed only when a GPU, iGPU or RPC device is built in,
// and N is the number asked for, so the model buffer lines say where the
// weights went: a device buffer (its name from the backend's source, the
// device's index after it) is the fast route; CPU buffers alone are the
// slow route. CUDA_Host, Vulkan_Host, CANN_Host... are pinned host memory,
// not device. A device that maps the model file rather than copying it
// names its buffer with "_Mapped" after the device's name (Metal's
// "Metal_Mapped", "MTL0_Mapped": ggml/src/ggml-metal/): still the device.
// Releases before the "model buffer" wording (llm_load_tensors, 2024)
// printed "CUDA0 buffer size" and "CPU buffer size": the same buffers.
//
// A full offload still keeps the token embeddings in a host buffer
// (CPU_Mapped, or CPU without mmap: llama.cpp reads them on the CPU), which
// is always smaller than what goes to the device (every layer, and the
// output matrix, a copy of the embeddings when they are tied). More in host
// buffers than on the device is weights run on the CPU: MoE experts kept
// there (--cpu-moe, --n-cpu-moe, -ot exps=CPU, which leave "offloaded
// 49/49" as it is), the slow route whatever the count says. Each model load
// starts with llama_model_loader's "loaded meta data" line (src/
// llama-model-loader.cpp); the buffers are weighed per load, and a load
// with CPU buffers alone is the slow route even after one on the device.
var (
	llamaOffload     = route.CountPrefix + `load_tensors: offloaded (\d+)/(\d+) layers to GPU`
	llamaDeviceModel = `load_tensors: +(?:(?:CUDA|ROCm|MUSA|Vulkan|SYCL|CANN|MTL|HTP|OPENVINO)\d+|Metal|OpenCL|WebGPU|zDNN|RPC\[[^\]]*\])(?:_Mapped)? (?:model )?buffer size = +(\d+(?:\.\d+)?) MiB`
	llamaHostBuffer  = `load_tensors: +(?:CPU(?:_Mapped|_REPACK|_AARCH64)?|\w+_Host|AMX) (?:model )?buffer size`
	llamaCPUModel    = route.UnlessFastPrefix + llamaHostBuffer
	llamaCPUHeavier  = route.HeavierPrefix + llamaHostBuffer + ` = +(\d+(?:\.\d+)?) MiB`
	llamaLoad        = route.LoadPrefix + `llama_model_loader: loaded meta data with`

	llamaFast = []string{llamaOffload, llamaDeviceModel}
	llamaSlow = []string{llamaCPUModel, llamaCPUHeavier, llamaLoad}

	// llama-server prints no model-loading line at its default verbosity
	// (3, info); -lv 4 (--verbosity, --log-verbosity) shows them
	// (common/arg.cpp).
	llamaServerHint = &Hint{
		Text:  "llama-server prints its load lines (offloaded N/M layers, model buffers) only at verbosity 4: add -lv 4 to --serve",
		Flags: []string{"-lv", "--verbosity", "--log-verbosity", "-v", "--verbose", "--log-verbose"},
	}
)

// Ollama's scheduler logs its plan for a model at INFO before any runner
// loads it: v0.6.5 as "msg=offload library=cuda ... layers.model=M
// layers.offload=N" (ollama/ollama@0f3f9e353df96d4cfc40ac19114c782a57fe30f5:
// llm/server.go, slog.Info("offload", "", estimate); llm/memory.go
// LogValue), releases before v0.5.8 as "msg=\"offload to cuda\"
// layers.requested=... layers.model=M layers.offload=N"
// (ollama/ollama@a420a453b4783841e3e79c248ef0fe9548df6914:llm/memory.go,
// log.Info("offload to "+m.inferenceLibrary, ...)); N is the layers it
// estimates will fit, and the runner is started with --n-gpu-layers N. A
// plan is not a placement: the runner can then find no usable library
// (its DEBUG line "compatible gpu libraries" compatible=[], llm/server.go)
// and run on the CPU. So a plan never names the fast route (a plan rule):
// a plan for every layer, alone, is only a plan, and the detail says so;
// a plan for fewer (none among them), or on the CPU, is the slow route, as
// the runner is given no more. The fast route is the runner's placement:
// llama.cpp's load lines (v0.6.5 and v0.12.11's llama.cpp runner log them
// at INFO) or the line Ollama's own engine writes "to mimic llama runner
// logs" once its weights' memory is allocated
// (ollama/ollama@c1149875234a51aa1e5e60b74f3807f5982c60fa:
// ml/backend/ggml/ggml.go Load: "offloaded 29/29 layers to GPU", the
// output layer counted). Each plan, and v0.12.11's "loading model" line
// (llm/server.go), starts a model load; llama.cpp's own "loaded meta
// data" line is not one, as it comes after the plan it belongs to. No
// compatible library is the slow route outright.
var (
	ollamaPlan          = `msg=(?:offload library=\S+|"offload to \w+") layers\.requested=`
	ollamaPlanCount     = route.PlanPrefix + ollamaPlan + `\S* layers\.model=(?P<total>\d+) layers\.offload=(\d+)`
	ollamaPlanLoad      = route.LoadPrefix + ollamaPlan
	ollamaLoadingLoad   = route.LoadPrefix + `msg="loading model" "model layers"=`
	ollamaEngineOffload = route.CountPrefix + `msg="offloaded (\d+)/(?P<total>\d+) layers to GPU"`
	ollamaCPU           = `msg=(?:offload library=cpu |"offload to cpu")`
	ollamaNoLibrary     = `msg="compatible gpu libraries" compatible=\[\]`
)

// OVMS logs the device it was given at DEBUG, among its CLI settings
// (src/server.cpp logConfig: SPDLOG_DEBUG("target_device: {}", ...)), when
// it serves from --model_path or --source_model; its log pattern ends each
// prefix with "] " (src/logging.cpp). At INFO no line names a device that
// was given: "Initializing Language Model Legacy servable" is printed for
// the NPU and for any device with --pipeline_type LM
// (src/llm/servable_initializer.cpp).
var (
	ovmsFast = []string{
		`\] target_device: NPU$`,
		`, with target device: NPU \.\.\.$`,
		ovmsExecutionNPU,
	}
	ovmsSlow = []string{
		`\] target_device: (?:CPU|GPU|AUTO|HETERO|MULTI|BATCH)`,
		`No device specified, using recommended device: CPU`,
		`Initializing Language Model Continuous Batching servable`,
		ovmsNoNPU,
		route.UnlessFastPrefix + `, with target device: (?:CPU|GPU|AUTO|HETERO|MULTI|BATCH)`,
		route.UnlessFastPrefix + `CompiledModel config key: EXECUTION_DEVICES, value: (?:CPU|GPU)`,
	}
	// A model OVMS compiles itself (src/modelinstance.cpp) is announced at
	// INFO with the device it was given ("Loading model: m, version: 1,
	// from path: p, with target device: NPU ..."), and at DEBUG the compiled
	// model's own properties follow, EXECUTION_DEVICES among them: the
	// device OpenVINO runs it on ("Model: m; version: 1; target device:
	// AUTO, CompiledModel config key: EXECUTION_DEVICES, value: CPU"). The
	// plugins' own configurations, also dumped at DEBUG ("OpenVINO Core
	// plugin: CPU; plugin configuration: { ... EXECUTION_DEVICES: CPU ...
	// }"), say nothing of a model and are not read. A config can serve
	// several models, an embedding model on the CPU beside the LLM: a model
	// on the CPU is the slow route unless a line names the NPU.
	ovmsExecutionNPU = `CompiledModel config key: EXECUTION_DEVICES, value: NPU$`
	// At INFO, OVMS lists the devices OpenVINO found (src/modelmanager.cpp:
	// "Available devices for Open VINO: CPU, GPU, NPU", joined with ", "):
	// a list of CPUs, GPUs and GNAs alone has no NPU to run on. Another
	// name (the NPU's older VPUX among them) leaves the line unread.
	ovmsNoNPU = `Available devices for Open VINO: (?:(?:CPU|GPU(?:\.\d+)?|GNA)(?:, |$))+$`
	ovmsHint  = &Hint{
		Text: "OVMS names the device it was given only at DEBUG (\"target_device: NPU\"), and only when it serves from --model_path or --source_model, not --config_path: add --log_level DEBUG to --serve",
	}
)

// vLLM: CUDA graphs captured is the fast route; eager mode (the per-op
// forward's analogue) and CPU attention backends are the slow route
// (vllm/v1/worker/gpu_model_runner.py, vllm/config/vllm.py,
// vllm/platforms/cuda.py and cpu.py). Releases with the V0 engine said so
// in other words: its model runner printed "Capturing cudagraphs for
// decoding" (before v0.6.4: "Capturing the model for CUDA graphs") only
// after asserting it was not in eager mode (vllm/worker/model_runner.py
// capture_model), and its engine's config line carries enforce_eager=True
// (vllm/engine/llm_engine.py). vLLM on the CPU says so as it starts: the
// platform it detected (vllm/platforms/__init__.py: "Automatically
// detected platform cpu."; DEBUG in recent releases), its CPU worker and
// model runner (vllm/v1/worker/cpu_worker.py, cpu_model_runner.py, their
// names in each line's prefix, or the CPUWorker class named in a warning),
// the KV cache it sizes in host memory
// (vllm/platforms/cpu.py: "VLLM_CPU_KVCACHE_SPACE not set. Using N GiB for
// KV cache."; on MPS the line ends "on MPS"), and, before V1, the Torch
// SDPA attention backend (vllm/attention/selector.py: "Using Torch SDPA
// backend."). A dispatcher that has no graph keys says "No cudagraph will
// be used" (vllm/v1/cudagraph_dispatcher.py); it is the slow route unless
// graphs were captured, as a warm-up may dispatch before the capture.
// --enforce-eager is said as the engine's config is settled
// (vllm/config/vllm.py VllmConfig.__post_init__): "Enforce eager set,
// overriding optimization level to -O0" from the -O levels'
// introduction (vllm-project/vllm#26847) until --enforce-eager
// turned off only compilation and graphs (#34523: "Enforce eager set,
// disabling torch.compile and CUDAGraphs"), and "Cudagraph is disabled
// under eager mode" in both (v0.15.1 prints the two in a row).
var (
	vllmFast = []string{
		`Graph capturing finished in \d+ secs`,
		`Capturing cudagraphs for decoding`,
		`Capturing the model for CUDA graphs`,
	}
	vllmSlow = []string{
		`Enforce eager set, disabling torch\.compile and CUDAGraphs`,
		`Enforce eager set, overriding optimization level to -O0`,
		`Cudagraph is disabled under eager mode`,
		`Skipping CUDA graph capture`,
		`Using (?:AttentionBackendEnum\.)?(?:TORCH_SDPA|CPU_ATTN)(?: attention)? backend`,
		`Initializing an? (?:V\d )?LLM engine \(v[^)]*\) with config: .*enforce_eager=True`,
		`Automatically detected platform cpu\.`,
		`cpu_(?:model_runner|worker)\.py:\d+\]|vllm\.v1\.worker\.cpu_worker\.CPUWorker`,
		`VLLM_CPU_KVCACHE_SPACE not set\. Using [\d.]+ GiB for KV cache\.`,
		`Using Torch SDPA backend`,
		vllmNoGraph,
	}
	vllmNoGraph = route.UnlessFastPrefix + `No cudagraph will be used`
	// vllm-ascend captures ACL graphs through the same capture_model and
	// says "Replaying aclgraph" once a request replays one; eager mode and
	// graph modes the NPU refuses are the slow route (vllm_ascend/platform.py,
	// compilation/acl_graph.py).
	vllmAscendFast = []string{`Graph capturing finished in \d+ secs`, `Replaying aclgraph`}
	vllmAscendSlow = append([]string{
		`Compilation disabled, using eager mode by default`,
		`cudagraph_mode is not support on NPU\. falling back to NONE`,
		`setting CUDAGraphMode to NONE`,
		vllmNoGraph,
	}, vllmSlow[:4]...)
)

// FastFlowLM's own failures to reach the NPU, beside flm validate's: the
// NPU runtime (XRT) finding no device ("No such device with index '0'",
// which flm prints as "Error:  No such device with index '0'"), and a
// model that does not load (src/server/rest_handler.cpp, src/runner/
// runner.cpp: header_print("ERROR", "Failed to load model: " ...), printed
// "[ERROR]  Failed to load model: ..."): FLM has no other device, so a
// model that is not loaded there is served nowhere.
var flmSlow = []string{`No NPU device found`, `No XDNA2 NPU hardware detected`, `No such device with index`, `\[ERROR\] +Failed to load model: `}

// Lemonade runs a model on one of its recipes. Its flm recipe runs
// FastFlowLM, which has no device but the NPU, once flm validate passed
// ("FLM NPU validation failed" otherwise), and says the server answers:
// "(FastFlowLM) FastFlowLM is ready!" (src/cpp/server/backends/fastflowlm/
// fastflowlm_server.cpp, wait_for_ready: server_name_ + " is ready!"; its
// server was named "flm-server" before). Its llamacpp recipe prints
// llama.cpp's lines, and Lemonade's Python server (8.x, src/lemonade/
// tools/server/llamacpp.py) retries a model on the CPU when the GPU load
// fails ("Loading X on GPU didn't work, re-attempting on CPU"), the CPU
// llama-server (-ngl 0) prefixing its lines "LLAMA SERVER CPU:". Its
// router names the recipe and device of each model it loads ("Loading
// model: qwen3.5-9b-FLM (checkpoint: qwen3.5:9b, recipe: flm, type: llm,
// device: npu, residency: standard)": lemonade-sdk/lemonade@
// e385039ed33551de7f54cb73194cd08088772c08:src/cpp/server/router.cpp, at
// DEBUG, "(Router) "; before 10.0 on stdout as "[Router] Loading model:
// ... device: npu)", lemonade-sdk/lemonade@
// 3f76d400a51c1118c08659c950a1365f2d38ef49:src/cpp/server/router.cpp,
// v9.4.1): an LLM on the flm recipe is served on the NPU or nowhere, as
// FastFlowLM has no other device (a load that fails there leaves no reply
// to judge, and FLM's own failures name the slow route).
var (
	lemonadeFLMLoad = `[[(]Router[])] Loading model: .* \(checkpoint: .*, recipe: flm, type: llm, device: npu[,)]`
	lemonadeFast    = append([]string{`\(FastFlowLM\) (?:FastFlowLM|flm-server) is ready!`, lemonadeFLMLoad}, llamaFast...)
	lemonadeSlow    = append([]string{`FLM NPU validation failed`, `didn't work, re-attempting on CPU`, `LLAMA SERVER CPU: `}, llamaSlow...)
)

// Presets by name.
var Presets = map[string]Preset{
	"llama.cpp": {Health: "/health", ChatPath: "/v1/chat/completions", ThinkingControl: ThinkingKwargs,
		FastRoute: llamaFast, SlowRoute: llamaSlow, Hint: llamaServerHint},
	"vllm": {Health: "/health", ChatPath: "/v1/chat/completions", ThinkingControl: ThinkingKwargs,
		FastRoute: vllmFast, SlowRoute: vllmSlow, Energy: []string{"nvml", "hwmon"}},
	"vllm-ascend": {Health: "/health", ChatPath: "/v1/chat/completions", ThinkingControl: ThinkingKwargs,
		FastRoute: vllmAscendFast, SlowRoute: vllmAscendSlow, Energy: []string{"npu-smi"}},
	// OpenVINO Model Server: KServe health, OpenAI API under /v3. With no
	// target device it picks one, never the NPU. Its Legacy servable runs
	// on whatever device it is told (--pipeline_type LM), so that line is
	// no evidence; the device is named only in its CLI settings, at DEBUG.
	// It rejects logprobs with stream: true ("logprobs are not supported in
	// streaming mode.", src/llm/apis/openai_completions.cpp).
	"ovms": {Health: "/v2/health/ready", ChatPath: "/v3/chat/completions", ThinkingControl: ThinkingKwargs,
		FastRoute: ovmsFast, SlowRoute: ovmsSlow, Hint: ovmsHint, NoLogprobs: true, Energy: []string{"hwmon", "rapl"}, Serial: true},
	// FastFlowLM runs on the NPU only; it has no health path, /v1/models
	// answers once it is up. "NPU Locked!" is printed when a request gets
	// the NPU (src/server/server.cpp); flm validate prints "No NPU device
	// found." (src/src/main.cpp). Its own "think" sets the models'
	// enable_think (src/server/rest_handler.cpp); reasoning_effort "none"
	// sets the same flag in the models that read it (Qwen3, Gemma), so it
	// adds nothing, and gpt-oss warns of it. It reads no logprobs field and
	// streams none (src/server/streaming_ostream_openai.hpp).
	"flm": {Health: "/v1/models", ChatPath: "/v1/chat/completions", ThinkingControl: ThinkingThink,
		FastRoute: []string{`\] +NPU Locked!`}, SlowRoute: flmSlow, NoLogprobs: true, Energy: []string{"hwmon", "rapl"}, Serial: true},
	// Lemonade answers under /v1 (and /api/v1), and has its own figures of
	// the last request at /v1/stats; its llamacpp recipe prints llama.cpp's
	// lines, its flm recipe its own.
	"lemonade": {Health: "/v1/health", ChatPath: "/v1/chat/completions", ThinkingControl: ThinkingKwargs,
		StatsPath: "/v1/stats", FastRoute: lemonadeFast, SlowRoute: lemonadeSlow},
	// Ollama answers "Ollama is running" on /, turns thinking off in its
	// OpenAI-compatible API with reasoning_effort "none", and logs its plan
	// for the layers (never the fast route), then where its runner put them.
	"ollama": {Health: "/", ChatPath: "/v1/chat/completions", ThinkingControl: ThinkingEffort,
		FastRoute: append([]string{ollamaEngineOffload, ollamaPlanCount}, llamaFast...),
		SlowRoute: []string{ollamaCPU, ollamaNoLibrary, ollamaPlanLoad, ollamaLoadingLoad, llamaCPUModel, llamaCPUHeavier}},
	// The reference serve: the gate's own defaults, its count note first.
	"1bit": {Health: "/health", ChatPath: "/v1/chat/completions", ThinkingControl: ThinkingKwargs,
		FastRoute: DefaultFastRoute(), SlowRoute: DefaultSlowRoute()},
}

// PresetNames are the presets, sorted.
func PresetNames() []string {
	var ns []string
	for n := range Presets {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return ns
}

// ApplyPreset sets what c.Preset names, except where set reports that the
// user set that flag.
func (c *Config) ApplyPreset(set func(flag string) bool) error {
	if c.Preset == "" {
		return nil
	}
	p, ok := Presets[c.Preset]
	if !ok {
		return fmt.Errorf("--preset %q: pass one of %s", c.Preset, strings.Join(PresetNames(), ", "))
	}
	apply := func(flag string, dst *string, v string) {
		if !set(flag) {
			*dst = v
		}
	}
	apply("health", &c.Health, p.Health)
	apply("chat-path", &c.ChatPath, p.ChatPath)
	apply("thinking-control", &c.ThinkingControl, p.ThinkingControl)
	apply("stats-path", &c.StatsPath, p.StatsPath)
	if !set("fast-route") {
		c.FastRoute = slices.Clone(p.FastRoute)
	}
	if !set("slow-route") {
		c.SlowRoute = slices.Clone(p.SlowRoute)
	}
	c.applyWitnesses(set)
	if !set("load-expect") {
		c.LoadExpect = judge.LoadBatch
		if p.Serial {
			c.LoadExpect = judge.LoadSerial
		}
	}
	if !set("top-logprobs") {
		c.TopLogprobs = DefaultTopLogprobs
		if p.NoLogprobs {
			c.TopLogprobs = 0
		}
	}
	return nil
}

// routeHint is how to make the serve print its route evidence, when it is
// known to hide it and its words do not already ask for it: by its preset,
// or by its executable's name (llama-server, run directly or through
// another command).
func routeHint(preset string, argv []string) string {
	h := Presets[preset].Hint
	if h == nil && slices.ContainsFunc(argv, func(w string) bool { return filepath.Base(w) == "llama-server" }) {
		h = llamaServerHint
	}
	if h == nil {
		return ""
	}
	for _, w := range argv {
		name, _, _ := strings.Cut(w, "=")
		if slices.Contains(h.Flags, name) {
			return ""
		}
	}
	return h.Text
}

// deviceChoice finds an OpenVINO device string that starts on the CPU:
// AUTO (the NPU is not in its default list, and it serves from the CPU
// while the target compiles) or HETERO. It returns the word, or "".
func deviceChoice(argv []string) string {
	for i, w := range argv {
		v := ""
		if name, val, ok := strings.Cut(w, "="); ok && name == "--target_device" {
			v = val
		} else if w == "--target_device" && i+1 < len(argv) {
			v = argv[i+1]
		}
		if u := strings.ToUpper(v); strings.HasPrefix(u, "AUTO") || strings.HasPrefix(u, "HETERO") {
			return v
		}
	}
	return ""
}
