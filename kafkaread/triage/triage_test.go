package triage

import (
	"errors"
	"fmt"
	"testing"

	"svc/kafkaread"
)

// A cursor's text form reads back as itself; anything else is a bad query.
func TestCursorText(t *testing.T) {
	c := Cursor{2: 7, 0: 120, 1: 0}
	if s := c.String(); s != "0:120,1:0,2:7" {
		t.Errorf("String = %q", s)
	}
	back, err := ParseCursor(c.String())
	if err != nil || fmt.Sprint(back) != fmt.Sprint(c) {
		t.Errorf("ParseCursor(%q) = %v, %v", c.String(), back, err)
	}
	for _, bad := range []string{"", "0", "0:", ":1", "a:1", "0:-1", "-1:0", "0:1,0:2", "0:1,", "0:1;1:2"} {
		if _, err := ParseCursor(bad); !errors.Is(err, kafkaread.ErrBadQuery) {
			t.Errorf("ParseCursor(%q) = %v, want ErrBadQuery", bad, err)
		}
	}
}

// The scan bound is shared evenly; what a partition cannot use goes to
// the others, and no partition gets more than it holds.
func TestShare(t *testing.T) {
	for _, c := range []struct {
		avail map[int32]int64
		n     int64
		want  map[int32]int64
	}{
		{map[int32]int64{0: 100, 1: 100, 2: 100}, 30, map[int32]int64{0: 10, 1: 10, 2: 10}},
		{map[int32]int64{0: 2, 1: 100, 2: 100}, 30, map[int32]int64{0: 2, 1: 14, 2: 14}},
		{map[int32]int64{0: 5, 1: 5}, 1000, map[int32]int64{0: 5, 1: 5}},
		{map[int32]int64{0: 100, 1: 100, 2: 100}, 2, map[int32]int64{0: 1, 1: 1}},
		{map[int32]int64{0: 0, 1: -3}, 10, map[int32]int64{}},
	} {
		if got := share(c.avail, c.n); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("share(%v, %d) = %v, want %v", c.avail, c.n, got, c.want)
		}
	}
}
