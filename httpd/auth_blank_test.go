package httpd

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// A blank token, configured or presented, opens nothing: a UI whose
// ui.auth_token is " " (config validation refuses it; a config built in
// code is not validated) still answers ?token=%20 and "Bearer  " with 401.
func TestBlankTokenNeverMatches(t *testing.T) {
	t.Parallel()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	for _, configured := range []string{" ", "\t", "a-real-token-0123456789"} {
		h := requireToken(newTokenCheck(configured), ok)
		for _, req := range []struct{ name, url, auth string }{
			{"query space", "/api/v1/identity?token=%20", ""},
			{"query tab", "/api/v1/identity?token=%09", ""},
			{"query empty", "/api/v1/identity?token=", ""},
			{"bearer spaces", "/api/v1/identity", "Bearer   "},
		} {
			r := httptest.NewRequest("GET", req.url, nil)
			if req.auth != "" {
				r.Header.Set("Authorization", req.auth)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusUnauthorized {
				t.Errorf("configured %q, %s: status %d, want 401", configured, req.name, w.Code)
			}
		}
	}
}
