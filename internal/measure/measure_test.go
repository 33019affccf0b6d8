package measure

import (
	"testing"
)

func ptr[T any](v T) *T { return &v }

func TestFirstTokenMS(t *testing.T) {
	if v, ok := (&Reply{FirstMS: ptr(277.0)}).FirstTokenMS(); v != 277 || !ok {
		t.Errorf("FirstTokenMS() = %v, %v, want 277, true", v, ok)
	}
	if v, ok := (&Reply{}).FirstTokenMS(); v != 0 || ok {
		t.Errorf("FirstTokenMS() of no content = %v, %v, want 0, false", v, ok)
	}
}
