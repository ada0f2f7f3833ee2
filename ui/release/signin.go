package release

import (
	"bytes"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"slices"

	"svc/ui"
)

// signInTemplate works without JavaScript: a GET form reloading the page
// with ?token=. With a bundle, signin.js retries a token kept in the tab.
var signInTemplate = template.Must(template.New("signin").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>Sign in · svc</title>
{{- if .Assets}}
<link rel="stylesheet" href="{{.Assets}}/style.css">
<script type="module" src="{{.Assets}}/signin.js"></script>
{{- end}}
</head>
<body>
<main class="signin">
<h1>Sign in</h1>
<p>This worker's UI needs its operator token (<code>ui.auth_token</code>).</p>
{{- if .Failed}}
<p class="error" role="alert">That token was not accepted.</p>
{{- end}}
<form method="get">
{{- range .Keep}}
<input type="hidden" name="{{.Name}}" value="{{.Value}}">
{{- end}}
<label for="token">UI token</label>
<input id="token" name="token" type="password" autocomplete="current-password" required>
<button type="submit">Sign in</button>
</form>
</main>
</body>
</html>
`))

// keptParam is a query parameter carried through the sign-in form.
type keptParam struct{ Name, Value string }

const maxKeptParams = 32

// SignInPage returns the sign-in page for a page request without a valid
// UI token: tag is the release served ("": no style or script), failed
// says a token was refused, and query's parameters but the token are kept
// as hidden fields, so signing in lands on the page asked for.
func SignInPage(tag string, failed bool, query url.Values) []byte {
	data := struct {
		Assets string
		Failed bool
		Keep   []keptParam
	}{Failed: failed}
	for _, k := range slices.Sorted(maps.Keys(query)) {
		if k == "token" {
			continue
		}
		for _, v := range query[k] {
			if len(data.Keep) < maxKeptParams {
				data.Keep = append(data.Keep, keptParam{k, v})
			}
		}
	}
	if ui.CheckTag(tag) == nil {
		data.Assets = AssetsPath(tag)
	}
	var b bytes.Buffer
	if err := signInTemplate.Execute(&b, data); err != nil {
		panic(err) // the template and its data are fixed
	}
	return b.Bytes()
}

// WriteSignIn answers a page request that lacks a valid UI token: 401 with
// WWW-Authenticate, the security headers and SignInPage, never cached.
func WriteSignIn(w http.ResponseWriter, r *http.Request, tag string, failed bool) {
	h := w.Header()
	SetSecurityHeaders(h, nil)
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("WWW-Authenticate", `Bearer realm="svc"`)
	w.WriteHeader(http.StatusUnauthorized)
	if r.Method != http.MethodHead {
		w.Write(SignInPage(tag, failed, r.URL.Query()))
	}
}
