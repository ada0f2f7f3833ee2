package kafkaread

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestIsolationText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		text string
		want Isolation
		ok   bool
	}{
		{"read_uncommitted", ReadUncommitted, true},
		{"read_committed", ReadCommitted, true},
		{"", ReadUncommitted, false},
		{"READ_COMMITTED", ReadUncommitted, false},
		{"committed", ReadUncommitted, false},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			got, ok := ParseIsolation(tt.text)
			if got != tt.want || ok != tt.ok {
				t.Errorf("ParseIsolation(%q) = %v, %v, want %v, %v", tt.text, got, ok, tt.want, tt.ok)
			}
			var v struct{ I Isolation }
			err := json.Unmarshal([]byte(`{"I":"`+tt.text+`"}`), &v)
			if tt.ok != (err == nil) || (err != nil && !errors.Is(err, ErrBadQuery)) || v.I != tt.want {
				t.Errorf("json.Unmarshal(%q) = %v, %v, want %v, ok %v", tt.text, v.I, err, tt.want, tt.ok)
			}
			if !tt.ok {
				return
			}
			if b, err := json.Marshal(got); err != nil || string(b) != `"`+tt.text+`"` {
				t.Errorf("json.Marshal(%v) = %s, %v, want %q", got, b, err, tt.text)
			}
		})
	}
	var zero Isolation
	if zero.String() != "read_uncommitted" {
		t.Errorf("Isolation(0).String() = %q, want read_uncommitted", zero.String())
	}
}
