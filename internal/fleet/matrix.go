// Package fleet merges the runs of a release gate's job matrix (device ×
// model × serve) into one verdict: a row per expected job, re-judged from
// its artifact's evidence with the merge's own limits, a job whose artifact
// is missing a failed row, and one table for the check run and the PR.
package fleet

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/config"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/history"
)

// Job is one job of the matrix: its values by key.
type Job map[string]string

// Keys of a job that name it; other keys are settings of the row.
const (
	KeyModel  = "model"
	KeyDevice = "device"
	KeyPreset = "preset"
)

// Keys that set a row's limits, over the merge's flags.
const (
	KeyFloor        = "floor"
	KeyFirstTokenMS = "first-token-ms"
)

// Model, Device and Preset are the job's names.
func (j Job) Model() string  { return j[KeyModel] }
func (j Job) Device() string { return j[KeyDevice] }
func (j Job) Preset() string { return j[KeyPreset] }

// CheckName is the job's check run: "BASE (MODEL, DEVICE)", with the preset
// after them when the matrix has one. It holds no figure, so a required
// status check can name it.
func (j Job) CheckName(base string) string {
	parts := []string{j.Model(), j.Device()}
	if p := j.Preset(); p != "" {
		parts = append(parts, p)
	}
	return base + " (" + strings.Join(parts, ", ") + ")"
}

// Artifact is the name of the job's uploaded out/ (history.ArtifactName of
// its check name): "npu-serve-smoke-MODEL-DEVICE[-PRESET]".
func (j Job) Artifact(base string) string { return history.ArtifactName(j.CheckName(base)) }

// nameValue is what a job's model, device or preset may be, compiled on
// first use (not at every start of the gate's binary).
var nameValue = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`) })

// check says what is wrong with a job's names: they go into check names
// and artifact names, so they are kept to what both hold unchanged.
func (j Job) check() error {
	if j.Model() == "" || j.Device() == "" {
		return fmt.Errorf("%v has no %s or no %s; every job needs both", map[string]string(j), KeyModel, KeyDevice)
	}
	for _, k := range []string{KeyModel, KeyDevice, KeyPreset} {
		if v, ok := j[k]; ok && (!nameValue().MatchString(v) || strings.Contains(v, "--")) {
			return fmt.Errorf("%s %q: use letters, digits, '.', '_' and single '-' (it names the check run and the artifact); put a model's path in another key", k, v)
		}
	}
	if p, ok := j[KeyPreset]; ok {
		if _, known := config.Presets[p]; !known {
			return fmt.Errorf("%s %q: pass one of %s (the gate's --preset)", KeyPreset, p, strings.Join(config.PresetNames(), ", "))
		}
	}
	for _, k := range []string{KeyFloor, KeyFirstTokenMS} {
		if v, ok := j[k]; ok {
			if f, err := strconv.ParseFloat(v, 64); err != nil || !(f > 0) || math.IsInf(f, 0) {
				return fmt.Errorf("%s %q of %s: pass a positive, finite number", k, v, j.CheckName("job"))
			}
		}
	}
	return nil
}

// ParseMatrix reads a job matrix as `strategy.matrix` takes it: keys with
// lists make every combination; `exclude` removes the combinations it
// matches; `include` adds its values to each combination whose original
// values it does not change, or is a job of its own when there is none.
// A list of objects is taken as the jobs themselves.
func ParseMatrix(s string) ([]Job, error) {
	var list []map[string]any
	if err := json.Unmarshal([]byte(s), &list); err == nil {
		var jobs []Job
		for _, m := range list {
			j, err := job(m)
			if err != nil {
				return nil, err
			}
			jobs = append(jobs, j)
		}
		return checked(jobs)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("not a JSON matrix (%v); pass the matrix the jobs ran, e.g. {\"model\": [\"Qwen3-0.6B\"], \"device\": [\"npu\"]}", err)
	}
	var keys []string
	for k := range m {
		if k != "include" && k != "exclude" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var jobs []Job
	if len(keys) > 0 {
		jobs = []Job{{}}
	}
	for _, k := range keys {
		values, ok := m[k].([]any)
		if !ok {
			return nil, fmt.Errorf("matrix key %q is not a list", k)
		}
		var next []Job
		for _, j := range jobs {
			for _, v := range values {
				s, err := scalar(k, v)
				if err != nil {
					return nil, err
				}
				n := maps.Clone(j)
				n[k] = s
				next = append(next, n)
			}
		}
		jobs = next
	}
	excludes, err := objects(m, "exclude")
	if err != nil {
		return nil, err
	}
	jobs = slices.DeleteFunc(jobs, func(j Job) bool {
		return slices.ContainsFunc(excludes, func(e Job) bool { return matches(j, e) })
	})
	includes, err := objects(m, "include")
	if err != nil {
		return nil, err
	}
	original := len(jobs)
	for _, inc := range includes {
		added := false
		for i := range original {
			if keepsOriginal(jobs[i], inc, keys) {
				maps.Copy(jobs[i], inc)
				added = true
			}
		}
		if !added {
			jobs = append(jobs, maps.Clone(inc))
		}
	}
	return checked(jobs)
}

func checked(jobs []Job) ([]Job, error) {
	if len(jobs) == 0 {
		return nil, fmt.Errorf("the matrix has no job")
	}
	for _, j := range jobs {
		if err := j.check(); err != nil {
			return nil, err
		}
	}
	if err := Distinct(jobs); err != nil {
		return nil, err
	}
	return jobs, nil
}

// Distinct says when two jobs are one, or would upload one artifact: the
// artifact's name joins the names with '-', which they may hold, and two
// jobs with one artifact name could never both be found.
func Distinct(jobs []Job) error {
	seen := map[string]bool{}
	artifacts := map[string]Job{}
	for _, j := range jobs {
		name := strings.TrimSpace(j.CheckName(""))
		if seen[name] {
			return fmt.Errorf("two jobs are %s; each model and device (and preset) once", name)
		}
		seen[name] = true
		artifact := j.Artifact("")
		if o, ok := artifacts[artifact]; ok {
			return fmt.Errorf("the jobs %s and %s would upload one artifact (its name ends -%s: '-' joins the names and is in them), and the merge could find only one; rename one, e.g. with '_' or '.' for '-'",
				strings.TrimSpace(o.CheckName("")), name, artifact)
		}
		artifacts[artifact] = j
	}
	return nil
}

// matches: every value of e is j's.
func matches(j, e Job) bool {
	for k, v := range e {
		if j[k] != v {
			return false
		}
	}
	return true
}

// keepsOriginal: inc changes none of j's values of the matrix's own keys.
func keepsOriginal(j, inc Job, keys []string) bool {
	for _, k := range keys {
		if v, ok := inc[k]; ok && v != j[k] {
			return false
		}
	}
	return true
}

func objects(m map[string]any, key string) ([]Job, error) {
	v, ok := m[key]
	if !ok {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("matrix %s is not a list of objects", key)
	}
	var out []Job
	for _, o := range list {
		om, ok := o.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("matrix %s holds %v, not an object", key, o)
		}
		j, err := job(om)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, nil
}

func job(m map[string]any) (Job, error) {
	j := Job{}
	for k, v := range m {
		s, err := scalar(k, v)
		if err != nil {
			return nil, err
		}
		j[k] = s
	}
	return j, nil
}

func scalar(k string, v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	case bool:
		return strconv.FormatBool(v), nil
	}
	return "", fmt.Errorf("matrix key %q holds %v; the merge reads strings and numbers", k, v)
}

// ParseExpect reads one --expect: "model=M,device=D[,preset=P][,floor=F]...".
func ParseExpect(s string) (Job, error) {
	j := Job{}
	for kv := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--expect %q: pass key=value pairs, e.g. model=Qwen3-0.6B,device=npu", s)
		}
		j[k] = v
	}
	if err := j.check(); err != nil {
		return nil, fmt.Errorf("--expect %q: %v", s, err)
	}
	return j, nil
}
