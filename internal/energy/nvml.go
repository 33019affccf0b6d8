package energy

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/vendortool"
)

// nvidiaSMI reads an NVIDIA GPU's board power through nvidia-smi, NVML's
// own tool, in its loop mode: one process for the whole run, printing a
// reading every 100 ms, so a reading costs no process start.
//
// NVML's total-energy counter (nvmlDeviceGetTotalEnergyConsumption) would
// be better, but binding the C library at run time makes the static release
// binary a dynamically linked one; nvidia-smi gives power.draw.instant
// (drivers that have it), else power.draw.average or power.draw, which the
// meter integrates. NVML's nvmlDeviceGetPowerUsage (power.draw) is an
// average over a second on Ampere (GA100 aside) and newer GPUs, and
// instantaneous before: where the instant field is missing, the reading is
// taken as that average (a lag and period of a second).
type nvidiaSMI struct {
	info   Info
	cmd    *exec.Cmd
	cancel context.CancelFunc

	mu   sync.Mutex
	last float64
	have bool
	err  error
	done chan struct{}
}

// nvidiaSMIPeriod is the loop's period (-lms).
const nvidiaSMIPeriod = 100 * time.Millisecond

// nvidiaSMIAverage is what power.draw.average averages, and power.draw on
// Ampere and newer GPUs: a second (NVML's nvmlDeviceGetPowerUsage).
const nvidiaSMIAverage = time.Second

// OpenNvidiaSMI is Env.NVML's default: nvidia-smi of tools (found on PATH
// before the serve started, run with the serve's allow-listed
// environment), GPU dev.
func OpenNvidiaSMI(tools *vendortool.Set) func(dev int) (Source, error) {
	return func(dev int) (Source, error) {
		path, err := tools.Look("nvidia-smi")
		if err != nil {
			return nil, notHere("nvidia-smi is not on PATH")
		}
		// Which power field this driver has: the instant one (newer
		// drivers), else the average over a second.
		field := ""
		for _, f := range []string{"power.draw.instant", "power.draw.average", "power.draw"} {
			out, err := runNvidiaSMI(path, dev, f)
			if err == nil {
				if _, err := parsePower(out); err == nil {
					field = f
					break
				}
			}
		}
		if field == "" {
			out, err := runNvidiaSMI(path, dev, "power.draw")
			return nil, notHere("nvidia-smi -i %d gives no power reading: %s", dev, clip(strings.TrimSpace(string(out))+errText(err), 200))
		}
		ctx, cancel := context.WithCancel(context.Background())
		cmd := path.Command(ctx, "--query-gpu="+field, "--format=csv,noheader,nounits",
			"-i", strconv.Itoa(dev), "-lms", strconv.Itoa(int(nvidiaSMIPeriod/time.Millisecond)))
		// Gone with the gate: a reader never outlives the run.
		endsWhole(cmd)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			cancel()
			return nil, notHere("nvidia-smi: %v", err)
		}
		if err := cmd.Start(); err != nil {
			cancel()
			return nil, notHere("nvidia-smi: %v", err)
		}
		info := Info{Name: fmt.Sprintf("nvml:%d", dev), Quantity: Power, Boundary: "the GPU board (nvidia-smi " + field + ")",
			Method: NotKnown, Period: nvidiaSMIPeriod, Poll: DefaultPoll}
		if field != "power.draw.instant" {
			info.Lag, info.Period = nvidiaSMIAverage, nvidiaSMIAverage
			if field == "power.draw" {
				info.Boundary = "the GPU board (nvidia-smi power.draw, taken as its average over 1 s: Ampere and newer, GA100 aside)"
			}
		}
		s := &nvidiaSMI{cmd: cmd, cancel: cancel, done: make(chan struct{}), info: info}
		go s.read(bufio.NewScanner(stdout))
		// The first line, so that Read has a value.
		deadline := time.After(5 * time.Second)
		for {
			s.mu.Lock()
			have, rerr := s.have, s.err
			s.mu.Unlock()
			if have {
				return s, nil
			}
			if rerr != nil {
				s.Close()
				return nil, notHere("nvidia-smi: %v", rerr)
			}
			select {
			case <-deadline:
				s.Close()
				return nil, notHere("nvidia-smi printed no reading in 5 s")
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return " (" + err.Error() + ")"
}

func runNvidiaSMI(path vendortool.Tool, dev int, field string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := path.Command(ctx, "--query-gpu="+field, "--format=csv,noheader,nounits", "-i", strconv.Itoa(dev))
	endsWhole(cmd)
	return cmd.Output()
}

// parsePower reads one nvidia-smi power line, watts ("[N/A]" is none).
func parsePower(line []byte) (float64, error) {
	s := strings.TrimSpace(string(line))
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || v != v || v > 1e6 {
		return 0, fmt.Errorf("not a power reading: %q", clip(s, 60))
	}
	return v, nil
}

func (s *nvidiaSMI) read(sc *bufio.Scanner) {
	defer close(s.done)
	sc.Buffer(make([]byte, 256), 4096)
	for sc.Scan() {
		v, err := parsePower(sc.Bytes())
		s.mu.Lock()
		if err != nil {
			s.err = err
		} else {
			s.last, s.have, s.err = v, true, nil
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	if s.err == nil {
		s.err = fmt.Errorf("nvidia-smi stopped printing readings")
	}
	s.have = false
	s.mu.Unlock()
}

func (s *nvidiaSMI) Info() Info { return s.info }

func (s *nvidiaSMI) Read() (float64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.have {
		return 0, s.err
	}
	return s.last, nil
}

func (s *nvidiaSMI) Close() error {
	s.cancel()
	// Wait first: past WaitDelay it closes the pipe a descendant still
	// holds, which ends the reader.
	_ = s.cmd.Wait()
	<-s.done
	return nil
}
