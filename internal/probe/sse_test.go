package probe

import (
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/measure"
)

type sseEvent struct{ Type, Data string }

// spec reads a whole event stream as the WHATWG standard words it, one step
// at a time, for the streaming reader to be checked against.
func spec(stream string) []sseEvent {
	stream = strings.TrimPrefix(stream, "\uFEFF")
	var events []sseEvent
	var typ, data string
	for {
		i := strings.IndexAny(stream, "\r\n")
		if i < 0 {
			return events // an unfinished line is dropped
		}
		line := stream[:i]
		if strings.HasPrefix(stream[i:], "\r\n") {
			stream = stream[i+2:]
		} else {
			stream = stream[i+1:]
		}
		if line == "" {
			if data == "" {
				typ = ""
				continue
			}
			data = strings.TrimSuffix(data, "\n")
			if typ == "" {
				typ = "message"
			}
			events = append(events, sseEvent{typ, data})
			typ, data = "", ""
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		name, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		if name == "data" {
			data += value + "\n"
		}
		if name == "event" {
			typ = value
		}
	}
}

// splitReader gives its text in pieces of the given sizes, in turn.
type splitReader struct {
	s     string
	sizes []byte
	i     int
}

func (r *splitReader) Read(p []byte) (int, error) {
	if r.s == "" {
		return 0, io.EOF
	}
	n := len(r.s)
	if len(r.sizes) > 0 {
		n = int(r.sizes[r.i%len(r.sizes)])%7 + 1
		r.i++
	}
	n = min(n, len(p), len(r.s))
	copy(p, r.s[:n])
	r.s = r.s[n:]
	return n, nil
}

// stream reads events the way read does: lines as they come, fields applied.
func stream(r io.Reader) ([]sseEvent, error) {
	lines := newLineReader(r)
	var ev event
	var events []sseEvent
	for {
		line, err := lines.next()
		if err == io.EOF {
			return events, nil
		}
		if err != nil {
			return events, err
		}
		if !ev.take(line) {
			continue
		}
		if ev.hasData {
			typ := string(ev.typ)
			if typ == "" {
				typ = "message"
			}
			events = append(events, sseEvent{typ, string(ev.data)})
		}
		ev.reset()
	}
}

var sseCases = []struct {
	name, in string
	want     []sseEvent
}{
	{"LF", "data: a\n\ndata: b\n\n", []sseEvent{{"message", "a"}, {"message", "b"}}},
	{"CRLF", "data: a\r\n\r\ndata: b\r\n\r\n", []sseEvent{{"message", "a"}, {"message", "b"}}},
	{"CR", "data: a\r\rdata: b\r\r", []sseEvent{{"message", "a"}, {"message", "b"}}},
	{"mixed", "data: a\r\n\rdata: b\n\r\n", []sseEvent{{"message", "a"}, {"message", "b"}}},
	{"multi-line data joined with LF", "data: {\"a\":\ndata: 1}\n\n", []sseEvent{{"message", "{\"a\":\n1}"}}},
	{"one space removed, once", "data:  two\ndata:none\n\n", []sseEvent{{"message", " two\nnone"}}},
	{"data without a colon", "data\ndata\n\n", []sseEvent{{"message", "\n"}}},
	{"a lone data line is an empty event", "data\n\n", []sseEvent{{"message", ""}}},
	{"comments and other fields", ": ping\nid: 7\nretry: 100\nfoo: bar\ndata: x\n\n", []sseEvent{{"message", "x"}}},
	{"event types, reset after dispatch", "event: error\ndata: x\n\ndata: y\n\n", []sseEvent{{"error", "x"}, {"message", "y"}}},
	{"an event type without data is dropped", "event: error\n\ndata: y\n\n", []sseEvent{{"message", "y"}}},
	{"a leading BOM", "\uFEFFdata: a\n\n", []sseEvent{{"message", "a"}}},
	{"a BOM only at the start", "data: a\n\n\uFEFFdata: b\n\n", []sseEvent{{"message", "a"}}},
	{"an unfinished event is dropped", "data: a\n\ndata: b\n", []sseEvent{{"message", "a"}}},
	{"an unfinished line is dropped", "data: a\n\ndata: b", []sseEvent{{"message", "a"}}},
	{"a short stream that starts like a BOM", "\xEF\xBB", nil},
}

func TestEventStream(t *testing.T) {
	for _, tt := range sseCases {
		if diff := cmp.Diff(tt.want, spec(tt.in)); diff != "" {
			t.Errorf("%s: spec(%q) (-want +got):\n%s", tt.name, tt.in, diff)
		}
		for _, sizes := range [][]byte{nil, {0}, {1}, {2, 0, 5}} {
			got, err := stream(&splitReader{s: tt.in, sizes: sizes})
			if err != nil {
				t.Errorf("%s: stream(%q) in pieces %v: %v", tt.name, tt.in, sizes, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s: stream(%q) in pieces %v (-want +got):\n%s", tt.name, tt.in, sizes, diff)
			}
		}
	}
}

// FuzzEventStream: the streaming reader, fed in any pieces, reads what the
// standard's steps read from the whole stream.
func FuzzEventStream(f *testing.F) {
	for _, tt := range sseCases {
		f.Add(tt.in, []byte{1, 3})
	}
	f.Add("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\r\n\r\ndata: [DONE]\r\n\r\n", []byte{})
	f.Fuzz(func(t *testing.T, in string, sizes []byte) {
		if len(in) > maxLine/2 {
			return
		}
		got, err := stream(&splitReader{s: in, sizes: sizes})
		if err != nil {
			t.Fatalf("stream(%q): %v", in, err)
		}
		if diff := cmp.Diff(spec(in), got); diff != "" {
			t.Errorf("stream(%q) in pieces %v (-spec +stream):\n%s", in, sizes, diff)
		}
	})
}

// FuzzRead: no stream makes the probe panic or record figures that do not
// hold together.
func FuzzRead(f *testing.F) {
	for _, tt := range sseCases {
		f.Add(tt.in, []byte{2})
	}
	f.Add("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"reasoning\":\"b\"}}],\"usage\":{\"completion_tokens\":2}}\n\ndata: [DONE]\n\n", []byte{5, 1})
	f.Add("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\ndata: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\ndata: [DONE]\n\n", []byte{})
	f.Fuzz(func(t *testing.T, in string, sizes []byte) {
		cr := &countedReader{r: &splitReader{s: in, sizes: sizes}}
		var r measure.Reply
		read(cr, timeZero, &r, cr.reads.Load, nil)
		sum := 0
		for i, a := range r.Arrivals {
			sum += a.Chunks
			if a.Chunks < 1 || i > 0 && a.MS < r.Arrivals[i-1].MS {
				t.Errorf("arrivals %+v: each must hold a chunk and come after the one before", r.Arrivals)
			}
		}
		if sum != r.Chunks {
			t.Errorf("arrivals hold %d chunks, Chunks = %d", sum, r.Chunks)
		}
		if (r.FirstMS == nil) != (r.Chunks == 0) || r.FirstMS != nil && *r.FirstMS > *r.LastMS {
			t.Errorf("FirstMS %v, LastMS %v, Chunks %d do not agree", r.FirstMS, r.LastMS, r.Chunks)
		}
		if len(r.Content) > MaxText || len(r.Reasoning) > MaxText {
			t.Errorf("content %d, reasoning %d bytes: past the bound %d", len(r.Content), len(r.Reasoning), MaxText)
		}
		r.Estimate() // must not panic on whatever was recorded
	})
}

// FastFlowLM's figures, in its last chunk as send_final_response writes it
// (src/server/streaming_ostream_openai.hpp at 8b8399c1): seconds and tokens a
// second beside the counts; a rate of nothing over nothing comes as null.
func TestReadFLMUsage(t *testing.T) {
	const content = `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"qwen3:0.6b","choices":[{"index":0,"delta":{"role":"assistant","content":"Paris"},"finish_reason":null}]}` + "\n\n"
	last := func(usage string) string {
		return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"qwen3:0.6b","system_fingerprint":"fp","choices":[{"index":0,"delta":{"content":null},"finish_reason":"stop"}],"usage":` + usage + "}\n\ndata: [DONE]\n\n"
	}
	tests := []struct {
		name  string
		usage string
		want  *measure.ServerTimings
	}{
		{"every figure", `{"prompt_tokens":14,"completion_tokens":9,"total_tokens":23,"active_kv_tokens":24,"max_kv_token_capacity":32768,"kv_token_occupancy_rate_percentage":0.0732,"load_duration":0.0021,"prefill_duration_ttft":0.125,"decoding_duration":0.18,"prefill_speed_tps":112,"decoding_speed_tps":50}`,
			&measure.ServerTimings{PredictedPerSecond: 50, DecodeSteps: 9, DecodeMS: 180, PromptMS: 125}},
		{"no step: the rate is null", `{"prompt_tokens":14,"completion_tokens":0,"total_tokens":14,"load_duration":0,"prefill_duration_ttft":0.125,"decoding_duration":0,"prefill_speed_tps":112,"decoding_speed_tps":null}`,
			&measure.ServerTimings{PromptMS: 125}},
		{"a rate alone", `{"completion_tokens":9,"decoding_speed_tps":50}`, &measure.ServerTimings{PredictedPerSecond: 50}},
		{"counts alone: not FastFlowLM's", `{"prompt_tokens":14,"completion_tokens":9,"total_tokens":23}`, nil},
	}
	for _, tt := range tests {
		var r measure.Reply
		if err := read(strings.NewReader(content+last(tt.usage)), timeZero, &r, func() int64 { return 0 }, nil); err != nil {
			t.Fatalf("%s: read: %v", tt.name, err)
		}
		if diff := cmp.Diff(tt.want, r.Server); diff != "" {
			t.Errorf("%s: Server (-want +got):\n%s", tt.name, diff)
		}
	}
}
