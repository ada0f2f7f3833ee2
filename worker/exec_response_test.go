package worker

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"svc/worker/model"
	"testing"
)

// encodeLikeIngress is the ingress's reflection encoding (httpd.writeJSON
// before the appender), without its newline.
func encodeLikeIngress(t testing.TB, v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func TestExecResponseAppendJSONMatchesEncoder(t *testing.T) {
	texts := []string{"", "plain", `quote " and \ back`, "<html> & 'x'", "tab\tnl\nret\rbs\bff\f", "\x00\x01\x1f\x7f",
		"é ü 日本 🙂", "bad \xff\xfe utf-8 \xc3", "line sep \u2028 para \u2029", strings.Repeat("0123456789abcdef", 64)}
	// Every byte that needs care, at the start, middle and end of runs of
	// plain text.
	for _, special := range []string{`"`, `\`, "\x00", "\x1f", " ", "\x7f", "\x80", "é", "\u2028", "\xff"} {
		for at := range 17 {
			texts = append(texts, strings.Repeat("x", at)+special+strings.Repeat("y", 24-at))
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 { // random bytes, mostly invalid UTF-8 and controls
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		texts = append(texts, string(b))
	}
	for i, s := range texts {
		r := ExecResponse{RequestID: s, Status: model.StatusOK, Tasks: []ExecTaskResult{
			{TaskID: "t-1", Status: model.StatusOK, Output: s, OutputEncoding: "utf-8", DurationMS: int64(i), Attempts: 1},
			{TaskID: s, Status: model.StatusFailed, Output: "", OutputEncoding: "base64", DurationMS: -1, Attempts: 3, Error: s + "!"},
		}}
		if i%3 == 0 {
			r.Error, r.Status = "failed: "+s, model.StatusFailed
		}
		if got, want := r.AppendJSON(nil), encodeLikeIngress(t, r); !bytes.Equal(got, want) {
			t.Fatalf("text %q:\nAppendJSON %s\nencoding/json %s", s, got, want)
		}
	}
	for _, r := range []ExecResponse{{}, {RequestID: "r", Tasks: []ExecTaskResult{}}} {
		if got, want := r.AppendJSON(nil), encodeLikeIngress(t, r); !bytes.Equal(got, want) {
			t.Fatalf("%+v:\nAppendJSON %s\nencoding/json %s", r, got, want)
		}
	}
}

// BenchmarkExecResponseJSON encodes the ingress's answer to one 1 KiB
// task both ways.
func BenchmarkExecResponseJSON(b *testing.B) {
	r := ExecResponse{RequestID: "3f1c9a2b7d10-17", Status: model.StatusOK, Tasks: []ExecTaskResult{{TaskID: "3f1c9a2b7d10-18",
		Status: model.StatusOK, Output: strings.Repeat(`{"k":"0123456789abcdef"} `, 40), OutputEncoding: "utf-8", DurationMS: 3, Attempts: 1}}}
	b.Run("reflection", func(b *testing.B) {
		b.ReportAllocs()
		var buf bytes.Buffer
		for b.Loop() {
			buf.Reset()
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(r)
		}
	})
	plain := r
	plain.Tasks = []ExecTaskResult{{TaskID: "3f1c9a2b7d10-18", Status: model.StatusOK, Output: strings.Repeat("x", 1024), OutputEncoding: "utf-8", DurationMS: 3, Attempts: 1}}
	b.Run("plain", func(b *testing.B) { // bench/load's body, echoed
		out := make([]byte, 0, 4096)
		for b.Loop() {
			out = plain.AppendJSON(out[:0])
		}
	})
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		out := make([]byte, 0, 4096)
		for b.Loop() {
			out = r.AppendJSON(out[:0])
		}
	})
}

// FuzzExecResponseAppendJSON: AppendJSON writes the ingress encoder's
// bytes for any texts in any field.
func FuzzExecResponseAppendJSON(f *testing.F) {
	f.Add("r-1", "ok", "", "t-1", "out <&> \"q\"", "utf-8", int64(3), 1, "")
	f.Add("bad \xff", "failed", "failed: \u2028", "", "\x00\x1f é", "base64", int64(-1), 0, "err\n")
	f.Fuzz(func(t *testing.T, id, status, errText, taskID, output, enc string, ms int64, attempts int, taskErr string) {
		r := ExecResponse{RequestID: id, Status: status, Error: errText, Tasks: []ExecTaskResult{
			{TaskID: taskID, Status: status, Output: output, OutputEncoding: enc, DurationMS: ms, Attempts: attempts, Error: taskErr}}}
		if got, want := r.AppendJSON([]byte("x")), append([]byte("x"), encodeLikeIngress(t, r)...); !bytes.Equal(got, want) {
			t.Fatalf("%+v:\nAppendJSON %s\nencoding/json %s", r, got, want)
		}
	})
}
