package fleet

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseMatrix(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []Job
		err      string
	}{
		{
			name: "every combination",
			in:   `{"model": ["a", "b"], "device": ["npu", "igpu"]}`,
			want: []Job{{"device": "npu", "model": "a"}, {"device": "npu", "model": "b"}, {"device": "igpu", "model": "a"}, {"device": "igpu", "model": "b"}},
		},
		{
			name: "exclude, then include extends the jobs it does not change",
			in: `{"model": ["a", "b"], "device": ["npu", "igpu"], "exclude": [{"model": "b", "device": "igpu"}],
			      "include": [{"model": "b", "floor": 30}, {"path": "/m"}, {"model": "c", "device": "npu"}]}`,
			want: []Job{
				{"device": "npu", "model": "a", "path": "/m"},
				{"device": "npu", "model": "b", "floor": "30", "path": "/m"},
				{"device": "igpu", "model": "a", "path": "/m"},
				{"device": "npu", "model": "c"},
			},
		},
		{
			name: "include alone",
			in:   `{"include": [{"model": "a", "device": "npu", "preset": "llama.cpp", "first-token-ms": 900}]}`,
			want: []Job{{"model": "a", "device": "npu", "preset": "llama.cpp", "first-token-ms": "900"}},
		},
		{
			name: "a list of jobs",
			in:   `[{"model": "a", "device": "npu"}, {"model": "a", "device": "igpu"}]`,
			want: []Job{{"model": "a", "device": "npu"}, {"model": "a", "device": "igpu"}},
		},
		{name: "not JSON", in: `model: [a]`, err: "not a JSON matrix"},
		{name: "no job", in: `{}`, err: "the matrix has no job"},
		{name: "no device", in: `{"model": ["a"]}`, err: "has no model or no device"},
		{name: "a path for a model", in: `{"model": ["/m/a.gguf"], "device": ["npu"]}`, err: `model "/m/a.gguf": use letters, digits`},
		{name: "a double dash", in: `{"model": ["a--b"], "device": ["npu"]}`, err: `model "a--b"`},
		{name: "an unknown preset", in: `{"model": ["a"], "device": ["npu"], "preset": ["llamacpp"]}`, err: `preset "llamacpp": pass one of`},
		{name: "a bad floor", in: `{"model": ["a"], "device": ["npu"], "floor": [0]}`, err: `floor "0" of job (a, npu): pass a positive, finite number`},
		{name: "an infinite floor", in: `{"model": ["a"], "device": ["npu"], "floor": ["Inf"]}`, err: `floor "Inf" of job (a, npu): pass a positive, finite number`},
		{name: "an infinite first-token limit", in: `{"model": ["a"], "device": ["npu"], "first-token-ms": ["+Inf"]}`, err: `first-token-ms "+Inf" of job (a, npu): pass a positive, finite number`},
		{name: "a NaN floor", in: `{"model": ["a"], "device": ["npu"], "floor": ["NaN"]}`, err: `floor "NaN" of job (a, npu): pass a positive, finite number`},
		{name: "twice", in: `[{"model": "a", "device": "npu"}, {"model": "a", "device": "npu", "x": "1"}]`, err: "two jobs are (a, npu);"},
		// The artifact's name joins the names with '-', which they may hold.
		{name: "one artifact name for two jobs", in: `{"model": ["a-b", "a"], "device": ["npu", "b-npu"]}`,
			err: "the jobs (a-b, npu) and (a, b-npu) would upload one artifact (its name ends -a-b-npu:"},
		{name: "one artifact name, a preset", in: `[{"model": "a", "device": "npu-vllm"}, {"model": "a", "device": "npu", "preset": "vllm"}]`,
			err: "the jobs (a, npu-vllm) and (a, npu, vllm) would upload one artifact (its name ends -a-npu-vllm:"},
		{name: "not a list", in: `{"model": "a", "device": ["npu"]}`, err: `matrix key "model" is not a list`},
		{name: "an object value", in: `{"model": [{"x": 1}], "device": ["npu"]}`, err: `matrix key "model" holds`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseMatrix(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("ParseMatrix(%s) = %v, %v; want an error with %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseMatrix(%s) = %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseMatrix(%s) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestNames(t *testing.T) {
	for _, tc := range []struct {
		job             Job
		check, artifact string
	}{
		{Job{"model": "Qwen3-0.6B", "device": "npu"}, "npu serve smoke (Qwen3-0.6B, npu)", "npu-serve-smoke-Qwen3-0.6B-npu"},
		{Job{"model": "Qwen3-8B", "device": "npu0", "preset": "llama.cpp", "floor": "40"}, "npu serve smoke (Qwen3-8B, npu0, llama.cpp)", "npu-serve-smoke-Qwen3-8B-npu0-llama.cpp"},
	} {
		if got := tc.job.CheckName("npu serve smoke"); got != tc.check {
			t.Errorf("CheckName(%v) = %q, want %q", tc.job, got, tc.check)
		}
		if got := tc.job.Artifact("npu serve smoke"); got != tc.artifact {
			t.Errorf("Artifact(%v) = %q, want %q", tc.job, got, tc.artifact)
		}
	}
}

func TestParseExpect(t *testing.T) {
	got, err := ParseExpect("model=a, device=npu,floor=30")
	if want := (Job{"model": "a", "device": "npu", "floor": "30"}); err != nil || !cmp.Equal(got, want) {
		t.Errorf("ParseExpect() = %v, %v; want %v", got, err, want)
	}
	for _, in := range []string{"a,npu", "model=a", "model=a,device=npu,floor=x", "model=a,device=npu,floor=Inf"} {
		if _, err := ParseExpect(in); err == nil {
			t.Errorf("ParseExpect(%q) = nil error", in)
		}
	}
}
