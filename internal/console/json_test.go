package console

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestJSON(t *testing.T) {
	v := map[string]any{
		"command": `##[error]forged ##[set-output name=result;]pass \"##[ "quoted" [#]`,
		"bidi":    "a\u202eb\u2028c\u0085d",
		"plain":   "café ok",
		"list":    []any{"##[x", 1.0, []any{"[", "#"}},
	}
	for _, indent := range []bool{false, true} {
		var b []byte
		if indent {
			b, _ = json.MarshalIndent(v, "", "  ")
		} else {
			b, _ = json.Marshal(v)
		}
		got := JSON(b)
		s := string(got)
		if strings.Contains(s, "#") || strings.Contains(s, "##[") {
			t.Errorf("JSON left a # in:\n%s", s)
		}
		if strings.ContainsFunc(s, func(r rune) bool { return r != '\n' && IsControl(r) }) || strings.ContainsAny(s, "\u202e\u2028\u0085") {
			t.Errorf("JSON left a control or format character in:\n%q", s)
		}
		if !strings.Contains(s, `"plain":"café ok"`) && !strings.Contains(s, `"plain": "café ok"`) {
			t.Errorf("JSON changed text it need not:\n%s", s)
		}
		if !strings.Contains(s, `\u005b`) || !strings.Contains(s, `"list": [`) && !strings.Contains(s, `"list":[`) {
			t.Errorf("JSON should escape [ in strings only:\n%s", s)
		}
		var back map[string]any
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("JSON is not JSON: %v\n%s", err, s)
		}
		if !reflect.DeepEqual(back, v) {
			t.Errorf("JSON decodes to\n%#v\nwant\n%#v", back, v)
		}
	}
}
