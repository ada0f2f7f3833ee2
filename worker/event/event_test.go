package event

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// The per-task payloads are encoded by hand; each gives exactly the bytes
// json.Marshal gives, so stored events and the recorder's summary checks
// see no difference.
func TestPayloadAppendersMatchMarshal(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "kafka", "a\"b\\c", "<html>&", "\x00\x1f\x7f", "ünï", "\u2028\u2029", "\xff\xfe", strings.Repeat("x", 3000)} {
		checkPayloadAppenders(t, s, 7, -3)
	}
}

func FuzzPayloadAppenders(f *testing.F) {
	f.Add("kafka", int64(12), int64(-1))
	f.Add("\xffa<b>\u2028", int64(0), int64(1<<40))
	f.Fuzz(func(t *testing.T, s string, n, m int64) { checkPayloadAppenders(t, s, n, m) })
}

func checkPayloadAppenders(t *testing.T, s string, n, m int64) {
	t.Helper()
	part, off, code := int32(n), m, int(n)
	for _, p := range []interface{ AppendJSON([]byte) []byte }{
		Received{}, Received{Source: s, Alias: s, Partition: &part, Offset: &off, Key: s, KeyEncoding: s, InputSizeBytes: m},
		Received{Source: s, InputSizeBytes: 1024},
		Attempt{}, Attempt{Attempt: int(n), Status: s, ExitCode: &code, DurationMS: m, OutputSizeBytes: n, Error: s, StderrTail: s, StdoutTail: s},
		Attempt{Attempt: 1, Status: s, ExitCode: &code},
		Delivered{}, Delivered{OutputSizeBytes: m, Sink: s},
	} {
		want, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.AppendJSON(nil); string(got) != string(want) {
			t.Errorf("%T AppendJSON = %s, json.Marshal = %s", p, got, want)
		}
	}
}

func TestDropOKTail(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{`{"attempt":1,"status":"ok","exit_code":0,"stdout_tail":"a\"b,\"stdout_tail\":\"c"}`, `{"attempt":1,"status":"ok","exit_code":0}`},
		{`{"attempt":1,"status":"ok","exit_code":0,"future":[1],"stdout_tail":"x\\"}`, `{"attempt":1,"status":"ok","exit_code":0,"future":[1]}`},
		{`{"attempt":2,"status":"ok","stdout_tail":"x"}`, ``},                   // a retry keeps everything
		{`{"attempt":1,"status":"failed","stdout_tail":"x"}`, ``},               // a failure too
		{`{"attempt":1,"status":"ok","stderr_tail":"w","stdout_tail":"x"}`, ``}, // and stderr
		{`{"attempt":1,"status":"ok","stdout_tail":"x","later":1}`, ``},         // not the last member
		{`{"attempt":1,"status":"ok","stdout_tail":"x\"}`, ``},                  // not one string
		{`{"attempt":1,"status":"ok","stdout_tail":"x" ,"y":"z"}`, ``},          // two members
	} {
		e := &Event{Type: TypeExecutorFinished, Payload: json.RawMessage(c.in)}
		got := string(DropOKTail(e).Payload)
		want := c.want
		if want == "" {
			want = c.in
		}
		if got != want {
			t.Errorf("DropOKTail(%s) = %s, want %s", c.in, got, want)
		}
	}
}

// TestEventAppendJSONMatchesMarshal: the Live stream's event encoding is
// json.Marshal's, byte for byte, for every kind of label and payload
// (whitespace to compact, HTML characters and U+2028 to escape, escaped
// quotes, nested values, no labels, no payload).
func TestEventAppendJSONMatchesMarshal(t *testing.T) {
	payloads := []string{
		"", `{}`, `[]`, `{"a":1}`, `{"a": 1}`, "{\n\"a\":1}", `{"s":"a b"}`, `{"s":"<b>"}`, `{"s":"x&y"}`,
		`{"s":"\u2028"}`, "{\"s\":\"\u2028\"}", `{"s":"q\"uote \\ back"}`, `{"s":"\\"}`, `{"n":[1,2,{"x":null}],"t":true}`,
		`{"s":"é日"}`, `[1, 2]`, `{"a":"b","c":{"d":"e f"}}`, `"str"`, `12`, `null`,
		"{\"s\":\"\xff\xfe\"}", "{\"s\":\"\x7f\"}", "{\"s\":\"\xe2\x80\"}", `{"s":"\\\""}`,
	}
	rng := rand.New(rand.NewPCG(3, 5))
	alphabet := []string{"a", " ", "\"", "\\\\", "\\\"", "<", "&", "é", "\u2028", "\\n", "日", ":", ","}
	for range 300 {
		var v strings.Builder
		for range rng.IntN(10) {
			v.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		p := `{"k":"` + v.String() + `","n":[` + strconv.Itoa(rng.IntN(100)) + `]}`
		if json.Valid([]byte(p)) {
			payloads = append(payloads, p)
		}
	}
	labelSets := []map[string]string{nil, {}, {"a": "b"}, {"z": "<&>", "ü": "é\u2028", "q\"": "\\"}}
	for i, p := range payloads {
		e := Event{ID: int64(i), TSms: 1795750000000 + int64(i), Type: TypeAnnotation, Kind: "svc.<kind>",
			TaskID: "t-\"" + strconv.Itoa(i), Worker: "w-é", Labels: labelSets[i%len(labelSets)]}
		if p != "" {
			e.Payload = json.RawMessage(p)
		}
		want, err := json.Marshal(&e)
		if err != nil {
			t.Fatalf("json.Marshal(%s): %v", p, err)
		}
		got, err := e.AppendJSON(nil)
		if err != nil || string(got) != string(want) {
			t.Fatalf("AppendJSON with payload %q = %s, %v\nwant %s", p, got, err, want)
		}
	}
}

// BenchmarkEventAppendJSON: an executor annotation encoded for the Live
// stream, by hand and by encoding/json's Encoder (what the stream used).
func BenchmarkEventAppendJSON(b *testing.B) {
	e := Event{ID: 1, TSms: 1795750000000, Type: TypeAnnotation, Kind: "echo", TaskID: "t-0123456789abcdef", Worker: "speed",
		Payload: json.RawMessage(`{"bytes":1024,"note":"echoed the input as it came","sha":"0f1e2d3c4b5a69788796a5b4c3d2e1f0"}`)}
	b.Run("append", func(b *testing.B) {
		buf := make([]byte, 0, 512)
		for range b.N {
			buf, _ = e.AppendJSON(buf[:0])
		}
	})
	b.Run("encoder", func(b *testing.B) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		for range b.N {
			buf.Reset()
			_ = enc.Encode(&e)
		}
	})
}

// TestFoldExpand: a successful first attempt's lifecycle events, as the
// worker emits them, fold into a Lifecycle and expand back to the same
// events (stdout tail aside) for a Kafka row with a key, an HTTP row and a
// base64 key; anything Fold could not rebuild exactly is refused.
func TestFoldExpand(t *testing.T) {
	part, off, exit := int32(3), int64(41), 0
	kafka := TaskRow{TaskID: "t1", Worker: "w", Labels: map[string]string{"order": "7"}, Source: "kafka", Alias: "orders",
		Partition: part, Offset: off, Key: "k-7", KeyEncoding: "utf-8", Status: "ok", Attempts: 1, OutputSizeBytes: 12}
	http := TaskRow{TaskID: "t2", Worker: "w", Source: "http", Partition: -1, Offset: -1, Status: "ok", Attempts: 1}
	b64 := kafka
	b64.TaskID, b64.Key, b64.KeyEncoding = "t3", "/wA=", "base64"
	emitted := func(row TaskRow) []*Event {
		rcv := Received{Source: row.Source, Alias: row.Alias, InputSizeBytes: 1024}
		if row.Source == "kafka" {
			rcv.Partition, rcv.Offset, rcv.Key, rcv.KeyEncoding = &part, &off, row.Key, row.KeyEncoding
		}
		fin := Attempt{Attempt: 1, Status: "ok", ExitCode: &exit, DurationMS: 5, OutputSizeBytes: row.OutputSizeBytes, StdoutTail: "out"}
		ev := func(id int64, typ string, p []byte) *Event {
			return &Event{ID: id, TSms: 1000 + id, Type: typ, TaskID: row.TaskID, Worker: "w", Labels: row.Labels, Payload: p}
		}
		return []*Event{ev(100, TypeTaskReceived, rcv.AppendJSON(nil)), ev(101, TypeExecutorStarted, Attempt{Attempt: 1}.AppendJSON(nil)),
			ev(103, TypeExecutorFinished, fin.AppendJSON(nil))}
	}
	for _, row := range []TaskRow{kafka, http, b64} {
		evs := emitted(row)
		l, ok := Fold(evs, &row)
		if !ok {
			t.Fatalf("%s: Fold refused the worker's own events", row.TaskID)
		}
		got := l.Expand(&row)
		for i, e := range got {
			want := DropOKTail(evs[i])
			if e.ID != want.ID || e.TSms != want.TSms || e.Type != want.Type || string(e.Payload) != string(want.Payload) ||
				e.TaskID != row.TaskID || e.Worker != "w" || e.Labels == nil || len(e.Labels) != len(row.Labels) {
				t.Errorf("%s: expanded %+v (%s), want %+v (%s)", row.TaskID, e, e.Payload, *want, want.Payload)
			}
		}
	}
	for name, change := range map[string]func(row *TaskRow, evs []*Event){
		"retry":        func(row *TaskRow, _ []*Event) { row.Attempts = 2 },
		"failed":       func(row *TaskRow, _ []*Event) { row.Status = "failed" },
		"other labels": func(_ *TaskRow, evs []*Event) { evs[1].Labels = map[string]string{"x": "y"} },
		"other alias":  func(row *TaskRow, _ []*Event) { row.Alias = "other" },
		"stderr": func(_ *TaskRow, evs []*Event) {
			evs[2].Payload = []byte(`{"attempt":1,"status":"ok","exit_code":0,"stderr_tail":"w"}`)
		},
		"kind": func(_ *TaskRow, evs []*Event) { evs[0].Kind = "k" },
	} {
		row := kafka
		evs := emitted(row)
		change(&row, evs)
		if _, ok := Fold(evs, &row); ok {
			t.Errorf("%s: Fold folded events it cannot rebuild exactly", name)
		}
	}
}

// FuzzAppendJSONString: the one string escaper writes what encoding/json
// writes, with HTML escaping (json.Marshal) and without (an Encoder with
// SetEscapeHTML(false)), for any string, after whatever b held.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", `quote " and \ back`, "<html> & 'x'", "tab\tnl\nret\rbs\bff\f", "\x00\x01\x1f\x7f",
		"é ü 日本 🙂", "bad \xff\xfe utf-8 \xc3", "line sep \u2028 para \u2029"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, html := range []bool{true, false} {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(html)
			if err := enc.Encode(s); err != nil {
				t.Fatal(err)
			}
			want := append([]byte("prefix"), bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
			got := AppendJSONStringNoHTML([]byte("prefix"), s)
			if html {
				got = AppendJSONString([]byte("prefix"), s)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("html %v, %q:\n got %s\nwant %s", html, s, got, want)
			}
		}
	})
}
