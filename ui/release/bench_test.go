package release

import (
	"bytes"
	"io"
	"net/http/httptest"
	"testing"

	"svc/ui"
)

func BenchmarkPack(b *testing.B) {
	var size int
	for b.Loop() {
		var buf bytes.Buffer
		if err := writeArchive(&buf, ui.Embedded(), ui.EmbeddedTag); err != nil {
			b.Fatal(err)
		}
		size = buf.Len()
	}
	b.ReportMetric(float64(size), "archive_bytes")
}

func BenchmarkUnpack(b *testing.B) {
	var buf bytes.Buffer
	if err := writeArchive(&buf, ui.Embedded(), ui.EmbeddedTag); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := unpackArchive(bytes.NewReader(buf.Bytes()), b.TempDir()); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPagesServe(b *testing.B) {
	p, err := NewPages(ui.Embedded(), ui.EmbeddedTag, PagesOptions{Slugs: []string{"orders"}})
	if err != nil {
		b.Fatal(err)
	}
	for _, path := range []string{"/live", AssetsPath(ui.EmbeddedTag) + "/app.js", "/nowhere"} {
		b.Run(path, func(b *testing.B) {
			r := httptest.NewRequest("GET", path, nil)
			for b.Loop() {
				w := httptest.NewRecorder()
				p.ServeHTTP(w, r)
				io.Copy(io.Discard, w.Body)
			}
		})
	}
}
