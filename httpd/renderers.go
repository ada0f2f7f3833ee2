package httpd

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
)

// renderers serves ui.custom_renderers_path byte for byte with a
// content-hash ETag. The file is read on the blocking-I/O pool on
// each request so an operator can edit it without a restart.
func (s *UIServer) renderers(w http.ResponseWriter, r *http.Request) {
	path := s.cfg.UI.CustomRenderersPath
	if path == "" {
		writeJSON(w, http.StatusNotFound, map[string]any{
			"error": "not_found", "detail": "ui.custom_renderers_path is not set",
			"enabled": false, "reason": "ui.custom_renderers_path is not set",
		})
		return
	}
	var data []byte
	err := s.app.IO().Do(r.Context(), func() {
		var rerr error
		data, rerr = os.ReadFile(path)
		if rerr != nil {
			data = nil
		}
	})
	if err != nil {
		return
	}
	if data == nil {
		writeJSON(w, http.StatusNotFound, map[string]any{
			"error": "not_found", "detail": "the custom renderers module cannot be read",
			"enabled": true, "reason": "the file named by ui.custom_renderers_path cannot be read",
		})
		return
	}
	sum := sha256.Sum256(data)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	w.Header().Set("ETag", etag)
	w.Header().Set("Cache-Control", "no-cache")
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(data)
}
