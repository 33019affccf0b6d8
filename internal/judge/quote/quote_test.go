package quote

import "testing"

func TestCut(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"Paris", 10, `"Paris"`},
		{"::set-output name=x::y\n", 40, `"::set-output name=x::y\n"`},
		{"abcdef", 3, `"abc"...`},
		{"ééé", 3, `"ééé"`},
		{"éééé", 3, `"ééé"...`},
	}
	for _, tt := range tests {
		if got := Cut(tt.in, tt.n); got != tt.want {
			t.Errorf("Cut(%q, %d) = %s, want %s", tt.in, tt.n, got, tt.want)
		}
	}
}
