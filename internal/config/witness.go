package config

import (
	"errors"
	"slices"
)

// Witnesses are what a preset's fast route shows in the serve's own
// processes (internal/witness): the device nodes they hold open, the
// backend libraries they map. Binary says the route is the device or
// nothing, so the device's use while decoding names the fast route where
// the log is silent. docs/presets.md#witnesses says why each.
type Witnesses struct {
	Devices   []string // globs of device node paths
	Libraries []string // globs of library file names
	Binary    bool
	// SlowOnDevice says why the serve's slow route holds all of the
	// weights on the same device as its fast route, so that the device's
	// memory names no fast route (route.Witness.SlowOnDevice).
	SlowOnDevice string
	// Account names the serve's own account of its placement, read after
	// the warm-up (witness.AccountOllama, witness.AccountVLLM); "" for none.
	Account string
}

// Device nodes of each kind of device, from each driver's own names.
var (
	nvidiaNodes = []string{"/dev/nvidia[0-9]*"}  // NVIDIA's driver: one node a GPU (nvidiactl and nvidia-uvm are not GPUs)
	amdNodes    = []string{"/dev/kfd"}           // ROCm's compute queues (amdkfd)
	renderNodes = []string{"/dev/dri/renderD*"}  // a DRM render node: Vulkan, SYCL/Level Zero, Metal's absent on Linux
	accelNodes  = []string{"/dev/accel/accel*"}  // the kernel's compute accelerator nodes (amdxdna, ivpu, habanalabs, qaic)
	ascendNodes = []string{"/dev/davinci[0-9]*"} // Ascend's driver: one node a chip (davinci_manager is not one)
	gpuNodes    = slices.Concat(nvidiaNodes, amdNodes, renderNodes, accelNodes, ascendNodes)
)

// llama.cpp's device backends as libraries (ggml/src/ggml-*/CMakeLists.txt:
// ggml_add_backend_library names them libggml-<name>.so), and the vendors'
// runtimes a build linked statically still maps.
var llamaBackends = []string{
	"libggml-cuda*.so*", "libggml-hip*.so*", "libggml-vulkan*.so*", "libggml-sycl*.so*", "libggml-cann*.so*",
	"libggml-musa*.so*", "libggml-opencl*.so*", "libggml-metal*.so*", "libggml-openvino*.so*",
	"libcuda.so*", "libamdhip64.so*", "libascendcl.so*",
}

// vllmEager is why vLLM's device memory names no fast route: its slow
// route is eager mode, on the same device, every weight there (and its
// worker takes gpu_memory_utilization of the device at start, whatever
// the mode: docs/presets.md#device-memory-against-the-models-weights).
const vllmEager = "vLLM's slow route, eager mode, runs on the same device with all of its weights there"

// PresetWitnesses are the presets' witnesses, by preset name. A preset
// not here has none known: its route is not witnessed, and says so.
var PresetWitnesses = map[string]Witnesses{
	"llama.cpp": {Devices: gpuNodes, Libraries: llamaBackends},
	"lemonade":  {Devices: gpuNodes, Libraries: slices.Concat(llamaBackends, []string{"libxrt_coreutil.so*"})},
	"ollama":    {Devices: gpuNodes, Libraries: llamaBackends, Account: "ollama"},
	// vLLM on CUDA: torch's CUDA runtime over the NVIDIA driver.
	// Its /metrics says where vLLM's CPU platform runs it
	// (witness.AccountVLLM).
	// Its slow route, eager mode, holds the weights on the same GPU.
	"vllm": {Devices: nvidiaNodes, Libraries: []string{"libcuda.so*"}, Account: "vllm", SlowOnDevice: vllmEager},
	// vllm-ascend: torch_npu over CANN's runtime.
	"vllm-ascend": {Devices: ascendNodes, Libraries: []string{"libascendcl.so*"}, SlowOnDevice: vllmEager},
	// OVMS told --target_device NPU: OpenVINO's NPU plugin over the ivpu
	// driver's node; on the NPU or on nothing.
	"ovms": {Devices: accelNodes, Libraries: []string{"libopenvino_intel_npu_plugin.so*"}, Binary: true},
	// FastFlowLM: XRT over amdxdna's node; it has no CPU path.
	"flm": {Devices: accelNodes, Libraries: []string{"libxrt_coreutil.so*"}, Binary: true},
}

// applyWitnesses sets the preset's witnesses, except where set reports
// that the user set that flag.
func (c *Config) applyWitnesses(set func(flag string) bool) {
	w := PresetWitnesses[c.Preset]
	if !set("witness-device") {
		c.WitnessDevices = slices.Clone(w.Devices)
	}
	if !set("witness-library") {
		c.WitnessLibraries = slices.Clone(w.Libraries)
	}
	c.WitnessBinary, c.WitnessAccount, c.WitnessSlowOnDevice = w.Binary, w.Account, w.SlowOnDevice
}

// CheckWitness checks --witness and the witness classes, every problem at
// once (publish and report take them too).
func (c Config) CheckWitness() error {
	return errors.Join(c.checkWitness()...)
}
