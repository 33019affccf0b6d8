package hold

import (
	"slices"
	"strconv"
)

// Pool is a set of devices of one kind on a host, shared through one queue.
type Pool struct {
	Name    string
	Env     string // the vendor's variable that makes devices visible, e.g. ASCEND_RT_VISIBLE_DEVICES; "" for none
	Members []Member
}

// Member is a device of a pool.
type Member struct {
	Name  string // as people and {devices} say it, e.g. npu3
	Index string // what the vendor's runtime calls it, e.g. 3
}

// sortIndexes orders indexes as numbers where they are (Ascend reads only
// an ascending list).
func sortIndexes(idx []string) []string {
	out := slices.Clone(idx)
	slices.SortStableFunc(out, func(a, b string) int {
		x, errA := strconv.Atoi(a)
		y, errB := strconv.Atoi(b)
		if errA == nil && errB == nil {
			return x - y
		}
		return 0
	})
	return out
}
