package witness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge"
)

// Accounts a serve gives of its own placement.
const (
	AccountOllama = "ollama" // GET /api/ps: size_vram against size
)

// MaxAccount is how much of a serve's account is read.
const MaxAccount = 1 << 20

// AccountWait bounds the request for the account.
const AccountWait = 10 * time.Second

// Ask asks the serve at base (http://127.0.0.1:PORT) for its own account
// of kind, about model. The answer is the serve's word, untrusted: read
// within MaxAccount, and one that cannot be read names no route and says
// why.
func Ask(ctx context.Context, client *http.Client, base, kind, model string) *judge.Account {
	switch kind {
	case AccountOllama:
		return ollamaPS(ctx, client, base, model)
	}
	return nil
}

// ollamaPS reads Ollama's /api/ps (server/routes.go PsHandler; api/types.go
// ProcessModelResponse, v0.12.11): each loaded model's size and size_vram,
// the bytes of it in device memory. All of it there is the fast route's
// placement, part or none of it the slow route's.
func ollamaPS(ctx context.Context, client *http.Client, base, model string) *judge.Account {
	a := &judge.Account{Source: "GET /api/ps"}
	ctx, cancel := context.WithTimeout(ctx, AccountWait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/ps", nil)
	if err != nil {
		a.Why = "not read: " + err.Error()
		return a
	}
	resp, err := client.Do(req)
	if err != nil {
		a.Why = "not read: " + err.Error()
		return a
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, MaxAccount))
	if resp.StatusCode != http.StatusOK {
		a.Why = fmt.Sprintf("not read: HTTP %d", resp.StatusCode)
		a.Text = string(b[:min(len(b), 200)])
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
		a.Route, a.Why = judge.RouteSlow, "none of the model in device memory"
	case m.SizeVRAM >= m.Size:
		a.Route, a.Why = judge.RouteFast, "all of the model in device memory"
	default:
		a.Route, a.Why = judge.RouteSlow, fmt.Sprintf("part of the model in device memory (%.0f%%)", 100*float64(m.SizeVRAM)/float64(m.Size))
	}
	return a
}
