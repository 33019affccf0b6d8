package energy

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/vendortool"
)

// npuSMI reads an Ascend device's power with `npu-smi info -t power -i N`,
// which prints (Huawei's npu-smi reference, "查询所有芯片功率", e.g. Atlas
// 200I A2, 23.0 and later):
//
//	NPU Real-time Power(W)         : 9.1
//	Power Dissipation(W)           : 16.9
//
// in watts with one decimal: "Power Dissipation" is the whole card's power,
// "NPU Real-time Power" the chip's; some cards print one of them only. The
// card's is taken where both are. Each reading runs the tool, so it is read
// once a second.
type npuSMI struct {
	info Info
	tool vendortool.Tool
	dev  int
}

var (
	npuCardPower = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?m)^\s*Power Dissipation\(W\)\s*:\s*([0-9]+(?:\.[0-9]+)?)\s*$`)
	})
	npuChipPower = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?m)^\s*NPU Real-time Power\(W\)\s*:\s*([0-9]+(?:\.[0-9]+)?)\s*$`)
	})
)

// npuSMITimeout bounds one run of npu-smi.
const npuSMITimeout = 5 * time.Second

func openNPUSMI(tools *vendortool.Set, dev int) (Source, error) {
	tool, err := tools.Look("npu-smi")
	if err != nil {
		return nil, notHere("npu-smi is not on PATH")
	}
	s := &npuSMI{tool: tool, dev: dev, info: Info{Name: fmt.Sprintf("npu-smi:%d", dev), Quantity: Power, Method: NotKnown, Poll: time.Second}}
	out, err := s.run()
	if err != nil {
		return nil, notHere("%v", err)
	}
	switch {
	case npuCardPower().Match(out):
		s.info.Boundary = "the Ascend card (npu-smi Power Dissipation)"
	case npuChipPower().Match(out):
		s.info.Boundary = "the Ascend NPU chip (npu-smi NPU Real-time Power)"
	default:
		return nil, notHere("npu-smi info -t power -i %d printed no power line: %q", dev, clip(string(out), 200))
	}
	return s, nil
}

func (s *npuSMI) Info() Info   { return s.info }
func (s *npuSMI) Close() error { return nil }

func (s *npuSMI) run() ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), npuSMITimeout)
	defer cancel()
	cmd := s.tool.Command(ctx, "info", "-t", "power", "-i", strconv.Itoa(s.dev))
	endsWhole(cmd)
	var out bytes.Buffer
	cmd.Stdout = &limited{b: &out, n: 64 << 10}
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("npu-smi info -t power -i %d: %v", s.dev, err)
	}
	return out.Bytes(), nil
}

func (s *npuSMI) Read() (float64, error) {
	out, err := s.run()
	if err != nil {
		return 0, err
	}
	re := npuChipPower()
	if s.info.Boundary == "the Ascend card (npu-smi Power Dissipation)" {
		re = npuCardPower()
	}
	m := re.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("npu-smi printed no power line this time: %q", clip(string(out), 200))
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		return 0, err
	}
	return bounded(s.info, v)
}

// limited keeps the first n bytes written to it and drops the rest.
type limited struct {
	b *bytes.Buffer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if room := l.n - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
