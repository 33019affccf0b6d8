package judge

import (
	"fmt"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/stats"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

// Signs are the rate's and the first token's counts, and with a baseline
// their counts against its bounds.
type Signs struct {
	Rate       stats.Count    `json:"rate"`
	FirstToken stats.Count    `json:"first_token"`
	Baseline   *BaselineSigns `json:"baseline,omitempty"`
}

// SignsOf counts the replies' signs at lead: a rate meets the floor when it
// is at least the floor, a first token meets the limit when it is at most
// the limit, as the medians are judged. complete is false when a reply has
// no rate or no first token.
func SignsOf(replies []measure.Reply, l Limits, lead int) (s Signs, complete bool) {
	rates, firstMS, complete := Figures(replies, l)
	return signsOf(rates, firstMS, l, lead), complete
}

func signsOf(rates, firstMS []float64, l Limits, lead int) Signs {
	return Signs{
		Rate:       stats.CountOf(rates, func(v float64) bool { return v >= l.Floor }, lead),
		FirstToken: stats.CountOf(firstMS, func(v float64) bool { return v <= l.FirstTokenMS }, lead),
	}
}

// Rule is when the gate stops asking: once both counts lead by Lead, and
// with a baseline its two counts as well, and never before Min replies nor
// after Max.
type Rule struct {
	Lead int // --lead
	Min  int // --replies
	Max  int // --max-replies, at least Min
	// Baseline adds the counts against the baseline's bounds (--baseline),
	// at the change Limits allow: the gate asks on until they decide too.
	Baseline *Baseline
}

// Stop says whether the gate stops after the replies so far, and when it
// does not, why not. A reply that failed settles the run (it fails whatever
// comes next), once Min replies are asked. A count that decided for
// meeting its limit does not stop the gate while its figure drifts toward
// the limit by Max (drift): the gate asks on to see where the serve
// settles.
func (r Rule) Stop(replies []measure.Reply, l Limits) (stop bool, why string) {
	n := len(replies)
	if n >= r.Max {
		return true, ""
	}
	if n < r.Min {
		return false, fmt.Sprintf("--replies %d", r.Min)
	}
	rates, firstMS, complete := Figures(replies, l)
	if !complete {
		return true, ""
	}
	if name, against, c, ok := r.undecided(rates, firstMS, l); !ok {
		return false, fmt.Sprintf("%s, %d meet %s and %d miss it, lead by less than %d", name, c.Meet, against, c.Miss, r.Lead)
	}
	// A lead for meeting a limit while the figure drifts toward it is the
	// first replies' only: ask on to see where the serve settles.
	s := signsOf(rates, firstMS, l, r.Lead)
	if d, ok := rateDrift(rates, l.Floor, r.Max); ok && s.Rate.Meet > s.Rate.Miss {
		return false, d.Text(rates) + ": asking on to see where it settles"
	}
	if d, ok := firstTokenDrift(firstMS, l.FirstTokenMS, r.Max); ok && s.FirstToken.Meet > s.FirstToken.Miss {
		return false, d.Text(firstMS) + ": asking on to see where it settles"
	}
	return true, ""
}

// undecided is the first of the rule's counts on the figures that has not
// decided, named, with what its figures are held against; ok when all
// have.
func (r Rule) undecided(rates, firstMS []float64, l Limits) (name, against string, c stats.Count, ok bool) {
	s := signsOf(rates, firstMS, l, r.Lead)
	if !s.Rate.Decided {
		return "the rate's signs", "the floor", s.Rate, false
	}
	if !s.FirstToken.Decided {
		return "the first token's signs", "the limit", s.FirstToken, false
	}
	if r.Baseline == nil || r.Baseline.TooFew() {
		// A baseline of too few replies is not judged (TooFew): its counts
		// decide nothing.
		return "", "", stats.Count{}, true
	}
	b := baselineSigns(rates, firstMS, *r.Baseline, l.Regression(), r.Lead)
	if !b.Rate.Decided {
		return "the rate's signs against the baseline", "its bound", b.Rate, false
	}
	if !b.FirstToken.Decided {
		return "the first token's signs against the baseline", "its bound", b.FirstToken, false
	}
	return "", "", stats.Count{}, true
}

// Drifts says how the rate and the first token drift toward their limits
// after the replies, looked at reply at, or "" when neither does.
func Drifts(replies []measure.Reply, l Limits, at int) string {
	rates, firstMS, _ := Figures(replies, l)
	var says []string
	if d, ok := rateDrift(rates, l.Floor, at); ok {
		says = append(says, d.Text(rates))
	}
	if d, ok := firstTokenDrift(firstMS, l.FirstTokenMS, at); ok {
		says = append(says, d.Text(firstMS))
	}
	return strings.Join(says, "; ")
}

// Stops is the rule on one count: whether it stops after meet replies that
// meet the floor and miss that miss it.
func (r Rule) Stops(meet, miss int) bool {
	n := meet + miss
	return n >= r.Max || n >= r.Min && stats.NewCount(meet, miss, r.Lead).Decided
}

// Legacy is the rule the gate had before, on one count: Min replies, then
// more while the median's order-statistic interval at stats.Level holds the floor,
// up to Max. On signs the interval [x(k), x(n-k+1)] holds the floor while k
// replies or more lie on each side of it. It is kept to compare the rules.
type Legacy struct {
	Min, Max int
}

// Stops is the legacy rule on one count, as Rule.Stops.
func (r Legacy) Stops(meet, miss int) bool {
	n := meet + miss
	return n >= r.Max || n >= r.Min && min(meet, miss) < stats.IntervalK(n, stats.Level)
}

// Stopper is a stopping rule on one sign count.
type Stopper interface {
	Stops(meet, miss int) bool
}

// Operating is what a rule that stops by Max replies at the latest does with
// a serve whose replies each meet the floor with chance p, exactly: the
// chance the median passes (more replies meet the floor than miss it), the
// chance of a tie (an even number of replies split evenly, which the signs
// cannot settle), and the expected number of replies. It is dynamic
// programming over the signs: live[m] is the chance that after n replies m
// met the floor and the rule had not stopped.
func Operating(s Stopper, max int, p float64) (pass, tie, replies float64) {
	live := []float64{1}
	for n := 0; n <= max; n++ {
		next := make([]float64, n+2)
		for m, q := range live {
			if n == max || s.Stops(m, n-m) {
				replies += q * float64(n)
				if 2*m > n {
					pass += q
				}
				if 2*m == n {
					tie += q
				}
				continue
			}
			// A miss joins the meet from m-1 already in next[m]; a meet
			// is the first to reach m+1.
			next[m] += q * (1 - p)
			next[m+1] = q * p
		}
		live = next
	}
	return pass, tie, replies
}
