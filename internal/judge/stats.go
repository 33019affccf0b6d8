package judge

import (
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

// Figures are the rate and first-token figures of the replies that have
// them, as the rate assertion judges them.
func Figures(replies []measure.Reply, l Limits) (rates, firstMS []float64, complete bool) {
	complete = true
	for i := range replies {
		r := &replies[i]
		if v, why := l.RateOf(r); why != "" {
			complete = false
		} else {
			rates = append(rates, v)
		}
		if ft, ok := r.FirstTokenMS(); ok {
			firstMS = append(firstMS, ft)
		} else {
			complete = false
		}
	}
	return rates, firstMS, complete
}
