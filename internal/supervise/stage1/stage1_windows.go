package stage1

// On Windows there is no supervisor, and no first stage: the gate starts
// the serve itself, suspended, and puts it in a Job Object before it runs
// (internal/serve). Only the names above are shared.
