package judge

import (
	"fmt"
	"math"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

// The sequential rule decides when the gate stops asking. Whether the median
// rate meets the floor depends, whatever the distribution of the rates, on
// one number only: p, the chance that a reply meets it. Each reply is a sign
// (it meets the floor or it does not), and the rule is Wald's sequential
// probability ratio test on the signs, p = ZoneLow against p = ZoneHigh.
// Each reply that meets the floor multiplies the likelihood ratio by
// ZoneHigh/ZoneLow = 3, and each that misses it divides it by
// (1-ZoneLow)/(1-ZoneHigh) = 3, so after any replies the ratio is
// 3^(meet-miss): the test stops when one side leads the other by Lead. The
// first token is counted the same way against its limit, on its own count.
//
// The ratio is a martingale under p = ZoneLow, so by Ville's inequality it
// ever reaches 1/Alpha with a chance of at most Alpha, whatever the stopping:
// the bound holds though the gate looks after every reply.
const (
	ZoneLow  = 0.25
	ZoneHigh = 0.75
	// Alpha is the error the rule aims at on the zone's edges.
	Alpha = 0.05
)

// DefaultLead is the least lead whose likelihood ratio reaches 1/Alpha:
// 3^3 = 27 ≥ 20.
const DefaultLead = 3

// Count is one sign count: how many replies meet the floor (or the
// first-token limit) and how many miss it, and whether the lead decides.
type Count struct {
	Meet int `json:"meet"`
	Miss int `json:"miss"`
	// Lead is the lead that decides (--lead).
	Lead int `json:"lead"`
	// Ratio is the likelihood ratio for the side ahead, 3^|meet-miss|, to
	// hold against 1/Alpha.
	Ratio   float64 `json:"likelihood_ratio"`
	Decided bool    `json:"decided"`
}

// NewCount is the count of meet and miss, decided at lead.
func NewCount(meet, miss, lead int) Count {
	d := meet - miss
	return Count{Meet: meet, Miss: miss, Lead: lead, Ratio: Ratio(d), Decided: d >= lead || -d >= lead}
}

// Ratio is the likelihood ratio of a lead of d, for the side ahead. From a
// lead of 647 on, 3^d is beyond a float64: it is the largest float64
// instead, so result.json (which holds no infinity) can still be written.
func Ratio(d int) float64 {
	r := math.Pow(ZoneHigh/ZoneLow, math.Abs(float64(d)))
	if math.IsInf(r, 1) {
		return math.MaxFloat64
	}
	return r
}

// ratioText is the likelihood ratio of a lead of d as the details say it:
// exact up to a lead of 30 (3^30 is 15 digits), then its power of ten.
func ratioText(d int) string {
	d = max(d, -d)
	if d > 30 {
		return fmt.Sprintf("3^%d ≈ 10^%.0f", d, float64(d)*math.Log10(ZoneHigh/ZoneLow))
	}
	return fmt.Sprintf("3^%d = %.0f", d, Ratio(d))
}

// Signs are the rate's and the first token's counts.
type Signs struct {
	Rate       Count `json:"rate"`
	FirstToken Count `json:"first_token"`
}

// SignsOf counts the replies' signs at lead: a rate meets the floor when it
// is at least the floor, a first token meets the limit when it is at most
// the limit, as the medians are judged. complete is false when a reply has
// no rate or no first token.
func SignsOf(replies []measure.Reply, l Limits, lead int) (s Signs, complete bool) {
	rates, firstMS, complete := Figures(replies, l)
	s.Rate = countOf(rates, func(v float64) bool { return v >= l.Floor }, lead)
	s.FirstToken = countOf(firstMS, func(v float64) bool { return v <= l.FirstTokenMS }, lead)
	return s, complete
}

// countOf counts the figures that meet, at lead.
func countOf(xs []float64, meets func(float64) bool, lead int) Count {
	meet := 0
	for _, v := range xs {
		if meets(v) {
			meet++
		}
	}
	return NewCount(meet, len(xs)-meet, lead)
}

// signsText is a count as the rate's and first token's details end:
// the signs, the lead and the likelihood ratio against 1/Alpha, or "close
// to" the floor (or limit) when the lead did not decide, and the median
// then decides; "undecided" when too few replies were asked for any count to
// reach the lead (--replies 1 --max-replies 1, or judge DIR at a larger
// --lead), which says nothing of how close the serve is.
func signsText(c Count, what string) string {
	d := c.Meet - c.Miss
	side := "meeting"
	if d < 0 {
		side = "missing"
	}
	ratio := fmt.Sprintf("likelihood ratio %s against 1/alpha = %.0f", ratioText(d), 1/Alpha)
	if c.Decided {
		return fmt.Sprintf("signs: %d meet %s, %d miss it: decided, a lead of %d for %s it, --lead %d (%s)", c.Meet, what, c.Miss, max(d, -d), side, c.Lead, ratio)
	}
	if n := c.Meet + c.Miss; n < c.Lead {
		// No count of n replies reaches the lead: the replies say nothing
		// of how close the serve is.
		return fmt.Sprintf("undecided: %d meet %s, %d miss it, too few replies (%d) to reach --lead %d (%s): the median decides", c.Meet, what, c.Miss, n, c.Lead, ratio)
	}
	return fmt.Sprintf("close to %s: %d meet it, %d miss it, a lead of %d, short of --lead %d (%s): the median decides", what, c.Meet, c.Miss, max(d, -d), c.Lead, ratio)
}

// Rule is when the gate stops asking: once both counts lead by Lead, and
// never before Min replies nor after Max.
type Rule struct {
	Lead int // --lead
	Min  int // --replies
	Max  int // --max-replies, at least Min
}

// Stop says whether the gate stops after the replies so far, and when it
// does not, why not. A reply that failed settles the run (it fails whatever
// comes next), once Min replies are asked.
func (r Rule) Stop(replies []measure.Reply, l Limits) (stop bool, why string) {
	n := len(replies)
	if n >= r.Max {
		return true, ""
	}
	if n < r.Min {
		return false, fmt.Sprintf("--replies %d", r.Min)
	}
	s, complete := SignsOf(replies, l, r.Lead)
	if !complete {
		return true, ""
	}
	if !s.Rate.Decided {
		return false, fmt.Sprintf("the rate's signs, %d meet the floor and %d miss it, lead by less than %d", s.Rate.Meet, s.Rate.Miss, r.Lead)
	}
	if !s.FirstToken.Decided {
		return false, fmt.Sprintf("the first token's signs, %d meet the limit and %d miss it, lead by less than %d", s.FirstToken.Meet, s.FirstToken.Miss, r.Lead)
	}
	return true, ""
}

// Stops is the rule on one count: whether it stops after meet replies that
// meet the floor and miss that miss it.
func (r Rule) Stops(meet, miss int) bool {
	n := meet + miss
	return n >= r.Max || n >= r.Min && NewCount(meet, miss, r.Lead).Decided
}

// Legacy is the rule the gate had before, on one count: Min replies, then
// more while the median's order-statistic interval at Level holds the floor,
// up to Max. On signs the interval [x(k), x(n-k+1)] holds the floor while k
// replies or more lie on each side of it. It is kept to compare the rules.
type Legacy struct {
	Min, Max int
}

// Stops is the legacy rule on one count, as Rule.Stops.
func (r Legacy) Stops(meet, miss int) bool {
	n := meet + miss
	return n >= r.Max || n >= r.Min && min(meet, miss) < intervalK(n, Level)
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
