package stats

import (
	"fmt"
	"math"
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

// Close says whether the figures leave the median close to the limit: its
// interval (MedianInterval's, at Level, or [min, max] for five figures or
// fewer) holds the limit, that is, k figures or more lie on each side of
// it, k = IntervalK (a figure at the limit on the meeting side). A lead
// that decided can be close: the count says when to stop, this how far the
// median is from the limit.
func (c Count) Close() bool {
	return min(c.Meet, c.Miss) >= IntervalK(c.Meet+c.Miss, Level)
}

// CountOf counts the figures that meet, at lead.
func CountOf(xs []float64, meets func(float64) bool, lead int) Count {
	meet := 0
	for _, v := range xs {
		if meets(v) {
			meet++
		}
	}
	return NewCount(meet, len(xs)-meet, lead)
}

// Text is a count as the rate's and first token's details end, what the
// figure is held against (the floor, the limit): the signs, the lead and
// the likelihood ratio against 1/Alpha. "Close to" the floor (or limit)
// leads whenever the median's interval holds it (Close), decided or not;
// when the lead did not decide, the median decides. "Undecided" when too
// few replies were asked for any count to reach the lead (--replies 1
// --max-replies 1, or judge DIR at a larger --lead), which says nothing of
// how close the serve is.
func (c Count) Text(what string) string {
	d := c.Meet - c.Miss
	side := "meeting"
	if d < 0 {
		side = "missing"
	}
	lead := max(d, -d)
	ratio := fmt.Sprintf("likelihood ratio %s against 1/alpha = %.0f", ratioText(d), 1/Alpha)
	n := c.Meet + c.Miss
	close := fmt.Sprintf("close to %s: %d meet it, %d miss it", what, c.Meet, c.Miss)
	if c.Decided {
		if c.Close() {
			return fmt.Sprintf("%s, the median's interval holds it (%d or more on each side of %d replies); decided all the same, a lead of %d for %s it, --lead %d (%s)",
				close, IntervalK(n, Level), n, lead, side, c.Lead, ratio)
		}
		return fmt.Sprintf("signs: %d meet %s, %d miss it: decided, a lead of %d for %s it, --lead %d (%s)", c.Meet, what, c.Miss, lead, side, c.Lead, ratio)
	}
	if n < c.Lead {
		// No count of n replies reaches the lead: the replies say nothing
		// of how close the serve is.
		return fmt.Sprintf("undecided: %d meet %s, %d miss it, too few replies (%d) to reach --lead %d (%s): the median decides", c.Meet, what, c.Miss, n, c.Lead, ratio)
	}
	if !c.Close() {
		return fmt.Sprintf("signs: %d meet %s, %d miss it, a lead of %d, short of --lead %d (%s), clear of it all the same (the median's interval does not hold it): the median decides",
			c.Meet, what, c.Miss, lead, c.Lead, ratio)
	}
	return fmt.Sprintf("%s, a lead of %d, short of --lead %d (%s): the median decides", close, lead, c.Lead, ratio)
}
