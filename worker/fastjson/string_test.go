package fastjson

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzAppendString: AppendString writes what encoding/json's Encoder with
// HTML escaping off writes, for any string, after whatever dst held.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", `quote " and \ back`, "<html> & 'x'", "tab\tnl\nret\rbs\bff\f", "\x00\x01\x1f\x7f",
		"é ü 日本 🙂", "bad \xff\xfe utf-8 \xc3", "line sep \u2028 para \u2029"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		want := append([]byte("prefix"), bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
		if got := AppendString([]byte("prefix"), s); !bytes.Equal(got, want) {
			t.Fatalf("%q:\n got %s\nwant %s", s, got, want)
		}
	})
}
