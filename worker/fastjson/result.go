package fastjson

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// Result is the header of an executor's result frame (protocol v2,
// docs/executor.md) as the worker reads it: entries of the right shape
// only (an executor's bad entry fails the decoding; the caller then
// decodes entry by entry).
type Result struct {
	Type        string             `json:"type"`
	TaskID      string             `json:"task_id"`
	Attempt     int                `json:"attempt"`
	Status      string             `json:"status"`
	Error       string             `json:"error"`
	Annotations []Annotation       `json:"annotations"`
	Labels      map[string]*string `json:"labels"` // nil: null, not a string
	Cache       []CacheWrite       `json:"cache"`
}

// Annotation is model.Annotation (convertible to it).
type Annotation struct {
	Kind    string          `json:"kind"`
	Payload json.RawMessage `json:"payload"`
}

// CacheWrite is model.CacheWrite (convertible to it).
type CacheWrite struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	Scope string `json:"scope"`
}

// DecodeResult decodes a result header into r exactly as json.Unmarshal
// into a zero Result does (FuzzDecodeResult): by hand for the common shape
// (scanResult), else by encoding/json.
func DecodeResult(header []byte, r *Result) error {
	if f, ok := scanResult(header); ok {
		*r = f
		return nil
	}
	*r = Result{}
	return json.Unmarshal(header, r)
}

// scanResult decodes the common shape of a result header: exact
// lowercase keys, each at most once; strings without escapes, in valid
// UTF-8; an integer attempt; annotations that are objects with a string
// kind and an object payload; labels whose values are strings; no cache
// writes. It reports false for anything else.
func scanResult(header []byte) (f Result, ok bool) {
	s := scanner{b: header}
	var seen uint8
	ok = s.members(func(key []byte) bool {
		var bit uint8
		ok := false
		switch string(key) {
		case "type":
			bit = 1
			f.Type, ok = s.str()
		case "task_id":
			bit = 2
			f.TaskID, ok = s.str()
		case "attempt":
			bit = 4
			f.Attempt, ok = s.int()
		case "status":
			bit = 8
			f.Status, ok = s.str()
		case "error":
			bit = 16
			f.Error, ok = s.str()
		case "annotations":
			bit = 32
			f.Annotations, ok = s.annotations()
		case "labels":
			bit = 64
			f.Labels, ok = s.labels()
		}
		// default: cache writes, unknown keys, keys in other cases
		ok = ok && seen&bit == 0
		seen |= bit
		return ok
	})
	s.space()
	return f, ok && s.i == len(s.b)
}

// scanner reads JSON tokens from b at i.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// byte consumes c (after whitespace) if it comes next.
func (s *scanner) byte(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// members reads an object, calling value after each member's key (the
// key's bytes, compared as string(key), which does not allocate) to read
// its value. It reports false when the object or a value is malformed.
func (s *scanner) members(value func(key []byte) bool) bool {
	if !s.byte('{') {
		return false
	}
	for first := true; ; first = false {
		if s.byte('}') {
			return true
		}
		if !first && !s.byte(',') {
			return false
		}
		key, ok := s.raw()
		if !ok || !s.byte(':') || !value(key) {
			return false
		}
	}
}

// raw returns the bytes of a string without escapes or control
// characters, in valid UTF-8.
func (s *scanner) raw() ([]byte, bool) {
	if !s.byte('"') {
		return nil, false
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			r := s.b[start:s.i]
			s.i++
			return r, utf8.Valid(r)
		case c == '\\' || c < 0x20:
			return nil, false
		}
		s.i++
	}
	return nil, false
}

func (s *scanner) str() (string, bool) {
	r, ok := s.raw()
	switch string(r) { // the values every result carries, without a copy
	case "result":
		return "result", ok
	case "ok":
		return "ok", ok
	case "retry":
		return "retry", ok
	case "failed":
		return "failed", ok
	}
	return string(r), ok
}

// int is an integer without fraction or exponent that fits an int.
func (s *scanner) int() (int, bool) {
	s.space()
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	digits := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	if s.i == digits || (s.b[digits] == '0' && s.i-digits > 1) {
		return 0, false
	}
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	n, err := strconv.Atoi(string(s.b[start:s.i]))
	return n, err == nil
}

// annotations is an array of {"kind": string, "payload": object}.
func (s *scanner) annotations() ([]Annotation, bool) {
	if !s.byte('[') {
		return nil, false
	}
	out := []Annotation{}
	if s.byte(']') {
		return out, true
	}
	for {
		var a Annotation
		var seen uint8
		ok := s.members(func(key []byte) (ok bool) {
			switch {
			case string(key) == "kind" && seen&1 == 0:
				seen |= 1
				a.Kind, ok = s.str()
				return ok
			case string(key) == "payload" && seen&2 == 0:
				seen |= 2
				a.Payload, ok = s.object()
				return ok
			}
			return false
		})
		if !ok {
			return nil, false
		}
		out = append(out, a)
		if s.byte(']') {
			return out, true
		}
		if !s.byte(',') {
			return nil, false
		}
	}
}

// object returns the bytes of a JSON object, checked valid.
func (s *scanner) object() (json.RawMessage, bool) {
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return nil, false
	}
	start, depth, in := s.i, 0, false
	for ; s.i < len(s.b); s.i++ {
		c := s.b[s.i]
		if in {
			switch c {
			case '\\':
				s.i++
			case '"':
				in = false
			}
			continue
		}
		switch c {
		case '"':
			in = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				s.i++
				r := s.b[start:s.i:s.i]
				return r, json.Valid(r)
			}
		}
	}
	return nil, false
}

// labels is an object of string values.
func (s *scanner) labels() (map[string]*string, bool) {
	out := map[string]*string{}
	ok := s.members(func(k []byte) bool {
		v, ok := s.str()
		if _, dup := out[string(k)]; !ok || dup {
			return false
		}
		out[string(k)] = &v
		return true
	})
	if !ok {
		return nil, false
	}
	return out, true
}
