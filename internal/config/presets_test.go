package config

import (
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
)

// Each preset's rules against log lines its serve prints (from its source,
// or from a real run where said): the route the judge gives.
func TestPresetRoutes(t *testing.T) {
	tests := []struct {
		preset string
		name   string
		log    string
		want   string // fast, slow, both or neither
	}{
		// llama-server b10116 on an H200 at -lv 4 (a real run).
		{"llama.cpp", "full offload", "I load_tensors: offloaded 13/13 layers to GPU\nI load_tensors:   CPU_Mapped model buffer size =    62.50 MiB\nI load_tensors:        CUDA0 model buffer size =   356.60 MiB", "fast"},
		{"llama.cpp", "partial offload", "I load_tensors: offloading output layer to GPU\nI load_tensors: offloading 0 repeating layers to GPU\nI load_tensors: offloaded 1/3 layers to GPU", "slow"},
		{"llama.cpp", "-ngl 0", "I load_tensors: offloaded 0/3 layers to GPU\nI load_tensors:   CPU_Mapped model buffer size =    32.88 MiB", "slow"},
		{"llama.cpp", "a build without a device backend", "load_tensors:   CPU_Mapped model buffer size =    32.88 MiB", "slow"},
		{"llama.cpp", "default verbosity", "W resolve_fused_ops: layer 0 is assigned to device CUDA0 but Flash Attention is assigned to device CPU (usually due to missing support)", "neither"},
		{"llama.cpp", "Vulkan", "load_tensors: offloaded 33/33 layers to GPU\nload_tensors:      Vulkan0 model buffer size =  3577.56 MiB\nload_tensors:   CPU_Mapped model buffer size =    70.31 MiB", "fast"},
		{"llama.cpp", "a full offload: the token embeddings on the host", "load_tensors: offloaded 13/13 layers to GPU\nload_tensors:   CPU_Mapped model buffer size =    62.50 MiB\nload_tensors:        CUDA0 model buffer size =   356.60 MiB", "fast"},
		{"llama.cpp", "MoE experts on the CPU (--cpu-moe)", "load_tensors: offloaded 49/49 layers to GPU\nload_tensors:        CUDA0 model buffer size =  2000.00 MiB\nload_tensors:   CPU_Mapped model buffer size = 16000.00 MiB", "both"},
		{"llama.cpp", "MoE experts on the CPU, two host buffers outweigh the device", "load_tensors: offloaded 49/49 layers to GPU\nload_tensors:        CUDA0 model buffer size =  2000.00 MiB\nload_tensors:   CPU_REPACK model buffer size =  1200.00 MiB\nload_tensors:   CPU_Mapped model buffer size =  1000.00 MiB", "both"},
		{"llama.cpp", "two GPUs outweigh the host", "load_tensors: offloaded 49/49 layers to GPU\nload_tensors:        CUDA0 model buffer size =  2000.00 MiB\nload_tensors:        CUDA1 model buffer size =  2000.00 MiB\nload_tensors:   CPU_Mapped model buffer size =  3000.00 MiB", "fast"},
		{"llama.cpp", "a second model on the CPU alone", "llama_model_loader: loaded meta data with 26 key-value pairs and 291 tensors from a.gguf (version GGUF V3 (latest))\nload_tensors: offloaded 29/29 layers to GPU\nload_tensors:        CUDA0 model buffer size =  1000.00 MiB\nload_tensors:   CPU_Mapped model buffer size =   200.00 MiB\nllama_model_loader: loaded meta data with 26 key-value pairs and 291 tensors from b.gguf (version GGUF V3 (latest))\nload_tensors:   CPU_Mapped model buffer size =   300.00 MiB", "both"},
		{"llama.cpp", "two models on the device", "llama_model_loader: loaded meta data with 26 key-value pairs and 291 tensors from a.gguf (version GGUF V3 (latest))\nload_tensors:   CPU_Mapped model buffer size =   200.00 MiB\nload_tensors:        CUDA0 model buffer size =  1000.00 MiB\nllama_model_loader: loaded meta data with 26 key-value pairs and 291 tensors from b.gguf (version GGUF V3 (latest))\nload_tensors:   CPU_Mapped model buffer size =   50.00 MiB\nload_tensors:        CUDA0 model buffer size =  300.00 MiB", "fast"},
		{"llama.cpp", "CANN (Ascend)", "llm_load_tensors:        CANN0 model buffer size =  1000.00 MiB", "fast"},
		{"llama.cpp", "pinned host memory is not the device", "load_tensors:    CUDA_Host model buffer size =  9498.51 MiB\nload_tensors:          CPU model buffer size =   577.50 MiB", "slow"},
		{"llama.cpp", "a mapped device buffer (Metal) outweighs the host", "load_tensors: offloaded 29/29 layers to GPU\nload_tensors: Metal_Mapped model buffer size =   372.45 MiB\nload_tensors:   CPU_Mapped model buffer size =   121.50 MiB", "fast"},
		{"llama.cpp", "a mapped device buffer (MTL0) outweighs the host", "load_tensors: offloaded 66/66 layers to GPU\nload_tensors:   CPU_Mapped model buffer size =   644.14 MiB\nload_tensors:  MTL0_Mapped model buffer size = 14803.73 MiB", "fast"},
		{"llama.cpp", "the older wording: every layer on the device", "llm_load_tensors: offloaded 33/33 layers to GPU\nllm_load_tensors:      SYCL0 buffer size =  5115.49 MiB\nllm_load_tensors:        CPU buffer size =   344.44 MiB", "fast"},
		{"llama.cpp", "the older wording: the CPU alone", "llm_load_tensors:        CPU buffer size =  7761.11 MiB", "slow"},
		{"llama.cpp", "ROCm, SYCL, Metal, OpenCL, Hexagon", "load_tensors:        ROCm0 model buffer size = 1 MiB\nload_tensors:        SYCL0 model buffer size = 1 MiB\nload_tensors:        Metal model buffer size = 1 MiB\nload_tensors:       OpenCL model buffer size = 1 MiB\nload_tensors:         HTP0 model buffer size = 1 MiB", "fast"},
		// Ollama v0.6.5 (llm/server.go, llm/memory.go).
		{"ollama", "on the CPU", `time=2026-11-30T02:10:00.000Z level=INFO source=server.go:138 msg=offload library=cpu layers.requested=-1 layers.model=3 layers.offload=0 layers.split="" memory.available="[15.1 GiB]"` + "\nload_tensors:          CPU model buffer size =   100.00 MiB", "slow"},
		// A plan is not a placement: a plan for all, alone, names neither
		// route (TestPlansAreNotPlacements), a plan for fewer the slow one,
		// and only the runner's lines name the fast one.
		{"ollama", "a plan for all layers on a GPU, alone", `level=INFO source=server.go:138 msg=offload library=cuda layers.requested=-1 layers.model=29 layers.offload=29 layers.split=""`, "neither"},
		{"ollama", "a plan for some layers on a GPU, alone", `level=INFO source=server.go:138 msg=offload library=cuda layers.requested=-1 layers.model=29 layers.offload=20 layers.split=""`, "slow"},
		{"ollama", "the plan, then the runner's placement", `level=INFO source=server.go:138 msg=offload library=cuda layers.requested=-1 layers.model=29 layers.offload=29 layers.split=""` + "\nllama_model_loader: loaded meta data with 26 key-value pairs and 291 tensors from a.gguf (version GGUF V3 (latest))\nload_tensors: offloaded 29/29 layers to GPU\nload_tensors:        CUDA0 model buffer size =  1041.71 MiB\nload_tensors:   CPU_Mapped model buffer size =    70.31 MiB", "fast"},
		{"ollama", "the plan, then no compatible library", `level=INFO source=server.go:175 msg=offload library=cuda layers.requested=-1 layers.model=25 layers.offload=25 layers.split=""` + "\n" + `level=DEBUG source=server.go:291 msg="compatible gpu libraries" compatible=[]`, "slow"},
		{"ollama", "a second plan whose runner is on the CPU", `msg=offload library=cuda layers.requested=-1 layers.model=29 layers.offload=29 layers.split=""` + "\nload_tensors: offloaded 29/29 layers to GPU\nload_tensors:        CUDA0 model buffer size =  1041.71 MiB\n" + `msg=offload library=cuda layers.requested=-1 layers.model=29 layers.offload=29 layers.split=""` + "\nload_tensors:          CPU model buffer size =  1041.71 MiB", "both"},
		// Before v0.5.8 (llm/memory.go), with llama.cpp's older wording.
		{"ollama", "an older plan, then the runner on Metal", `level=INFO source=memory.go:309 msg="offload to metal" layers.requested=-1 layers.model=33 layers.offload=33 layers.split=""` + "\nllm_load_tensors: offloaded 33/33 layers to GPU\nllm_load_tensors:        CPU buffer size =   281.81 MiB\nllm_load_tensors:      Metal buffer size =  4155.99 MiB", "fast"},
		{"ollama", "an older plan on the CPU", `level=INFO source=memory.go:309 msg="offload to cpu" layers.requested=-1 layers.model=33 layers.offload=0 layers.split=""`, "slow"},
		{"ollama", "an older runner on the CPU", "llm_load_tensors:        CPU buffer size =  4460.45 MiB", "slow"},
		// Ollama v0.12.11: llama.cpp's runner's lines (as its own real run
		// on the CPU printed them), or its own engine's (ml/backend/ggml/ggml.go).
		{"ollama", "v0.12.11 on the CPU, llama.cpp's runner", `time=2026-12-01T06:45:02.158Z level=INFO source=server.go:459 msg="loading model" "model layers"=3 requested=-1` + "\n" + `time=2026-12-01T06:45:02.158Z level=INFO source=device.go:245 msg="model weights" device=CPU size="24.7 MiB"` + "\nload_tensors: loading model tensors, this can take a while... (mmap = false)\nload_tensors:          CPU model buffer size =    24.99 MiB", "slow"},
		{"ollama", "v0.12.11, its own engine, all layers on a GPU", `time=2026-12-01T06:45:02.158Z level=INFO source=ggml.go:494 msg="offloaded 29/29 layers to GPU"`, "fast"},
		{"ollama", "v0.12.11, its own engine, some layers on a GPU", `time=2026-12-01T06:45:02.158Z level=INFO source=ggml.go:494 msg="offloaded 20/29 layers to GPU"`, "slow"},
		{"ollama", "v0.12.11, its own engine, on the CPU", `time=2026-12-01T06:45:02.158Z level=INFO source=ggml.go:494 msg="offloaded 0/29 layers to GPU"`, "slow"},
		// vLLM.
		{"vllm", "graphs captured", "INFO 11-30 02:10:00 [cuda.py:367] Using FLASH_ATTN attention backend out of potential backends: ['FLASH_ATTN', 'FLASHINFER'].\nINFO 11-30 02:10:20 [gpu_model_runner.py:4650] Graph capturing finished in 12 secs, took 0.45 GiB", "fast"},
		// --enforce-eager before vllm-project/vllm#34523, as v0.15.1 prints it.
		{"vllm", "eager, as -O0", "WARNING 02-06 03:33:17 [vllm.py:662] Enforce eager set, overriding optimization level to -O0", "slow"},
		{"vllm-ascend", "eager, as -O0", "WARNING 02-06 03:33:17 [vllm.py:662] Enforce eager set, overriding optimization level to -O0", "slow"},
		{"vllm-ascend", "eager, graphs disabled", "INFO 02-06 03:33:17 [vllm.py:762] Cudagraph is disabled under eager mode", "slow"},
		{"vllm", "eager", "WARNING 11-30 02:10:00 [vllm.py:1172] Enforce eager set, disabling torch.compile and CUDAGraphs. This is equivalent to setting -cc.mode=none -cc.cudagraph_mode=none\nINFO 11-30 02:10:00 [vllm.py:1401] Cudagraph is disabled under eager mode", "slow"},
		{"vllm", "a CPU attention backend, forced", "INFO [cpu.py:120] Using AttentionBackendEnum.CPU_ATTN backend.", "slow"},
		{"vllm", "a CPU attention backend, chosen", "INFO [cpu.py:120] Using TORCH_SDPA attention backend out of potential backends: ['TORCH_SDPA'].", "slow"},
		// vLLM's V0 engine (vllm/worker/model_runner.py, vllm/engine/llm_engine.py).
		{"vllm", "V0: graphs captured for decoding", "INFO 02-26 22:35:18 [model_runner.py:1442] Capturing cudagraphs for decoding. This may lead to unexpected consequences if the model is not static.", "fast"},
		{"vllm", "V0, older: graphs captured", "INFO 12-08 09:22:16 model_runner.py:1402] Capturing the model for CUDA graphs. This may lead to unexpected consequences if the model is not static.", "fast"},
		{"vllm", "V0: eager in the engine's config", "INFO 08-02 09:46:46 [llm_engine.py:230] Initializing a V0 LLM engine (v0.9.3.dev0) with config: model='./Qwen3-1.7B/', quantization=None, enforce_eager=True, kv_cache_dtype=auto, device_config=cpu", "slow"},
		{"vllm", "V0: not eager in the engine's config", "INFO 05-14 17:44:22 [llm_engine.py:240] Initializing a V0 LLM engine (v0.8.5.post1) with config: model='Qwen/Qwen3-14B', quantization=None, enforce_eager=False, kv_cache_dtype=auto", "neither"},
		{"vllm", "V0: the Torch SDPA backend (the CPU)", "(VllmWorkerProcess pid=143) INFO 09-20 08:05:46 selector.py:128] Using Torch SDPA backend.", "slow"},
		// vLLM on the CPU (vllm/platforms/__init__.py, cpu.py, vllm/v1/worker/).
		{"vllm", "the CPU platform detected", "INFO 08-02 09:45:57 [__init__.py:244] Automatically detected platform cpu.", "slow"},
		{"vllm", "the CUDA platform detected", "INFO 06-18 15:48:37 [__init__.py:244] Automatically detected platform cuda.", "neither"},
		{"vllm", "the CPU model runner", "(EngineCore_DP0 pid=60) INFO 01-09 07:47:47 [cpu_model_runner.py:65] Warming up model for the compilation...", "slow"},
		{"vllm", "the CPU worker", "(EngineCore_DP0 pid=41) INFO 01-08 12:18:24 [cpu_worker.py:86] \tOMP tid: 54, core 3", "slow"},
		{"vllm", "the CPU worker's class", "WARNING 06-04 11:40:26 [utils.py:2722] Methods determine_num_available_blocks,device_config not implemented in <vllm.v1.worker.cpu_worker.CPUWorker object at 0x30d0de070>", "slow"},
		{"vllm", "the GPU worker's class", "WARNING 06-04 11:40:26 [utils.py:2722] Methods determine_num_available_blocks not implemented in <vllm.v1.worker.gpu_worker.Worker object at 0x30d0de070>", "neither"},
		{"vllm", "the KV cache in host memory", "(EngineCore_DP0 pid=60) WARNING 01-09 07:48:12 [cpu.py:157] VLLM_CPU_KVCACHE_SPACE not set. Using 11.72 GiB for KV cache.", "slow"},
		{"vllm", "the KV cache on MPS is not the CPU's", "WARNING [mps.py:80] VLLM_CPU_KVCACHE_SPACE not set. Using 8.00 GiB for KV cache on MPS. Set VLLM_CPU_KVCACHE_SPACE (in GiB) to override.", "neither"},
		// A dispatcher with no graph keys, with and without a capture.
		{"vllm", "no cudagraph, no capture", "WARNING 09-21 21:43:43 [cudagraph_dispatcher.py:102] cudagraph dispatching keys are not initialized. No cudagraph will be used.", "slow"},
		{"vllm", "no cudagraph at a warm-up, then a capture", "WARNING 09-21 21:43:43 [cudagraph_dispatcher.py:102] cudagraph dispatching keys are not initialized. No cudagraph will be used.\nINFO 09-21 21:43:50 [gpu_model_runner.py:3468] Graph capturing finished in 38 secs, took 1.64 GiB", "fast"},
		{"vllm-ascend", "no cudagraph, no capture", "(Worker_TP0 pid=552) WARNING 10-28 21:14:10 [cudagraph_dispatcher.py:106] cudagraph dispatching keys are not initialized. No cudagraph will be used.", "slow"},
		// vllm-ascend.
		{"vllm-ascend", "ACL graphs", "INFO [__init__.py:216] Platform plugin ascend is activated\nINFO [model_runner_v1.py:4862] Graph capturing finished in 30 secs, took 0.52 GiB\nINFO [acl_graph.py:252] Replaying aclgraph", "fast"},
		{"vllm-ascend", "eager", "INFO [__init__.py:216] Platform plugin ascend is activated\nINFO [platform.py:969] Compilation disabled, using eager mode by default", "slow"},
		{"vllm-ascend", "graph mode refused", "INFO [platform.py:985] FULL cudagraph_mode is not support on NPU. falling back to NONE", "slow"},
		// OpenVINO Model Server.
		{"ovms", "NPU", "[serving][debug][server.cpp:139] target_device: NPU\n[modelmanager][info] Available devices for Open VINO: CPU, GPU, NPU\n[modelmanager][info] Initializing Language Model Legacy servable", "fast"},
		{"ovms", "the Legacy servable alone names no device", "[modelmanager][info] Available devices for Open VINO: CPU, GPU, NPU\n[modelmanager][info] Initializing Language Model Legacy servable", "neither"},
		{"ovms", "the Legacy servable on the CPU", "[serving][debug][server.cpp:139] target_device: CPU\n[modelmanager][info] Initializing Language Model Legacy servable", "slow"},
		{"ovms", "HETERO", "[serving][debug][server.cpp:139] target_device: HETERO:NPU,CPU", "slow"},
		{"ovms", "no device given", "[serving][info] No device specified, using recommended device: CPU\n[modelmanager][info] Initializing Language Model Continuous Batching servable", "slow"},
		// A model OVMS compiles itself (src/modelinstance.cpp).
		{"ovms", "a model given the NPU", "[serving][info][modelinstance.cpp:1019] Loading model: resnet, version: 1, from path: /models/resnet/1, with target device: NPU ...", "fast"},
		{"ovms", "a model given the CPU", "[serving][info][modelinstance.cpp:1019] Loading model: resnet, version: 1, from path: /models/resnet/1, with target device: CPU ...", "slow"},
		{"ovms", "a compiled model run on the NPU", "[modelmanager][debug][modelinstance.cpp:812] Model: resnet; version: 1; target device: NPU, CompiledModel config key: EXECUTION_DEVICES, value: NPU", "fast"},
		{"ovms", "a compiled model AUTO runs on the CPU", "[modelmanager][debug][modelinstance.cpp:812] Model: resnet; version: 1; target device: AUTO:NPU,CPU, CompiledModel config key: EXECUTION_DEVICES, value: CPU", "slow"},
		{"ovms", "an embedding model on the CPU beside an LLM given the NPU", "[serving][info][modelinstance.cpp:1019] Loading model: embed, version: 1, from path: /models/embed/1, with target device: CPU ...\n[serving][debug][server.cpp:139] target_device: NPU", "fast"},
		{"ovms", "a plugin's own configuration names no model's device", "[modelmanager][debug][ov_utils.hpp:91] OpenVINO Core plugin: CPU; plugin configuration: { AVAILABLE_DEVICES: , EXECUTION_DEVICES: CPU, FULL_DEVICE_NAME: Intel(R) Core(TM) Ultra 7 258V }", "neither"},
		{"ovms", "no NPU among OpenVINO's devices", "[2023-09-27 13:25:09.401][1][modelmanager][info][modelmanager.cpp:121] Available devices for Open VINO: CPU, GNA", "slow"},
		{"ovms", "the CPU alone", "[modelmanager][info][modelmanager.cpp:143] Available devices for Open VINO: CPU", "slow"},
		{"ovms", "two GPUs and the CPU", "[modelmanager][info] Available devices for Open VINO: CPU, GPU.0, GPU.1", "slow"},
		{"ovms", "the NPU among them", "[modelmanager][info] Available devices for Open VINO: CPU, GPU, NPU", "neither"},
		{"ovms", "a name it does not know", "[modelmanager][info] Available devices for Open VINO: CPU, VPUX", "neither"},
		// OVMS at DEBUG sets OPENVINO_LOG_LEVEL=4, and OpenVINO GenAI then
		// prints each compiled model's properties on stdout, its
		// EXECUTION_DEVICES on lines of their own: the continuous-batching
		// servable is named by its own line, and the tokenizer's CPU beside
		// the NPU given names nothing.
		{"ovms", "the continuous-batching servable, its devices printed after it", "[2025-08-06 11:20:23.102][225472][serving][info][servable_initializer.cpp:262] Initializing Language Model Continuous Batching servable\nModel: LLM with Paged Attention\nEXECUTION_DEVICES:\n CPU: Intel(R) Core(TM) Ultra 7 155H", "slow"},
		{"ovms", "the NPU given, the tokenizer's devices printed", "[2025-08-06 11:20:22.214][225472][serving][debug][server.cpp:120] target_device: NPU\nModel: OV Tokenizer\nEXECUTION_DEVICES:\n CPU: Intel(R) Core(TM) Ultra 7 155H", "fast"},
		// FastFlowLM: its validate line is red.
		{"flm", "a request on the NPU", "[FLM]  Loading model: qwen3:0.6b\n[🟢 ]  NPU Locked!", "fast"},
		{"flm", "no NPU", "[ERROR]  No NPU device found.", "slow"},
		{"flm", "the NPU runtime finds no device", "Error:  No such device with index '0'", "slow"},
		{"flm", "the model does not load on the NPU", "[FLM]  Loading model: D:\\flm\\Qwen3.5-9B-NPU2\n[ERROR]  Failed to load model: Failed to create context virtual (0xc01e0009): There was an error while creating context", "slow"},
		// Lemonade: its flm recipe, its Python server's CPU retry.
		{"lemonade", "its flm recipe ready", "2026-03-14 13:30:40.931 [Info] (FastFlowLM) Waiting for FastFlowLM to be ready...\n2026-03-14 13:30:43.932 [Info] (FastFlowLM) FastFlowLM is ready!", "fast"},
		{"lemonade", "its flm recipe, as it was named before", "[Info] (FastFlowLM) flm-server is ready!", "fast"},
		{"lemonade", "its flm recipe started, not yet ready", "2026-08-16 20:11:00.176 [Info] (FastFlowLM) Starting flm-server...", "neither"},
		{"lemonade", "flm validate failed", "[Error] (Server) Failed to load model: FLM NPU validation failed: No NPU device found.", "slow"},
		{"lemonade", "the GPU load failed, retried on the CPU", "WARNING:  Loading Qwen3-30B-A3B-GGUF on GPU didn't work, re-attempting on CPU", "slow"},
		{"lemonade", "the CPU llama-server's lines", "DEBUG:    LLAMA SERVER CPU: print_info: file format = GGUF V3 (latest)", "slow"},
		{"lemonade", "the GPU llama-server's lines", "DEBUG:    LLAMA SERVER GPU: srv  log_server_r: request: GET /health 127.0.0.1 503", "neither"},
		// Its router names the recipe and device of a load: an LLM on the
		// flm recipe is on the NPU (10.x at DEBUG, as lemonade-sdk/lemonade
		// #3167 shows it; 9.x on stdout).
		{"lemonade", "its router loads an LLM on the flm recipe", "2026-08-16 20:13:08.100 [Debug] (Router) Loading model: qwen3.5-9b-FLM (checkpoint: qwen3.5:9b, recipe: flm, type: llm, device: npu, residency: standard)", "fast"},
		{"lemonade", "its router as 9.x and 10.0 wrote it", "[Router] Loading model: Qwen3-0.6B-FLM (checkpoint: qwen3:0.6b, recipe: flm, type: llm, device: npu)", "fast"},
		{"lemonade", "its router loads an LLM on the llamacpp recipe", "[Debug] (Router) Loading model: Qwen3-0.6B-GGUF (checkpoint: unsloth/Qwen3-0.6B-GGUF:Q4_0, recipe: llamacpp, type: llm, device: gpu, residency: standard)", "neither"},
		{"lemonade", "an embedding model on the flm recipe is not the LLM", "[Debug] (Router) Loading model: embed-gemma-300m-FLM (checkpoint: embed-gemma:300m, recipe: flm, type: embedding, device: npu, residency: standard)", "neither"},
		{"lemonade", "a device list that is not the NPU alone", "[Debug] (Router) Loading model: x (checkpoint: y, recipe: flm, type: llm, device: cpu|npu, residency: standard)", "neither"},
		{"lemonade", "a device that only starts with npu", "[Debug] (Router) Loading model: x (checkpoint: y, recipe: flm, type: llm, device: npux)", "neither"},
		{"lemonade", "its llamacpp recipe on ROCm", "[Info] (Process) load_tensors: offloaded 41/41 layers to GPU\n[Info] (Process) load_tensors:        ROCm0 model buffer size = 36144.11 MiB", "fast"},
		// The reference serve: the note first.
		{"1bit", "all roles", "npu: ready on the private route dx (4 of 4 roles have a 16-row decode kernel)", "fast"},
		{"1bit", "some roles", "npu: ready on the private route dx (2 of 4 role(s) have a 16-row decode kernel)", "both"},
		{"1bit", "the per-op forward", "npu: no 16-row decode kernel for m; using the per-op forward", "slow"},
	}
	for _, tt := range tests {
		t.Run(tt.preset+"/"+tt.name, func(t *testing.T) {
			p := Presets[tt.preset]
			m, err := route.NewMatcher(p.FastRoute, p.SlowRoute)
			if err != nil {
				t.Fatal(err)
			}
			for l := range strings.SplitSeq(tt.log, "\n") {
				m.Line([]byte(l))
			}
			ev := m.Evidence()
			got := "neither"
			switch {
			case ev.Fast != nil && ev.Slow != nil:
				got = "both"
			case ev.Slow != nil:
				got = "slow"
			case ev.Fast != nil:
				got = "fast"
			}
			if got != tt.want {
				t.Errorf("preset %s on %q: route %s, want %s (fast %+v, slow %+v)", tt.preset, tt.log, got, tt.want, ev.Fast, ev.Slow)
			}
		})
	}
}

func TestRouteHint(t *testing.T) {
	tests := []struct {
		preset string
		argv   []string
		want   bool
	}{
		{"llama.cpp", []string{"llama-server", "-m", "m"}, true},
		{"", []string{"/opt/bin/llama-server", "-m", "m"}, true},
		{"", []string{"env", "X=1", "llama-server"}, true},
		{"llama.cpp", []string{"llama-server", "-lv", "4"}, false},
		{"llama.cpp", []string{"llama-server", "--verbosity=4"}, false},
		{"", []string{"llama-server", "-v"}, false},
		{"vllm", []string{"vllm", "serve"}, false},
		{"", []string{"fakellm"}, false},
	}
	for _, tt := range tests {
		if got := routeHint(tt.preset, tt.argv); (got != "") != tt.want || tt.want && !strings.Contains(got, "add -lv 4 to --serve") {
			t.Errorf("routeHint(%q, %q) = %q, want a hint %v", tt.preset, tt.argv, got, tt.want)
		}
	}
}

func TestDeviceChoice(t *testing.T) {
	for argv, want := range map[string]string{
		"ovms --target_device AUTO":           "AUTO",
		"ovms --target_device=AUTO:NPU,CPU":   "AUTO:NPU,CPU",
		"ovms --target_device hetero:NPU,CPU": "hetero:NPU,CPU",
		"ovms --target_device NPU":            "",
		"ovms --target_device":                "",
		"ovms --source_model AUTO":            "",
	} {
		if got := deviceChoice(strings.Fields(argv)); got != want {
			t.Errorf("deviceChoice(%q) = %q, want %q", argv, got, want)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"65536": 65536, "64KiB": 64 << 10, "64k": 64 << 10, "64MiB": 64 << 20, "1 GiB": 1 << 30, "2G": 2 << 30, "10B": 10} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "-1", "1.5MiB", "64TB", "9999999999G"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q): no error", in)
		}
	}
}

// A plan is not a placement: Ollama's scheduler plan for every layer on a
// GPU, alone, names neither route, and the detail says it is only a plan;
// a plan for fewer layers, or on the CPU, is the slow route.
func TestPlansAreNotPlacements(t *testing.T) {
	tests := []struct {
		name, log string
		slow      bool
	}{
		{"v0.6.5, every layer", `time=2025-08-06T09:33:13.534+02:00 level=INFO source=server.go:175 msg=offload library=cuda layers.requested=-1 layers.model=25 layers.offload=25 layers.split=""`, false},
		{"before v0.5.8, every layer", `time=2024-11-09T18:51:20.000+08:00 level=INFO source=memory.go:346 msg="offload to cuda" layers.requested=-1 layers.model=29 layers.offload=29 layers.split=""`, false},
		{"v0.6.5, some layers", `level=INFO source=server.go:130 msg=offload library=cuda layers.requested=-1 layers.model=81 layers.offload=44 layers.split=11,11,11,11`, true},
		{"before v0.5.8, no layer", `level=INFO source=memory.go:346 msg="offload to cuda" layers.requested=-1 layers.model=29 layers.offload=0 layers.split=""`, true},
		{"a plan on the CPU", `level=INFO source=memory.go:346 msg="offload to cpu" layers.requested=-1 layers.model=29 layers.offload=0 layers.split=""`, true},
	}
	p := Presets["ollama"]
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := route.NewMatcher(p.FastRoute, p.SlowRoute)
			if err != nil {
				t.Fatal(err)
			}
			m.Line([]byte(tt.log))
			ev := m.Evidence()
			v := route.Judge(ev)
			if v.OK || ev.Fast != nil || (ev.Slow != nil) != tt.slow {
				t.Fatalf("plan %q: ok %v, fast %+v, slow %+v; want never the fast route, the slow route %v", tt.log, v.OK, ev.Fast, ev.Slow, tt.slow)
			}
			if !tt.slow && (!strings.HasPrefix(v.Detail, `only a plan: "`+tt.log[:40]) || !strings.Contains(v.Detail, `" (line 1): `) || !strings.Contains(v.Detail, " planned, not where the weights went; the serve log names neither route")) {
				t.Errorf("plan alone: detail %q, want it to start: only a plan: the line quoted, N of N planned", v.Detail)
			}
		})
	}
}
