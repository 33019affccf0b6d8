package report

import "github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"

// Figures are what the gate derived from one reply's evidence, as result.json
// shows them: the rate and how it was estimated, the serve's own on the same
// definition, the token count believed, the prompt cache. They are computed
// again from the reply files by `judge`; the reply files are the evidence.
type Figures struct {
	N      int              `json:"n"`
	Rate   measure.Estimate `json:"rate"`
	Server measure.Estimate `json:"server_rate"`
	Tokens measure.Count    `json:"tokens"`
	// Disagreement is |stream - serve| / serve, when both rates are there.
	Disagreement *float64       `json:"disagreement,omitempty"`
	Cache        *measure.Cache `json:"cache,omitempty"`
	Retried      bool           `json:"retried,omitempty"`
}

// FiguresOf derives the figures of each reply.
func FiguresOf(replies []measure.Reply) []Figures {
	var fs []Figures
	for i := range replies {
		r := &replies[i]
		f := Figures{N: r.N, Rate: r.Estimate(), Server: r.ServerEstimate(), Tokens: r.Count(), Retried: r.Retried != ""}
		if d, ok := r.Disagreement(); ok {
			f.Disagreement = &d
		}
		if c, ok := r.Cache(); ok {
			f.Cache = &c
		}
		fs = append(fs, f)
	}
	return fs
}
