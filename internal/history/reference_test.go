package history

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/fakegithub"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/report"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/wintest"
)

// recording is a result.json recorded by record for check: kind
// "reference", verdict pass, one reply.
func recording(check string) string {
	return `{"schema": "npu-serve-smoke/v1", "verdict": "pass",
  "run": {"model": "Qwen3-0.6B-f32", "check_name": "` + check + `", "thinking": "off", "max_tokens": 128, "kind": "reference"},
  "replies": [{"n": 1, "prompt": "p", "content": "x", "logprobs": "sent", "generated": [{"text": "x", "logprob": -0.1}]}]}`
}

func TestReferenceArtifact(t *testing.T) {
	if got, want := ReferenceArtifact(check), "npu-serve-smoke-Qwen3-0.6B-npu-reference"; got != want {
		t.Errorf("ReferenceArtifact(%q) = %q, want %q", check, got, want)
	}
}

// FindReference takes the newest run on the pattern whose reference artifact
// holds a recording that passed and that the caller's checks accept;
// newer ones that are not are skipped, each with why.
func TestFindReference(t *testing.T) {
	name := ReferenceArtifact(check)
	good := zipOf(t, entry{name: "result.json", body: recording(check)})
	bad := map[string]struct {
		zip  []byte
		want string
	}{
		"a gate's run": {zipOf(t, entry{name: "result.json", body: strings.Replace(recording(check), `, "kind": "reference"`, "", 1)}),
			`it is not a recorded reference (run.kind ""); a reference is recorded by npu-serve-smoke record`},
		"a recording that failed": {zipOf(t, entry{name: "result.json", body: strings.Replace(recording(check), `"verdict": "pass"`, `"verdict": "fail"`, 1)}),
			"its verdict is fail; a reference is a recording that passed"},
		"an odd verdict": {zipOf(t, entry{name: "result.json", body: strings.Replace(recording(check), `"verdict": "pass"`, `"verdict": "\u001b[2Jok"`, 1)}),
			`its verdict is "\x1b[2Jok"`},
		"another check": {zipOf(t, entry{name: "result.json", body: recording("npu serve smoke (Qwen3-0.6B, igpu)")}),
			`is a run of check "npu serve smoke (Qwen3-0.6B, igpu)"`},
		"the caller refuses it": {zipOf(t, entry{name: "result.json", body: strings.Replace(recording(check), `"max_tokens": 128`, `"max_tokens": 64`, 1)}),
			"asked with max_tokens 64"},
	}
	use := func(res *report.Result, from string) error {
		if res.Run.MaxTokens != 128 {
			return fmt.Errorf("asked with max_tokens %d", res.Run.MaxTokens)
		}
		return nil
	}
	for why, b := range bad {
		t.Run(why, func(t *testing.T) {
			gh, src, old := fixture(t, fakegithub.Artifact{Name: name, Zip: good})
			id := gh.AddRun(fakegithub.WorkflowRun{Workflow: ".github/workflows/release-gate-matrix.yml", HeadBranch: "release/1.9", Conclusion: "success"})
			gh.AddArtifact(fakegithub.Artifact{RunID: id, Name: name, Zip: b.zip})
			f, err := src.FindReference(context.Background(), name, wintest.TempDir(t), Want{CheckName: check, Thinking: "off"}, use)
			if err != nil || f.Run.ID != old || f.Result == nil || f.Result.Run.Kind != report.KindReference || len(f.Result.Replies) != 1 {
				t.Fatalf("FindReference() = %+v, %v; want run %d's recording", f, err, old)
			}
			if len(f.Skipped) != 1 || !strings.Contains(f.Skipped[0], fmt.Sprintf("run %d (", id)) || !strings.Contains(f.Skipped[0], b.want) {
				t.Errorf("FindReference() skipped %q, want one naming run %d and saying %q", f.Skipped, id, b.want)
			}
		})
	}
	t.Run("none", func(t *testing.T) {
		// release/1.2 holds a gate's run, release/1.1 no reference.
		_, src, _ := fixture(t, fakegithub.Artifact{Name: name, Zip: bad["a gate's run"].zip})
		f, err := src.FindReference(context.Background(), name, wintest.TempDir(t), Want{CheckName: check}, use)
		var nf *NotFound
		if !errors.As(err, &nf) || !strings.Contains(err.Error(), "none of the 2 newest successful runs of release-gate-matrix.yml on release/** holds a reference that can serve") || len(f.Skipped) != 2 {
			t.Errorf("FindReference() = %v, skipped %q; want not found after two skipped", err, f.Skipped)
		}
	})
	t.Run("only the reference artifact", func(t *testing.T) {
		// The run's gate artifact is a passing run: never a reference.
		_, src, _ := fixture(t, fakegithub.Artifact{Zip: zipOf(t, entry{name: "result.json", body: recording(check)})})
		f, err := src.FindReference(context.Background(), name, wintest.TempDir(t), Want{CheckName: check}, use)
		var nf *NotFound
		if !errors.As(err, &nf) || len(f.Skipped) != 2 || !strings.Contains(f.Skipped[0], "has no artifact "+name) {
			t.Errorf("FindReference() = %v, skipped %q; want not found, each run without the artifact %s", err, f.Skipped, name)
		}
	})
}
