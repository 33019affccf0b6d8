package fakellm

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestOllamaPS: the ollama persona answers /api/ps with how much of the
// model is in device memory, by route; other personas have no such path.
func TestOllamaPS(t *testing.T) {
	for route, want := range map[string]int64{RouteFast: 1092312514, RoutePartial: 1092312514 * 20 / 29, RouteSlow: 0, RouteNeither: 0} {
		srv := httptest.NewServer(New(Options{Persona: PersonaOllama, Route: route, Model: "tiny"}))
		resp, err := http.Get(srv.URL + "/api/ps")
		if err != nil {
			t.Fatal(err)
		}
		var ps struct {
			Models []struct {
				Name     string `json:"name"`
				Size     int64  `json:"size"`
				SizeVRAM int64  `json:"size_vram"`
			} `json:"models"`
		}
		err = json.NewDecoder(resp.Body).Decode(&ps)
		resp.Body.Close()
		srv.Close()
		if err != nil || len(ps.Models) != 1 || ps.Models[0].Name != "tiny" || ps.Models[0].Size != 1092312514 || ps.Models[0].SizeVRAM != want {
			t.Errorf("route %s: /api/ps = %+v, %v; want tiny, size 1092312514, size_vram %d", route, ps, err, want)
		}
	}
	srv := httptest.NewServer(New(Options{Persona: PersonaLlamaCpp}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/ps")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("llama.cpp persona: /api/ps = HTTP %d, want 404", resp.StatusCode)
	}
}

// TestVLLMMetrics: the vllm persona answers /metrics with its
// cache_config_info, cpu_kvcache_space_bytes set only with --cpu-platform.
func TestVLLMMetrics(t *testing.T) {
	for cpu, want := range map[bool]string{false: `cpu_kvcache_space_bytes="None"`, true: `cpu_kvcache_space_bytes="4294967296"`} {
		srv := httptest.NewServer(New(Options{Persona: PersonaVLLM, CPUPlatform: cpu, Model: "tiny"}))
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		if !strings.Contains(string(b), "\nvllm:cache_config_info{") || !strings.Contains(string(b), want) {
			t.Errorf("cpu platform %v: /metrics = %s; want cache_config_info with %s", cpu, b, want)
		}
	}
	srv := httptest.NewServer(New(Options{Persona: PersonaOllama}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("ollama persona: /metrics = HTTP %d, want 404", resp.StatusCode)
	}
}
