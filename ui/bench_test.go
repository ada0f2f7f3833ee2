package ui

import (
	"bytes"
	"fmt"
	"io"
	"net/http/httptest"
	"testing"
)

func BenchmarkPack(b *testing.B) {
	var size int
	for b.Loop() {
		var buf bytes.Buffer
		if err := writeArchive(&buf, Embedded(), EmbeddedTag); err != nil {
			b.Fatal(err)
		}
		size = buf.Len()
	}
	b.ReportMetric(float64(size), "archive_bytes")
}

func BenchmarkUnpack(b *testing.B) {
	var buf bytes.Buffer
	if err := writeArchive(&buf, Embedded(), EmbeddedTag); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := unpackArchive(bytes.NewReader(buf.Bytes()), b.TempDir()); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPagesServe(b *testing.B) {
	p, err := NewPages(Embedded(), EmbeddedTag, PagesOptions{Slugs: []string{"orders"}})
	if err != nil {
		b.Fatal(err)
	}
	for _, path := range []string{"/live", AssetsPath(EmbeddedTag) + "/app.js", "/nowhere"} {
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

// BenchmarkValidatePages validates the largest declaration allowed:
// 20 pages of 12 widgets with 10 templated columns each.
func BenchmarkValidatePages(b *testing.B) {
	pages := make([]Page, MaxPages)
	for i := range pages {
		ws := make([]Widget, MaxWidgets)
		for j := range ws {
			w := Widget{View: ViewTable, Source: Source{Kind: SourceTasks}}
			for k := range 10 {
				w.Columns = append(w.Columns, Column{Name: fmt.Sprintf("c%d", k), LinkTemplate: "{base}/x/{value}?r={row.id}", Hint: "{row.id}"})
			}
			ws[j] = w
		}
		pages[i] = Page{Slug: fmt.Sprintf("p%d", i), Widgets: ws}
	}
	for b.Loop() {
		if err := ValidatePages(pages); err != nil {
			b.Fatal(err)
		}
	}
}
