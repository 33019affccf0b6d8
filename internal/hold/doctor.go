package hold

import "time"

// Check is one finding of the doctor.
type Check struct {
	Level string // "ok", "warn" or "FAIL"
	What  string
}

// CommandTimeout bounds each health command the doctor runs.
const CommandTimeout = 30 * time.Second
