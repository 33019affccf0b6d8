package witness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
)

// Accounts a serve gives of its own placement.
const (
	AccountOllama = "ollama" // GET /api/ps: size_vram against size
	AccountVLLM   = "vllm"   // GET /metrics: vllm:cache_config_info's cpu_kvcache_space_bytes
)

// MaxAccount is how much of a serve's account is read.
const MaxAccount = 1 << 20

// AccountWait bounds the request for the account.
const AccountWait = 10 * time.Second

// Ask asks the serve at base (http://127.0.0.1:PORT) for its own account
// of kind, about model. The answer is the serve's word, untrusted: read
// within MaxAccount, and one that cannot be read names no route and says
// why.
func Ask(ctx context.Context, client *http.Client, base, kind, model string) *route.Account {
	switch kind {
	case AccountOllama:
		return ollamaPS(ctx, client, base, model)
	case AccountVLLM:
		return vllmMetrics(ctx, client, base)
	}
	return nil
}

// ollamaPS reads Ollama's /api/ps (server/routes.go PsHandler; api/types.go
// ProcessModelResponse, v0.12.11): each loaded model's size and size_vram,
// the bytes of it in device memory. All of it there is the fast route's
// placement, part or none of it the slow route's.
func ollamaPS(ctx context.Context, client *http.Client, base, model string) *route.Account {
	a := &route.Account{Source: "GET /api/ps"}
	b, ok := get(ctx, client, base+"/api/ps", a)
	if !ok {
		return a
	}
	var ps struct {
		Models []struct {
			Name     string `json:"name"`
			Model    string `json:"model"`
			Size     int64  `json:"size"`
			SizeVRAM int64  `json:"size_vram"`
		} `json:"models"`
	}
	if err := json.Unmarshal(b, &ps); err != nil {
		a.Why = "not read: " + err.Error()
		a.Text = string(b[:min(len(b), 200)])
		return a
	}
	idx := -1
	for i, m := range ps.Models {
		if m.Name == model || m.Model == model || strings.TrimSuffix(m.Name, ":latest") == model {
			idx = i
			break
		}
	}
	if idx < 0 && len(ps.Models) == 1 {
		idx = 0
	}
	if idx < 0 {
		a.Why = fmt.Sprintf("names no loaded model %q (%d loaded)", model, len(ps.Models))
		return a
	}
	m := ps.Models[idx]
	a.Text = fmt.Sprintf("%s: size %d, size_vram %d", m.Name, m.Size, m.SizeVRAM)
	switch {
	case m.Size <= 0 || m.SizeVRAM < 0:
		a.Why = "sizes that say nothing"
	case m.SizeVRAM == 0:
		a.Route, a.Why = route.RouteSlow, "none of the model in device memory"
	case m.SizeVRAM >= m.Size:
		a.Route, a.Why = route.RouteFast, "all of the model in device memory"
	default:
		a.Route, a.Why = route.RouteSlow, fmt.Sprintf("part of the model in device memory (%.0f%%)", 100*float64(m.SizeVRAM)/float64(m.Size))
	}
	return a
}

// get asks for url, and reads at most MaxAccount of the answer; false,
// with a.Why (and the start of an answer in a.Text) set, when it cannot.
func get(ctx context.Context, client *http.Client, url string, a *route.Account) ([]byte, bool) {
	ctx, cancel := context.WithTimeout(ctx, AccountWait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		a.Why = "not read: " + err.Error()
		return nil, false
	}
	resp, err := client.Do(req)
	if err != nil {
		a.Why = "not read: " + err.Error()
		return nil, false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, MaxAccount))
	if resp.StatusCode != http.StatusOK {
		a.Why = fmt.Sprintf("not read: HTTP %d", resp.StatusCode)
		a.Text = string(b[:min(len(b), 200)])
		return nil, false
	}
	return b, true
}

// vllmCPULabel is the label of vllm:cache_config_info that vLLM's CPU
// platform alone fills.
const vllmCPULabel = "cpu_kvcache_space_bytes"

// vllmMetrics reads vLLM's /metrics for the one thing in it that tells
// the platform. vllm:cache_config_info is a gauge whose labels are every
// field of the engine's CacheConfig (CacheConfig.metrics_info,
// vllm/config/cache.py; PrometheusStatLogger.log_metrics_info,
// vllm/v1/metrics/loggers.py). Its field cpu_kvcache_space_bytes, "(CPU
// backend only) CPU key-value cache space", is set by the CPU platform's
// check_and_update_config (vllm/platforms/cpu.py) and by nothing else
// (vllm-ascend resets it to None): a number there is vLLM on the CPU
// platform, the slow route. "None" says nothing of the route (on a GPU,
// eager mode or CUDA graphs is the log's to tell), and a vLLM whose
// CacheConfig has no such field (newer versions) says nothing at all.
// Nothing in the answer ever names the fast route.
func vllmMetrics(ctx context.Context, client *http.Client, base string) *route.Account {
	a := &route.Account{Source: "GET /metrics"}
	b, ok := get(ctx, client, base+"/metrics", a)
	if !ok {
		return a
	}
	var labels string
	found := false
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "vllm:cache_config_info{"); ok {
			labels, found = rest, true
			break
		}
	}
	if !found {
		a.Why = "not read: no vllm:cache_config_info in its metrics"
		return a
	}
	val, ok := promLabel(labels, vllmCPULabel)
	if !ok {
		a.Why = "names no platform: vllm:cache_config_info has no " + vllmCPULabel + " label (this vLLM's CacheConfig has no such field)"
		return a
	}
	a.Text = fmt.Sprintf("vllm:cache_config_info{%s=%q}", vllmCPULabel, val[:min(len(val), 100)])
	n, err := strconv.ParseInt(val, 10, 64)
	if err == nil && n > 0 {
		a.Route, a.Why = route.RouteSlow, "vLLM's CPU platform: it alone sets the CPU KV cache space"
		return a
	}
	a.Why = "names no platform: " + vllmCPULabel + " is set by vLLM's CPU platform alone, and is not set here"
	return a
}

// promLabel is the value of label name in a Prometheus sample's label set
// (the text after "{"): name="value", with \\, \" and \n escaped.
func promLabel(labels, name string) (string, bool) {
	for labels != "" && labels[0] != '}' {
		key, rest, ok := strings.Cut(labels, "=\"")
		if !ok {
			return "", false
		}
		key = strings.TrimLeft(key, ", ")
		var val strings.Builder
		i := 0
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' && i+1 < len(rest) {
				i++
				if rest[i] == 'n' {
					val.WriteByte('\n')
					continue
				}
			}
			val.WriteByte(rest[i])
		}
		if i == len(rest) {
			return "", false
		}
		if key == name {
			return val.String(), true
		}
		labels = rest[i+1:]
	}
	return "", false
}
