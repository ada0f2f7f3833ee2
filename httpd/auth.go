package httpd

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// tokenCheck compares presented tokens with a configured one in constant
// time, both hashed first so the token's length does not leak either.
type tokenCheck struct {
	set  bool
	hash [32]byte
}

func newTokenCheck(token string) tokenCheck {
	if token == "" {
		return tokenCheck{}
	}
	return tokenCheck{set: true, hash: hashToken(token)}
}

// matches reports whether presented is the configured token; a blank one
// never matches (?token=%20 opens nothing).
func (t tokenCheck) matches(presented string) bool {
	return strings.TrimSpace(presented) != "" && t.equal(hashToken(presented))
}

func (t tokenCheck) equal(h [32]byte) bool {
	return t.set && subtle.ConstantTimeCompare(h[:], t.hash[:]) == 1
}

func hashToken(tok string) [32]byte { return sha256.Sum256([]byte(tok)) }

// bearer returns the token of an "Authorization: Bearer <token>" header.
func bearer(r *http.Request) string {
	v := r.Header.Get("Authorization")
	if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		return strings.TrimSpace(v[7:])
	}
	return ""
}

// uiToken returns the UI token a request presents: the Authorization header,
// else the ?token= query parameter (browser navigation, module imports).
func uiToken(r *http.Request) string {
	if t := bearer(r); t != "" {
		return t
	}
	return r.URL.Query().Get("token")
}

func isPublic(path string) bool {
	return path == "/healthz" || path == "/readyz" || strings.HasPrefix(path, "/api/v1/peer/")
}

// requireToken gates every route but the public ones when a token is set.
func requireToken(check tokenCheck, next http.Handler) http.Handler {
	if !check.set {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isPublic(r.URL.Path) || check.matches(uiToken(r)) || isCORSPreflight(r) && isCORSRoute(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="svc"`)
		detail := "missing UI token: send Authorization: Bearer <token> or ?token=<token>"
		if uiToken(r) != "" {
			detail = "wrong UI token"
		}
		writeError(w, http.StatusUnauthorized, "unauthorized", detail)
	})
}

func isCORSRoute(path string) bool {
	switch path {
	case "/api/v1/debug/trace", "/api/v1/debug/trace-by-label", "/api/v1/debug/databases":
		return true
	}
	return false
}

// isCORSPreflight reports an OPTIONS preflight (no token on a CORS route).
func isCORSPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != ""
}
