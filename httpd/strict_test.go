package httpd

import (
	"strings"
	"testing"
)

// TestStrictInput: requests that used to be half-understood are refused
// with a 400 that says what is wrong.
func TestStrictInput(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "/bin/cat")
	cfg.UI.ConsumePause.Enabled = true
	s := startStack(t, cfg)
	for _, c := range []struct{ method, path, body, want string }{
		{"POST", "/api/v1/debug/consume-pause", `{"duration_seconds":"30"}`, `duration_seconds must be an integer from 1 to 3600, got \"30\"`},
		{"POST", "/api/v1/debug/consume-pause", `{"duration_seconds":30.5}`, "duration_seconds must be an integer"},
		{"POST", "/api/v1/debug/consume-pause", `{}`, "duration_seconds is required"},
		{"POST", "/api/v1/debug/probe", `{"key":"k"}`, "payload is required"},
		{"POST", "/api/v1/debug/probe", `{"payload":"x","extra":1}`, "unknown field"},
		{"POST", "/api/v1/debug/probe", `{"payload":"!!","payload_encoding":"base64"}`, "payload is not valid base64: illegal base64 data at input byte 0"},
		{"POST", "/api/v1/debug/probe", `{"payload":"x","key":"k","key_encoding":"hex"}`, `key encoding \"hex\" is not utf-8 or base64`},
		{"POST", "/api/v1/debug/probe", `{"payload":"x","headers":[{"key":"h","value":"/w","value_encoding":"base64"}]}`, "headers[0].value is not valid base64"},
		{"GET", "/api/v1/events?types=bogus", "", `types: \"bogus\" is not an event type; known types: task_received`},
		{"GET", "/api/v1/debug/kafka/source/messages?from_ts=0&limit=0", "", "limit must be at least 1"},
		{"GET", "/api/v1/debug/kafka/source/messages?from_ts=abc", "", `"detail":"from_ts must be an integer"`},
		{"GET", "/api/v1/debug/trace-by-label", "", "name is required"},
	} {
		r := do(t, c.method, s.uiURL+c.path, c.body)
		if r.status != 400 || !strings.Contains(r.body, c.want) {
			t.Errorf("%s %s %s = %d %s, want 400 containing %q", c.method, c.path, c.body, r.status, r.body, c.want)
		}
	}
	if r := do(t, "POST", s.uiURL+"/api/v1/debug/probe", `{"payload":""}`); r.status != 200 {
		t.Errorf("probe with an empty payload = %d %s, want 200 (an empty message is allowed when asked for)", r.status, r.body)
	}
}

// TestTraceByLabelWithoutValue: value is optional; without it every task
// carrying the label matches.
func TestTraceByLabelWithoutValue(t *testing.T) {
	t.Parallel()
	s := startStack(t, testConfig(t, "/bin/cat"))
	for _, v := range []string{"acme", "globex"} {
		if r := do(t, "POST", s.inURL+"/v1/process", "x", "X-Svc-Label-Customer", v); r.status != 200 {
			t.Fatalf("ingress = %d %s", r.status, r.body)
		}
	}
	if r := do(t, "POST", s.inURL+"/v1/process", "x"); r.status != 200 {
		t.Fatalf("ingress = %d %s", r.status, r.body)
	}
	for q, want := range map[string]int{"name=customer": 2, "name=customer&value=acme": 1, "name=customer&value=": 0} {
		r := do(t, "GET", s.uiURL+"/api/v1/debug/trace-by-label?"+q, "")
		if got := strings.Count(r.body, `"task_id"`); r.status != 200 || got != want {
			t.Errorf("trace-by-label?%s = %d with %d tasks, want 200 with %d\n%s", q, r.status, got, want, r.body)
		}
	}
}

// TestErrorDetailsReadAsWritten: JSON answers do not escape < and > (a
// detail that says "Bearer <token>" shows just that).
func TestErrorDetailsReadAsWritten(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "/bin/cat")
	cfg.UI.AuthToken = "tok-0123456789abcdef"
	s := startStack(t, cfg)
	r := do(t, "GET", s.uiURL+"/api/v1/config", "")
	if r.status != 401 || !strings.Contains(r.body, "Bearer <token>") {
		t.Errorf("401 body = %s, want the detail to read Bearer <token>", r.body)
	}
}
