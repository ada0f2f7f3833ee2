package fastjson

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// FuzzDecodeResult: DecodeResult gives exactly what json.Unmarshal into a
// zero Result gives, for any header; whenever the hand decoder takes one,
// encoding/json takes it too, with the same result.
func FuzzDecodeResult(f *testing.F) {
	for _, h := range []string{
		`{"type":"result","task_id":"t-1","attempt":1,"status":"ok","annotations":[{"kind":"echo.size","payload":{"attempt":1,"bytes":1024}}]}`,
		` { "type" : "result" , "status":"failed","error":"no <&>","labels":{"a":"b","é":"ü"},"annotations":[]} `,
		`{"type":"result","status":"ok","annotations":[{"payload":{"s":"\"}]{","n":[1,{"x":null}]},"kind":"k"},{"kind":"j"}],"labels":{}}`,
		`{"type":"result","attempt":-0,"status":"retry"}`,
		`{"type":"result","attempt":01}`,
		`{"type":"result","attempt":1e3}`,
		`{"Type":"result"}`,
		`{"type":"result","type":"x"}`,
		`{"type":"res\u0075lt"}`,
		`{"type":"result","annotations":[{"kind":"k","payload":{"a":}}]}`,
		`{"type":"result","labels":{"a":null}}`,
		`{"type":"result"}x`,
	} {
		f.Add([]byte(h))
	}
	f.Fuzz(func(t *testing.T, header []byte) {
		var got, want Result
		gotErr, wantErr := DecodeResult(header, &got), json.Unmarshal(header, &want)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("%q: DecodeResult error %v, json.Unmarshal error %v", header, gotErr, wantErr)
		}
		if gotErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\nDecodeResult %+v\njson.Unmarshal %+v", header, got, want)
		}
		if _, ok := scanResult(header); ok && wantErr != nil {
			t.Fatalf("hand decoder took %q, encoding/json refuses it: %v", header, wantErr)
		}
	})
}

// TestScanResultTakesTheCommonShape: the headers the example executors
// write are decoded by hand (else every task pays encoding/json again, and
// DecodeResult stops paying for its code).
func TestScanResultTakesTheCommonShape(t *testing.T) {
	for _, h := range []string{
		`{"type":"result","task_id":"3f1c9a2b7d10-17","attempt":1,"status":"ok","annotations":[{"kind":"echo.size","payload":{"attempt":1,"bytes":1024}}]}`,
		`{"type":"ready","protocol":2}`,
		`{"type":"result","status":"failed","error":"the message asked to fail","labels":{"tenant":"a"}}`,
	} {
		_, ok := scanResult([]byte(h))
		if want := !strings.Contains(h, "protocol"); ok != want {
			t.Errorf("%s: taken by hand = %v, want %v", h, ok, want)
		}
	}
}
