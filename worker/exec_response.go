package worker

import (
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends r as the ingress encodes its responses (encoding/json
// with HTML escaping off, no trailing newline), byte for byte
// (TestExecResponseAppendJSONMatchesEncoder). The ingress answers every
// request with one: encoding it by reflection was 2 % of svc's CPU in the
// HTTP bench (BenchmarkExecResponseJSON).
func (r ExecResponse) AppendJSON(b []byte) []byte {
	b = appendJSONText(append(b, `{"request_id":`...), r.RequestID)
	b = appendJSONText(append(b, `,"status":`...), r.Status)
	if r.Error != "" {
		b = appendJSONText(append(b, `,"error":`...), r.Error)
	}
	if r.Tasks == nil {
		return append(b, `,"tasks":null}`...)
	}
	b = append(b, `,"tasks":[`...)
	for i, t := range r.Tasks {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONText(append(b, `{"task_id":`...), t.TaskID)
		b = appendJSONText(append(b, `,"status":`...), t.Status)
		b = appendJSONText(append(b, `,"output":`...), t.Output)
		b = appendJSONText(append(b, `,"output_encoding":`...), t.OutputEncoding)
		b = strconv.AppendInt(append(b, `,"duration_ms":`...), t.DurationMS, 10)
		b = strconv.AppendInt(append(b, `,"attempts":`...), int64(t.Attempts), 10)
		if t.Error != "" {
			b = appendJSONText(append(b, `,"error":`...), t.Error)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

const jsonHex = "0123456789abcdef"

// appendJSONText appends s as a JSON string the way encoding/json does
// with HTML escaping off: quotes, backslashes and control characters
// escaped, invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped, everything
// else as it is.
func appendJSONText(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if jsonPlainByte[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', jsonHex[c>>4], jsonHex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(append(b, s[start:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', jsonHex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(append(b, s[start:]...), '"')
}

// jsonPlainByte marks the bytes that need no escape and no look at UTF-8:
// one load a byte instead of three comparisons. BenchmarkExecResponseJSON,
// a 1 KiB answer: plain text (bench/load's body, echoed) 1,392-1,506 →
// 812-1,140 ns, JSON text 1,947-1,990 → 1,751-1,965 ns. (Testing eight
// bytes at once in a 64-bit word was faster on plain text, 714-766 ns,
// and slower on JSON, 2,337-2,532 ns, whose quotes come every few bytes.)
var jsonPlainByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()
