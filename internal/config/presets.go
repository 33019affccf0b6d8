package config

import (
	"fmt"
	"slices"
	"strings"
)

// Preset is what one kind of serve needs: where it answers, how thinking is
// turned off, where its own figures are, and the log lines that name its
// route. A preset sets only what the user did not set.
type Preset struct {
	Health          string
	ChatPath        string
	ThinkingControl string
	StatsPath       string
	FastRoute       []string
	SlowRoute       []string
}

// Ways of turning thinking off.
const (
	ThinkingKwargs = "chat-template-kwargs" // chat_template_kwargs.enable_thinking (llama.cpp --jinja, vLLM, Qwen3 templates)
	ThinkingEffort = "reasoning-effort"     // reasoning_effort: "none" (Ollama's OpenAI-compatible API)
	ThinkingBoth   = "both"
)

// llama.cpp prints "load_tensors: offloaded N/M layers to GPU" when it loads
// a model (src/llama-model.cpp); none offloaded is the CPU route.
var (
	llamaFast = []string{`offloaded [1-9][0-9]*/[0-9]+ layers to GPU`}
	llamaSlow = []string{`offloaded 0/[0-9]+ layers to GPU`}
)

// Presets by name. Sources are named in the README.
var Presets = map[string]Preset{
	"llama.cpp": {Health: "/health", ChatPath: "/v1/chat/completions", ThinkingControl: ThinkingKwargs,
		FastRoute: llamaFast, SlowRoute: llamaSlow},
	// vLLM names the attention backend it picked at start ("Using
	// FLASH_ATTN backend."); TORCH_SDPA and CPU_ATTN are its CPU backends.
	"vllm": {Health: "/health", ChatPath: "/v1/chat/completions", ThinkingControl: ThinkingKwargs,
		FastRoute: []string{`Using (FLASH_ATTN|FLASHINFER|FLASH_ATTN_MLA|FLASHMLA|TRITON_ATTN|TRITON_MLA|ROCM_ATTN|ROCM_AITER_FA|ROCM_AITER_MLA|PALLAS)( attention)? backend`},
		SlowRoute: []string{`Using (TORCH_SDPA|CPU_ATTN)( attention)? backend`}},
	// Lemonade serves everything under /api/v1 too, and its own figures of
	// the last request at /api/v1/stats.
	"lemonade": {Health: "/api/v1/health", ChatPath: "/api/v1/chat/completions", ThinkingControl: ThinkingKwargs,
		StatsPath: "/api/v1/stats", FastRoute: llamaFast, SlowRoute: llamaSlow},
	// Ollama answers "Ollama is running" on /, and turns thinking off in its
	// OpenAI-compatible API with reasoning_effort "none"; its log carries
	// llama.cpp's load lines.
	"ollama": {Health: "/", ChatPath: "/v1/chat/completions", ThinkingControl: ThinkingEffort,
		FastRoute: llamaFast, SlowRoute: llamaSlow},
	// The reference serve: the gate's own defaults.
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
	return nil
}
