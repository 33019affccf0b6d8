package judge

import (
	"fmt"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/judge/quote"
)

// Released is the assertion that the device was given back clean; it is
// there only when it was not.
const Released = "release"

// Release is how the device was given back at the end of a run.
type Release struct {
	// Survivors are the serve's processes still alive after its stop, and
	// Left what they were, "pid command".
	Survivors int
	Left      []string
	// Lost says why the device's ticket was not the run's own any more at
	// the end, or could not be checked; "" when it was.
	Lost string
	// Stopped is how many times the serve's supervisor, which stops the
	// serve's tree and holds the ticket for it, was found stopped (SIGSTOP)
	// at the serve's stop and had to be continued.
	Stopped int
}

// maxLeft is how many survivors the release detail names: serve.left is
// read back from result.json, which anyone may edit.
const maxLeft = 8

// judgeRelease is the release assertion, and false when the device was
// given back clean: no process of the serve's left, the ticket held to the
// end, the supervisor never stopped. Otherwise the device was not held
// alone for the whole run, or is not free of the serve now, and the figures
// of this run or of the next are not to be trusted.
func judgeRelease(r Release) (Assertion, bool) {
	var why []string
	if r.Survivors > 0 {
		var left []string
		for i, l := range r.Left {
			if i == maxLeft {
				left = append(left, fmt.Sprintf("%d more", len(r.Left)-maxLeft))
				break
			}
			left = append(left, quote.Cut(l, 100))
		}
		s := fmt.Sprintf("%d process(es) of the serve survived its stop", r.Survivors)
		if len(left) > 0 {
			s += " (" + strings.Join(left, ", ") + ")"
		}
		why = append(why, s+": the device is not free of this run, and the next run's figures on it are suspect")
	}
	if r.Lost != "" {
		why = append(why, "the gate could not confirm that it held the device's ticket to the end ("+quote.Cut(r.Lost, 300)+"): another run may have had the device while this one measured")
	}
	if r.Stopped > 0 {
		why = append(why, fmt.Sprintf("the serve's supervisor was found stopped (SIGSTOP) %d time(s) at the serve's stop, and continued: something the serve started stopped the process that holds the device and stops the serve", r.Stopped))
	}
	if len(why) == 0 {
		return Assertion{}, false
	}
	return Assertion{Name: Released, Detail: strings.Join(why, "; ")}, true
}
