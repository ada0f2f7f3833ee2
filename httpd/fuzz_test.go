package httpd

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"svc/worker/model"
)

// FuzzWSSubscribe: no client frame makes the subscription parser panic,
// and an accepted one names only known streams.
func FuzzWSSubscribe(f *testing.F) {
	for _, s := range []string{`{"subscribe":["tasks","events","state"],"event_types":["annotation"]}`, `{"subscribe":[]}`, `{}`, `[`, `{"subscribe":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		filter, req, err := parseSubscribe(msg)
		if err != nil {
			return
		}
		if req == nil || req.Subscribe == nil {
			t.Fatalf("accepted %q without a subscribe list", msg)
		}
		if n := len(req.Subscribe); n > 0 && !filter.any() {
			t.Fatalf("accepted %q naming %d streams, but the filter sends nothing", msg, n)
		}
	})
}

// fuzzRunner is a task runner that answers at once, so the fuzzer exercises
// the ingress's request handling rather than process start-up.
type fuzzRunner struct{}

func (fuzzRunner) Run(_ context.Context, t *model.Task) model.TaskResult {
	return model.TaskResult{Task: t, Status: model.StatusOK, Output: t.Input, Attempts: 1}
}

// FuzzIngressRequest: whatever headers and body a client sends, the ingress
// answers with one of its documented statuses and a JSON body, and never
// panics.
func FuzzIngressRequest(f *testing.F) {
	f.Add("tok", "X-Svc-Label-Customer", "acme", "k", []byte("hello"))
	f.Add("", "Origin", "null", "", []byte{})
	f.Add("wrong", "X-Svc-Label-", "\x00", "\xff", []byte("{\"customer\":1}"))
	cfg := testConfig(f, "/bin/cat")
	cfg.Sources.HTTP.Clients = nil
	cfg.Handler.LabelFields = []string{"customer"}
	s, b := buildStack(f, cfg, BuildOptions{Runner: fuzzRunner{}})
	f.Cleanup(b.Close)
	h := s.ingress.srv.Handler
	ok := map[int]bool{200: true, 400: true, 401: true, 403: true, 404: true, 405: true, 408: true, 413: true, 429: true, 502: true, 503: true, 504: true}
	f.Fuzz(func(t *testing.T, token, hname, hvalue, key string, body []byte) {
		req := httptest.NewRequest("POST", "/v1/process", strings.NewReader(string(body)))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if hname != "" && http.CanonicalHeaderKey(hname) != "" {
			req.Header[http.CanonicalHeaderKey(hname)] = []string{hvalue}
		}
		if key != "" {
			req.Header.Set("X-Svc-Key", key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if !ok[rec.Code] || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
			t.Fatalf("answer %d %q %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body.String())
		}
	})
}
