package payload

import (
	"bytes"
	"testing"
	"unicode/utf8"
)

// Any bytes come back from their text under either rule, and MaxDecodedLen
// bounds what Decode returns.
func FuzzRoundTrip(f *testing.F) {
	for _, b := range [][]byte{nil, []byte("k1"), {0xff, 0, 1}, []byte("a\x00b"), []byte("ключ"), {0xc3, 0x28}} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, rule := range []struct {
			name   string
			encode func([]byte) (string, string)
		}{{"Encode", Encode}, {"EncodeEnv", EncodeEnv}} {
			text, enc := rule.encode(b)
			if enc == UTF8 && !utf8.ValidString(text) {
				t.Fatalf("%s(%x) = %q marked utf-8", rule.name, b, text)
			}
			back, err := Decode(text, enc)
			if err != nil || !bytes.Equal(back, b) {
				t.Fatalf("Decode(%s(%x)) = %x, %v", rule.name, b, back, err)
			}
			if n := MaxDecodedLen(text, enc); len(back) > n {
				t.Fatalf("Decode(%s(%x)) = %d bytes, over MaxDecodedLen %d", rule.name, b, len(back), n)
			}
		}
		if text, enc := EncodeEnv(b); enc == UTF8 && bytes.IndexByte([]byte(text), 0) >= 0 {
			t.Fatalf("EncodeEnv(%x) = %q: a NUL marked utf-8", b, text)
		}
	})
}

// Decode takes any text from a client or peer without panicking, and what
// it returns stays within MaxDecodedLen.
func FuzzDecode(f *testing.F) {
	f.Add("/wAB", Base64)
	f.Add("x", UTF8)
	f.Add("!!", Base64)
	f.Add("/w=\r\n=", Base64)
	f.Add("x", "hex")
	f.Fuzz(func(t *testing.T, text, enc string) {
		b, err := Decode(text, enc)
		if err != nil {
			return
		}
		if n := MaxDecodedLen(text, enc); len(b) > n {
			t.Fatalf("Decode(%q, %q) = %d bytes, over MaxDecodedLen %d", text, enc, len(b), n)
		}
	})
}
