package fastjson

import (
	"bytes"
	"encoding/json"
)

// AppendString appends s as a JSON string the way encoding/json's Encoder
// with HTML escaping off writes it (FuzzAppendString): printable ASCII
// without quotes or backslashes directly, anything else through
// encoding/json itself.
func AppendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(s) // a string always encodes
			return append(dst, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
		}
	}
	return append(append(append(dst, '"'), s...), '"')
}
