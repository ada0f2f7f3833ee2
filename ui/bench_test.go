package ui

import (
	"fmt"
	"testing"
)

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
