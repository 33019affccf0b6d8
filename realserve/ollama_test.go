package realserve

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ollama/ollama/api"
)

// OllamaVersion is the Ollama these tests were checked against: its log
// lines, its API and the tiny model's keys.
const OllamaVersion = "v0.12.11"

// skipVar set to "skip" skips the real-serve tests; nothing else does.
const skipVar = "NPU_SERVE_SMOKE_REALSERVE"

// install says how to get the Ollama these tests need.
const install = "build it with .ci/ollama (after .ci/tools --ci, which installs the C++ headers it needs; it runs go install github.com/ollama/ollama@" +
	OllamaVersion + ": minutes the first time, seconds after) and put $(go env GOPATH)/bin on PATH, or set " +
	skipVar + "=skip to skip these tests"

// modelName is the tiny model's name in Ollama.
const modelName = "tiny"

// chatTemplate is the tiny model's chat template, in Ollama's template
// language: each message as "role: content", then "assistant:".
const chatTemplate = "{{- range .Messages }}{{ .Role }}: {{ .Content }}\n{{ end }}assistant:"

// findOllama returns the path of the Ollama binary on PATH, checked to be
// OllamaVersion by the module version Go stamped into it.
func findOllama() (string, error) {
	path, err := exec.LookPath("ollama")
	if err != nil {
		return "", fmt.Errorf("ollama is not on PATH: %s", install)
	}
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: no Go build information (%v): these tests need ollama %s built from its Go module: %s", path, err, OllamaVersion, install)
	}
	if info.Main.Path != "github.com/ollama/ollama" || info.Main.Version != OllamaVersion {
		return "", fmt.Errorf("%s is %s %s; these tests were checked against github.com/ollama/ollama %s: %s",
			path, info.Main.Path, info.Main.Version, OllamaVersion, install)
	}
	return path, nil
}

// ollamaEnv is the environment of an Ollama serve of the tests: its models
// and its home (where it keeps its key) in the test's directory.
func ollamaEnv(dir string) []string {
	return append(os.Environ(), "OLLAMA_MODELS="+filepath.Join(dir, "models"), "HOME="+filepath.Join(dir, "home"))
}

// ollamaServe is an `ollama serve` the tests started themselves (to create
// the model and to ask Ollama for its own figures), in its own process group.
type ollamaServe struct {
	cmd    *exec.Cmd
	base   *url.URL
	client *api.Client
	log    string
	done   chan struct{}
}

// startOllama starts `ollama serve` on a free port and waits until it answers.
func startOllama(ollama, dir, logName string) (*ollamaServe, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, logName)
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(ollama, "serve")
	cmd.Env = append(ollamaEnv(dir), "OLLAMA_HOST=127.0.0.1:"+strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &ollamaServe{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { cmd.Wait(); close(s.done) }()
	base := &url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(port)}
	s.base = base
	s.client = api.NewClient(base, &http.Client{Timeout: 2 * time.Minute})
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := s.client.Heartbeat(ctx)
		cancel()
		if err == nil {
			return s, nil
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("ollama serve exited before it answered (%v); its log: %s", cmd.ProcessState, tail(logPath))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("ollama serve did not answer on %s within a minute (%v); its log: %s", base, err, tail(logPath))
		}
	}
}

// stop stops the serve and its runners: TERM to the group, then KILL.
func (s *ollamaServe) stop() {
	pgid := s.cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
	<-s.done
}

// createModel puts the GGUF file into Ollama as name, with the chat
// template, through its API: the file as a blob, then a model from it.
// The model decodes on one thread: ggml's threads meet at a barrier after
// every operation, and a model this small has hundreds of tiny ones a token,
// so on a loaded machine two threads decode at a few tokens a second where
// one decodes at a thousand.
func (s *ollamaServe) createModel(name, gguf string) error {
	b, err := os.ReadFile(gguf)
	if err != nil {
		return err
	}
	digest := fmt.Sprintf("sha256:%x", sha256.Sum256(b))
	ctx := context.Background()
	if err := s.client.CreateBlob(ctx, digest, bytes.NewReader(b)); err != nil {
		return fmt.Errorf("ollama: uploading %s: %w", gguf, err)
	}
	stream := false
	req := &api.CreateRequest{Model: name, Files: map[string]string{filepath.Base(gguf): digest},
		Template: chatTemplate, Parameters: map[string]any{"num_thread": 1}, Stream: &stream}
	if err := s.client.Create(ctx, req, func(api.ProgressResponse) error { return nil }); err != nil {
		return fmt.Errorf("ollama: creating %s from %s: %w; its log: %s", name, gguf, err, tail(s.log))
	}
	return nil
}

// ownFigures are Ollama's figures for one reply from its native /api/chat,
// beside the times this client saw its chunks arrive.
type ownFigures struct {
	api.Metrics
	Chunks        int     // chunks with content
	FirstMS       float64 // first content chunk after the request was sent
	ClientRate    float64 // (chunks-1)/(last-first), from arrivals
	Content       string
	DoneReason    string
	RequestedMaxN int
}

// Rate is Ollama's own decode rate as it prints it: eval_count/eval_duration.
func (f ownFigures) Rate() float64 {
	return float64(f.EvalCount) / f.EvalDuration.Seconds()
}

// RateNMinus1 is Ollama's figures on the gate's definition, (n-1)/span:
// eval_duration runs from the first token's sampling to the last token, n-1
// decode steps (runner/llamarunner/runner.go sets startGenerationTime when
// numDecoded is 1).
func (f ownFigures) RateNMinus1() float64 {
	return float64(f.EvalCount-1) / f.EvalDuration.Seconds()
}

// chat asks prompt on Ollama's native API the way the gate asks on the
// OpenAI-compatible one: temperature 0, maxTokens tokens, streamed.
func (s *ollamaServe) chat(prompt string, maxTokens int) (ownFigures, error) {
	stream := true
	req := &api.ChatRequest{Model: modelName, Stream: &stream,
		Messages: []api.Message{{Role: "user", Content: prompt}},
		Options:  map[string]any{"temperature": 0, "num_predict": maxTokens}}
	f := ownFigures{RequestedMaxN: maxTokens}
	var content strings.Builder
	var first, last time.Time
	t0 := time.Now()
	err := s.client.Chat(context.Background(), req, func(r api.ChatResponse) error {
		now := time.Now()
		if r.Message.Content != "" {
			if f.Chunks == 0 {
				first = now
			}
			last = now
			f.Chunks++
			content.WriteString(r.Message.Content)
		}
		if r.Done {
			f.Metrics = r.Metrics
			f.DoneReason = r.DoneReason
		}
		return nil
	})
	if err != nil {
		return f, fmt.Errorf("ollama /api/chat: %w", err)
	}
	f.Content = content.String()
	if f.Chunks == 0 || f.EvalCount == 0 || f.EvalDuration <= 0 {
		return f, fmt.Errorf("ollama /api/chat gave no figures: %d chunks, eval_count %d, eval_duration %v", f.Chunks, f.EvalCount, f.EvalDuration)
	}
	f.FirstMS = ms(first.Sub(t0))
	if f.Chunks > 1 {
		f.ClientRate = float64(f.Chunks-1) / last.Sub(first).Seconds()
	}
	return f, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// freePort is a port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// portFree reports whether a listener can take port on 127.0.0.1 now.
func portFree(port int) error {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return err
	}
	return l.Close()
}

// leftBehind lists the processes still running whose command line or
// environment names dir: an Ollama serve or runner of these tests.
func leftBehind(dir string) []string {
	entries, _ := os.ReadDir("/proc")
	var left []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue // gone, or not ours to read
		}
		environ, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if !bytes.Contains(cmdline, []byte(dir)) && !bytes.Contains(environ, []byte(dir)) {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && zombie(stat) {
			continue // exited; its parent has yet to reap it
		}
		left = append(left, fmt.Sprintf("pid %d: %s", pid, strings.Join(strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"), " ")))
	}
	return left
}

// zombie reads the state field of /proc/PID/stat (after the command's
// closing parenthesis).
func zombie(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// tail is the end of a log file, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return "\n\t" + strings.Join(lines, "\n\t")
}
