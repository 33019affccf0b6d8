package libname

import (
	"slices"
	"testing"
)

func TestMatch(t *testing.T) {
	llama := []string{"libggml-cuda*.so*", "libggml-vulkan*.so*", "libcuda.so*"}
	for _, c := range []struct {
		globs []string
		file  string
		want  bool
	}{
		{llama, "/opt/llama/libggml-cuda.so", true},
		{llama, `C:\llama\ggml-cuda.dll`, true},
		{llama, `C:\Users\r\AppData\Local\Programs\Ollama\lib\ollama\cuda_v12\ggml-cuda.dll`, true},
		{llama, `C:\llama\GGML-VULKAN.DLL`, true},
		{llama, `C:\Windows\System32\nvcuda.dll`, true},
		{llama, `C:\llama\ggml-cpu-haswell.dll`, false},
		{llama, `C:\llama\libggml-cuda.so`, true}, // the Linux glob, whatever the separator
		{llama, `C:\llama\libggml-cuda.dll`, false},
		{llama, "/opt/llama/GGML-CUDA.DLL.txt", false},
		{llama, "/opt/llama/ggml-cuda.dll", true}, // a Windows file under Wine
		{[]string{"libxrt_coreutil.so*"}, `C:\Windows\System32\xrt_coreutil.dll`, true},
		{[]string{"libxrt_coreutil.so*"}, `C:\Windows\System32\xrt_core.dll`, false},
		{[]string{"libopenvino_intel_npu_plugin.so*"}, `C:\ovms\openvino_intel_npu_plugin.dll`, true},
		{[]string{"libopenvino_intel_npu_plugin.so*"}, `C:\ovms\openvino_intel_gpu_plugin.dll`, false},
		{[]string{"QnnHtp.dll"}, `C:\qnn\qnnhtp.DLL`, true},
		{[]string{"QnnHtp.dll"}, `/lib/qnnhtp.so`, false},
		{[]string{"libascendcl.so*"}, `C:\x\ascendcl.dll`, false}, // no Windows name known
		{nil, `C:\x\ggml-cuda.dll`, false},
	} {
		if got := Match(c.globs, c.file); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.globs, c.file, got, c.want)
		}
	}
}

func TestBaseOf(t *testing.T) {
	for in, want := range map[string]string{`C:\a\b.dll`: "b.dll", "/a/b.so": "b.so", "b": "b", `a/b\c`: "c", "": ""} {
		if got := Base(in); got != want {
			t.Errorf("Base(%q) = %q, want %q", in, got, want)
		}
	}
	got := Of([]string{"libggml-cuda*.so*", "libascendcl.so*", "Mine.DLL", "libcuda.so*"})
	if want := []string{"ggml-cuda*.dll", "Mine.DLL", "nvcuda.dll"}; !slices.Equal(got, want) {
		t.Errorf("Of = %q, want %q", got, want)
	}
}
