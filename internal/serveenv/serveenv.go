// Package serveenv builds the environment a serve starts with: the names
// of an allow-list taken from the gate's own environment, and what the
// person running the gate gives it by name (--serve-env NAME=VALUE,
// --serve-env-pass NAME). Nothing else reaches the serve: inside a GitHub
// Actions step the gate's environment holds the token (INPUT_GITHUB-TOKEN,
// GITHUB_TOKEN), the runtime's and OIDC's request tokens (ACTIONS_*), the
// runner's file commands (GITHUB_OUTPUT, GITHUB_ENV, GITHUB_PATH,
// GITHUB_STATE, GITHUB_STEP_SUMMARY) and the gate's inputs; a serve that
// had them could write the step's outputs, the job's environment and the
// summary, and post a check run of its own.
package serveenv

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Names are the variables a serve gets from the gate's environment
// unasked, by their whole name: the process's own (where it runs, who
// for, its language and time zone, its terminal), the dynamic linker's
// search path, the proxies a download of weights goes through, and the Go
// runtime's settings (a serve written in Go, such as Ollama, reads them).
var Names = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "PWD", "HOSTNAME",
	"LANG", "LANGUAGE", "TZ", "TERM", "TMPDIR",
	"XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR",
	"LD_LIBRARY_PATH",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
	"GOMAXPROCS", "GOGC", "GOMEMLIMIT", "GODEBUG", "GOTRACEBACK", "GORACE",
}

// Prefixes are the families of variables a serve gets unasked: the
// locale's, and those of the device runtimes and serves the gate knows
// (docs/presets.md), which say which devices a serve sees, where its
// runtime and its models are, and how it logs.
var Prefixes = []string{
	"LC_",
	"CUDA_", "NVIDIA_", // CUDA: CUDA_VISIBLE_DEVICES, ...
	"HIP_", "ROCR_", "HSA_", "ROCM_", // ROCm
	"ASCEND_", "ACL_", // CANN: ASCEND_RT_VISIBLE_DEVICES, ASCEND_HOME_PATH, ...
	"ZE_", "ONEAPI_", "SYCL_", // oneAPI, Level Zero: ZE_AFFINITY_MASK, ONEAPI_DEVICE_SELECTOR
	"OV_", "OPENVINO_", // OpenVINO and its model server
	"GGML_", "LLAMA_", // llama.cpp
	"VLLM_", // vLLM and vLLM Ascend
	"OLLAMA_", "FLM_", "LEMONADE_", "RKLLM_",
	"HF_", "HUGGINGFACE_", "TRANSFORMERS_", // models' caches and hub
	"OMP_", "KMP_", "MKL_", "OPENBLAS_", // CPU threads
}

// fileCommands are the runner's file commands: a process that may write
// them sets the step's outputs, the job's environment and PATH, the
// action's state and the job's summary.
var fileCommands = []string{"GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_PATH", "GITHUB_STATE", "GITHUB_STEP_SUMMARY"}

// Refused says why name can never be given to a serve, or "": a token or
// the gate's input (INPUT_*, GITHUB_TOKEN, ACTIONS_*: the runtime's,
// the cache's and the OIDC request's tokens and addresses) or one of the
// runner's file commands.
func Refused(name string) string {
	switch {
	case slices.ContainsFunc(fileCommands, same(name)):
		return "a file command of the runner: a serve that has it writes the step's outputs, the job's environment or its summary"
	case sameName(name, "GITHUB_TOKEN"), hasPrefix(name, "INPUT_"), hasPrefix(name, "ACTIONS_"):
		return "a secret of the step (the token, the gate's inputs, the runtime's and OIDC's request tokens): a serve that has it can post check runs and comments"
	}
	return ""
}

// Allowed reports whether name passes to a serve unasked.
func Allowed(name string) bool {
	if Refused(name) != "" {
		return false
	}
	if slices.ContainsFunc(Names, same(name)) || slices.ContainsFunc(osNames, same(name)) {
		return true
	}
	for _, p := range Prefixes {
		if hasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Check says what is wrong with set (NAME=VALUE each, given by the flag
// setFlag) and pass (NAME each, by passFlag), all at once, or nil. A
// value is never shown: it may be a secret.
func Check(set, pass []string, setFlag, passFlag string) error {
	var errs []string
	for _, kv := range set {
		name, _, ok := strings.Cut(kv, "=")
		switch {
		case !ok:
			shown := "a value" // it may be a secret given by mistake
			if validName(kv) {
				shown = strconv.Quote(kv)
			}
			errs = append(errs, fmt.Sprintf("%s %s: not NAME=VALUE; give a variable as %s NAME=VALUE, or pass one of this environment as %s NAME", setFlag, shown, setFlag, passFlag))
			continue
		case !validName(name):
			errs = append(errs, fmt.Sprintf("%s %q=...: not a variable's name (letters, digits, _ and -, not first a digit)", setFlag, name))
			continue
		}
		if why := Refused(name); why != "" {
			errs = append(errs, fmt.Sprintf("%s %s=...: %s; it is never given to the serve (give the serve what it needs under a name of its own)", setFlag, name, why))
		}
	}
	for _, name := range pass {
		if !validName(name) {
			errs = append(errs, fmt.Sprintf("%s %q: not a variable's name (letters, digits, _ and -, not first a digit); pass one name a flag", passFlag, name))
			continue
		}
		if why := Refused(name); why != "" {
			errs = append(errs, fmt.Sprintf("%s %s: %s; it is never given to the serve", passFlag, name, why))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return nil
}

// Build is the serve's environment: from environ (NAME=VALUE each, the
// gate's own) the names Allowed and those in pass that are set, then set,
// then extra (the device ticket's NPU_HOLD_DEVICES and the vendor's
// variable); a later NAME replaces an earlier one. A name Refused is left
// out wherever it comes from: Check has refused it as input before.
func Build(environ, set, pass, extra []string) []string {
	var env []string
	add := func(kv string) {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" || Refused(name) != "" {
			return
		}
		env = slices.DeleteFunc(env, func(e string) bool { n, _, _ := strings.Cut(e, "="); return sameName(n, name) })
		env = append(env, kv)
	}
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if Allowed(name) || slices.ContainsFunc(pass, same(name)) {
			add(kv)
		}
	}
	for _, kv := range set {
		add(kv)
	}
	for _, kv := range extra {
		add(kv)
	}
	if env == nil {
		env = []string{}
	}
	return env
}

// validName reports whether name can be a variable's name: letters,
// digits, _ and - (the runner's inputs hold hyphens), not first a digit.
func validName(name string) bool {
	if name == "" || name[0] >= '0' && name[0] <= '9' {
		return false
	}
	for _, c := range name {
		if !(c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// same is sameName of name, for slices' functions.
func same(name string) func(string) bool {
	return func(n string) bool { return sameName(n, name) }
}

// Lookup is the value of name in environ (NAME=VALUE each), the last one
// given, as the process reading environ would see it.
func Lookup(environ []string, name string) (string, bool) {
	var v string
	found := false
	for _, kv := range environ {
		if n, value, ok := strings.Cut(kv, "="); ok && n != "" && sameName(n, name) {
			v, found = value, true
		}
	}
	return v, found
}
