package httpd

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestReadBodyWholeWhateverTheDeclaredLength: the body is read whole in
// small pieces, with a declared length, a wrong one or none, and a read
// error reaches the caller.
func TestReadBodyWholeWhateverTheDeclaredLength(t *testing.T) {
	body := strings.Repeat("0123456789", 300)
	for _, declared := range []int64{-1, 0, 3000, 10, 5000} {
		got, err := readBody(iotest.OneByteReader(strings.NewReader(body)), declared)
		if err != nil || string(got) != body {
			t.Errorf("declared %d: %d bytes, %v; want the %d-byte body", declared, len(got), err, len(body))
		}
	}
	boom := errors.New("boom")
	if _, err := readBody(io.MultiReader(bytes.NewReader([]byte("ab")), iotest.ErrReader(boom)), 10); !errors.Is(err, boom) {
		t.Errorf("read error: got %v, want %v", err, boom)
	}
}
