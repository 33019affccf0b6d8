package witness

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
)

func TestOllamaPS(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   route.Account
	}{
		{"all on the device", 200, `{"models":[{"name":"other:latest","size":5,"size_vram":5},{"name":"tiny:latest","model":"tiny:latest","size":1000,"size_vram":1000}]}`,
			route.Account{Source: "GET /api/ps", Text: "tiny:latest: size 1000, size_vram 1000", Route: route.RouteFast, Why: "all of the model in device memory"}},
		{"none on the device", 200, `{"models":[{"name":"x","size":1000,"size_vram":0}]}`,
			route.Account{Source: "GET /api/ps", Text: "x: size 1000, size_vram 0", Route: route.RouteSlow, Why: "none of the model in device memory"}},
		{"part on the device", 200, `{"models":[{"name":"tiny","size":1000,"size_vram":250}]}`,
			route.Account{Source: "GET /api/ps", Text: "tiny: size 1000, size_vram 250", Route: route.RouteSlow, Why: "part of the model in device memory (25%)"}},
		{"sizes that say nothing", 200, `{"models":[{"name":"tiny","size":0,"size_vram":0}]}`,
			route.Account{Source: "GET /api/ps", Text: "tiny: size 0, size_vram 0", Why: "sizes that say nothing"}},
		{"no such model among two", 200, `{"models":[{"name":"a","size":1,"size_vram":1},{"name":"b","size":1,"size_vram":1}]}`,
			route.Account{Source: "GET /api/ps", Why: `names no loaded model "tiny" (2 loaded)`}},
		{"not JSON", 200, `<html>`, route.Account{Source: "GET /api/ps", Text: "<html>", Why: "not read: invalid character '<' looking for beginning of value"}},
		{"an error", 404, `404 page not found`, route.Account{Source: "GET /api/ps", Text: "404 page not found", Why: "not read: HTTP 404"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/api/ps" {
					t.Errorf("asked %s", r.URL.Path)
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			got := Ask(context.Background(), srv.Client(), srv.URL, AccountOllama, "tiny")
			if diff := cmp.Diff(&tc.want, got); diff != "" {
				t.Errorf("Ask (-want +got):\n%s", diff)
			}
		})
	}
	if got := Ask(context.Background(), http.DefaultClient, "http://127.0.0.1:1", "", "tiny"); got != nil {
		t.Errorf("Ask of a serve with no account = %v, want nil", got)
	}
}

// vllmInfo is vLLM's cache_config_info as prometheus_client writes it: a
// gauge set to 1 whose labels are CacheConfig's fields
// (CacheConfig.metrics_info, vllm/config/cache.py), cpu_kvcache_space_bytes
// among them in the versions that have the field.
func vllmInfo(cpu string) string {
	return `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny"} 0.0
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",calculate_kv_scales="False",` + cpu + `enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.9",is_attention_free="False",kv_sharing_fast_prefill="False",mamba_cache_dtype="auto",num_cpu_blocks="None",num_gpu_blocks="2048",prefix_caching_hash_algo="sha256",sliding_window="None",swap_space="4.0"} 1.0
`
}

func TestVLLMMetrics(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   route.Account
	}{
		{"the CPU platform", 200, vllmInfo(`cpu_kvcache_space_bytes="4294967296",`), route.Account{Source: "GET /metrics",
			Text: `vllm:cache_config_info{cpu_kvcache_space_bytes="4294967296"}`, Route: route.RouteSlow, Why: "vLLM's CPU platform: it alone sets the CPU KV cache space"}},
		{"another platform", 200, vllmInfo(`cpu_kvcache_space_bytes="None",`), route.Account{Source: "GET /metrics",
			Text: `vllm:cache_config_info{cpu_kvcache_space_bytes="None"}`, Why: "names no platform: cpu_kvcache_space_bytes is set by vLLM's CPU platform alone, and is not set here"}},
		{"a zero", 200, vllmInfo(`cpu_kvcache_space_bytes="0",`), route.Account{Source: "GET /metrics",
			Text: `vllm:cache_config_info{cpu_kvcache_space_bytes="0"}`, Why: "names no platform: cpu_kvcache_space_bytes is set by vLLM's CPU platform alone, and is not set here"}},
		{"a version without the field", 200, vllmInfo(""), route.Account{Source: "GET /metrics",
			Why: "names no platform: vllm:cache_config_info has no cpu_kvcache_space_bytes label (this vLLM's CacheConfig has no such field)"}},
		{"a label whose value hides another", 200, vllmInfo(`x="a\",cpu_kvcache_space_bytes=\"5\\\\",`), route.Account{Source: "GET /metrics",
			Why: "names no platform: vllm:cache_config_info has no cpu_kvcache_space_bytes label (this vLLM's CacheConfig has no such field)"}},
		{"a value cut short", 200, `vllm:cache_config_info{cpu_kvcache_space_bytes="123`, route.Account{Source: "GET /metrics",
			Why: "names no platform: vllm:cache_config_info has no cpu_kvcache_space_bytes label (this vLLM's CacheConfig has no such field)"}},
		{"no info", 200, "# HELP x\nx 1\n", route.Account{Source: "GET /metrics", Why: "not read: no vllm:cache_config_info in its metrics"}},
		{"no metrics", 404, `{"detail":"Not Found"}`, route.Account{Source: "GET /metrics", Text: `{"detail":"Not Found"}`, Why: "not read: HTTP 404"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/metrics" {
					t.Errorf("asked %s", r.URL.Path)
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			got := Ask(context.Background(), srv.Client(), srv.URL, AccountVLLM, "tiny")
			if diff := cmp.Diff(&tc.want, got); diff != "" {
				t.Errorf("Ask (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPromLabel(t *testing.T) {
	for labels, want := range map[string]string{
		`a="1",b="x\"y\\z\nw"} 1`: "x\"y\\z\nw",
		`b="2"} 1`:                "2",
		`a="1", b="3"}`:           "3",
	} {
		if got, ok := promLabel(labels, "b"); !ok || got != want {
			t.Errorf("promLabel(%q) = %q, %v; want %q", labels, got, ok, want)
		}
	}
	for _, labels := range []string{`a="1"} 1`, `b`, `b=1`, `}`, ``} {
		if got, ok := promLabel(labels, "b"); ok {
			t.Errorf("promLabel(%q) = %q, want none", labels, got)
		}
	}
}
