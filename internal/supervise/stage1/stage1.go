package stage1

// The supervisor's command line and descriptors, as package supervise
// defines them for the gate.
const (
	Command    = "supervise"
	ContainEnv = "NPU_SERVE_SMOKE_CONTAIN"
	ControlFD  = 3
	HeldFD     = 4
)
