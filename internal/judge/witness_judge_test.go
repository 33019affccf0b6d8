package judge

import (
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/route"
)

// TestJudgeWeighsWitness: Judge takes the witness from its input.
func TestJudgeWeighsWitness(t *testing.T) {
	in := Input{Route: route.Evidence{Fast: &route.Match{Line: 1, Text: fastLine}}, Replies: replies([]float64{90, 90, 90}, []float64{200, 200, 200}), Limits: limits}
	if v := Judge(in); !v.Pass {
		t.Fatalf("Judge without a witness = %+v, want a pass", v)
	}
	in.Witness = &route.Witness{Devices: []string{"/dev/accel/accel*"}, Libraries: []string{"libggml-cann*.so*"}, Processes: 2}
	v := Judge(in)
	if v.Pass || v.Assertions[0].OK {
		t.Errorf("Judge with a witness of no device = %+v, want the route failed", v)
	}
}
