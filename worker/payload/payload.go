// Package payload is the one UTF-8-or-base64 rule for every JSON surface
// that shows or accepts bytes: Kafka records of the read API, task output
// and stderr, message keys in events and task rows, cache rows on the peer
// and debug routes, probe requests, and the executor's key and cache
// variables. Bytes that are valid UTF-8 travel as themselves; any other
// bytes travel as standard base64, and an encoding field next to the text
// says which.
//
// It imports only the standard library so that the worker core can use it
// without depending on the Kafka read API around it.
package payload

import (
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"
)

// Encodings, as written in the *_encoding fields and SVC_*_ENCODING
// variables.
const (
	UTF8   = "utf-8"
	Base64 = "base64"
)

// ErrUnknownEncoding is wrapped by Decode's error for an encoding other than
// UTF8 and Base64, so that a caller can name the encoding field rather than
// the text field.
var ErrUnknownEncoding = errors.New("is not utf-8 or base64")

// Encode returns b as text with its encoding: b itself and UTF8 when b is
// valid UTF-8 (a NUL included: JSON writes it as \u0000), else its standard
// base64 and Base64.
func Encode(b []byte) (text, encoding string) {
	return encode(b, false)
}

// EncodeEnv is Encode for bytes handed to an executor in its environment
// (SVC_KEY, SVC_CACHE_*): an environment string cannot hold a NUL byte, so
// valid UTF-8 with a NUL is base64 as well. The persistent executor's task
// frame uses it for the key too, so that an executor sees one key whichever
// mode runs it.
func EncodeEnv(b []byte) (text, encoding string) {
	return encode(b, true)
}

func encode(b []byte, nulIsBinary bool) (string, string) {
	if utf8.Valid(b) && !(nulIsBinary && slices.Contains(b, 0)) {
		return string(b), UTF8
	}
	return base64.StdEncoding.EncodeToString(b), Base64
}

// Decode returns the bytes that text in encoding stands for. Its errors
// read as the end of a sentence about the field that held text, so that a
// caller prefixes the field's name: "payload " + err gives `payload is not
// valid base64: ...` or `payload encoding "x" is not utf-8 or base64`.
// An empty encoding is an error: a surface where it is optional treats ""
// as UTF8 before calling.
func Decode(text, encoding string) ([]byte, error) {
	switch encoding {
	case UTF8:
		return []byte(text), nil
	case Base64:
		b, err := base64.StdEncoding.DecodeString(text)
		if err != nil {
			return nil, fmt.Errorf("is not valid base64: %w", err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("encoding %q %w", encoding, ErrUnknownEncoding)
}

// MaxDecodedLen bounds the length of what Decode returns for text in
// encoding, without decoding: a receiver checks it against its own limit
// before it allocates. It is 0 for an encoding Decode refuses.
func MaxDecodedLen(text, encoding string) int {
	switch encoding {
	case UTF8:
		return len(text)
	case Base64:
		return base64.StdEncoding.DecodedLen(len(text))
	}
	return 0
}
