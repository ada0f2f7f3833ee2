package payload

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestEncode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		in            []byte
		text, enc     string
		envText, envE string
	}{
		{"nil", nil, "", UTF8, "", UTF8},
		{"empty", []byte{}, "", UTF8, "", UTF8},
		{"ascii", []byte("k1"), "k1", UTF8, "k1", UTF8},
		{"multibyte", []byte("ключ ✓"), "ключ ✓", UTF8, "ключ ✓", UTF8},
		{"invalid byte", []byte{0xff}, "/w==", Base64, "/w==", Base64},
		{"truncated rune", []byte{0xc3}, "ww==", Base64, "ww==", Base64},
		{"invalid with NUL", []byte{0xff, 0x00, 0x01}, "/wAB", Base64, "/wAB", Base64},
		{"NUL in valid UTF-8", []byte("a\x00b"), "a\x00b", UTF8, "YQBi", Base64},
		{"only NUL", []byte{0}, "\x00", UTF8, "AA==", Base64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if text, enc := Encode(tt.in); text != tt.text || enc != tt.enc {
				t.Errorf("Encode(%x) = %q, %s, want %q, %s", tt.in, text, enc, tt.text, tt.enc)
			}
			if text, enc := EncodeEnv(tt.in); text != tt.envText || enc != tt.envE {
				t.Errorf("EncodeEnv(%x) = %q, %s, want %q, %s", tt.in, text, enc, tt.envText, tt.envE)
			}
		})
	}
}

func TestDecode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, text, enc string
		want            []byte
		err             string
	}{
		{"utf-8", "héllo", UTF8, []byte("héllo"), ""},
		{"utf-8 kept verbatim", "\xff", UTF8, []byte{0xff}, ""},
		{"base64", "/wAB", Base64, []byte{0xff, 0, 1}, ""},
		{"empty base64", "", Base64, []byte{}, ""},
		{"bad base64", "!!", Base64, nil, "is not valid base64: illegal base64 data at input byte 0"},
		{"unpadded base64", "/w", Base64, nil, "is not valid base64: "},
		{"empty encoding", "x", "", nil, `encoding "" is not utf-8 or base64`},
		{"other encoding", "x", "hex", nil, `encoding "hex" is not utf-8 or base64`},
		{"case matters", "x", "UTF-8", nil, `encoding "UTF-8" is not utf-8 or base64`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode(tt.text, tt.enc)
			switch {
			case tt.err == "" && (err != nil || !bytes.Equal(got, tt.want)):
				t.Errorf("Decode(%q, %q) = %x, %v, want %x", tt.text, tt.enc, got, err, tt.want)
			case tt.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.err)):
				t.Errorf("Decode(%q, %q) = %x, %v, want error %q", tt.text, tt.enc, got, err, tt.err)
			}
			if unknown := tt.enc != UTF8 && tt.enc != Base64; errors.Is(err, ErrUnknownEncoding) != unknown {
				t.Errorf("Decode(%q, %q) error %v: errors.Is(ErrUnknownEncoding) = %t, want %t", tt.text, tt.enc, err, !unknown, unknown)
			}
		})
	}
}

func TestMaxDecodedLen(t *testing.T) {
	t.Parallel()
	tests := []struct {
		text, enc string
		want      int
	}{
		{"abc", UTF8, 3},
		{"/wAB", Base64, 3},
		{"/w==", Base64, 3},
		{"abcd", "hex", 0},
	}
	for _, tt := range tests {
		got := MaxDecodedLen(tt.text, tt.enc)
		if got != tt.want {
			t.Errorf("MaxDecodedLen(%q, %q) = %d, want %d", tt.text, tt.enc, got, tt.want)
		}
		if b, err := Decode(tt.text, tt.enc); err == nil && len(b) > got {
			t.Errorf("Decode(%q, %q) = %d bytes, over MaxDecodedLen %d", tt.text, tt.enc, len(b), got)
		}
	}
}
