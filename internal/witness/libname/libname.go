// Package libname matches a loaded file's name against the globs of a fast
// route's backend libraries (config.PresetWitnesses), on either OS: the
// globs name the Linux files (libggml-cuda*.so*), and each has the name
// the same library has on Windows (ggml-cuda*.dll), read in the library's
// own source.
package libname

import (
	"path"
	"strings"
)

// Windows are the Windows names of the backend libraries, by the glob of
// their Linux names. A glob without one names no Windows file.
var Windows = map[string][]string{
	// llama.cpp's device backends: ggml_backend_load_best looks for
	// [lib]ggml-NAME-*.[so|dll], "ggml-" and ".dll" on Windows
	// (backend_filename_prefix, backend_filename_extension;
	// ollama/ollama@03372ee067227062f61baee8bad120d404dc15a1:ml/backend/ggml/ggml/src/ggml-backend-reg.cpp,
	// the copy of ggml Ollama's runner loads from lib/ollama).
	"libggml-cuda*.so*":     {"ggml-cuda*.dll"},
	"libggml-hip*.so*":      {"ggml-hip*.dll"},
	"libggml-vulkan*.so*":   {"ggml-vulkan*.dll"},
	"libggml-sycl*.so*":     {"ggml-sycl*.dll"},
	"libggml-cann*.so*":     {"ggml-cann*.dll"},
	"libggml-musa*.so*":     {"ggml-musa*.dll"},
	"libggml-opencl*.so*":   {"ggml-opencl*.dll"},
	"libggml-metal*.so*":    {"ggml-metal*.dll"},
	"libggml-openvino*.so*": {"ggml-openvino*.dll"},
	// NVIDIA's driver API, libcuda's Windows name: the display driver
	// installs nvcuda.dll ("The artifact will only depend on KERNEL32.DLL
	// and NVCUDA.DLL. NVCUDA DLLs are provided by the installation of the
	// windows GPU driver",
	// Mozilla-Ocho/llamafile@b79ecf465befa8018e3331720372917454097a90:llamafile/cuda.bat).
	"libcuda.so*": {"nvcuda.dll"},
	// XRT's core library, over AMD's NPU driver: XRT names it
	// xrt_coreutil.dll on Windows and libxrt_coreutil.so.2 elsewhere
	// (XBRACER_XRT_COREUTIL_LIB,
	// Xilinx/XRT@dfb7ba6e91cf9bdded5c3808cbdfcd758603bbb7:src/runtime_src/core/tools/xbtracer/src/common/trace_utils.h).
	// FastFlowLM, and Lemonade's FastFlowLM recipe, reach the NPU through
	// it.
	"libxrt_coreutil.so*": {"xrt_coreutil.dll"},
	// OpenVINO's NPU plugin: the CMake target openvino_intel_npu_plugin
	// (NPU_PLUGIN_TARGET,
	// openvinotoolkit/openvino@009ff27ea18b0514acdfe4c3b74fb0991f6647f8:src/plugins/intel_npu/src/plugin/CMakeLists.txt),
	// which CMake names without "lib" and with ".dll" on Windows.
	"libopenvino_intel_npu_plugin.so*": {"openvino_intel_npu_plugin.dll"},
}

// Base is the file name at the end of a path of either OS: what follows
// its last "/" or "\".
func Base(file string) string {
	if i := strings.LastIndexAny(file, `/\`); i >= 0 {
		return file[i+1:]
	}
	return file
}

// Match reports whether file (a path) is named by one of globs: its name
// matches a glob (path.Match), or is a Windows file (".dll") whose name
// matches, whatever the case (Windows names files so), a glob naming a
// ".dll" or the Windows name of a glob (Windows).
func Match(globs []string, file string) bool {
	base := Base(file)
	for _, g := range globs {
		if ok, _ := path.Match(g, base); ok {
			return true
		}
	}
	lower := strings.ToLower(base)
	if !strings.HasSuffix(lower, ".dll") {
		return false
	}
	for _, g := range globs {
		for _, w := range append([]string{g}, Windows[g]...) {
			if ok, _ := path.Match(strings.ToLower(w), lower); ok {
				return true
			}
		}
	}
	return false
}

// Of is the Windows names of globs, each glob's in turn (those with none
// left out, globs naming a ".dll" kept): what a Windows reader looks for.
func Of(globs []string) []string {
	var out []string
	for _, g := range globs {
		if strings.HasSuffix(strings.ToLower(g), ".dll") {
			out = append(out, g)
		}
		out = append(out, Windows[g]...)
	}
	return out
}
