package ui

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseTemplate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in      string
		rows    []string
		bases   []string
		wantErr string
	}{
		{in: "plain text"},
		{in: ""},
		{in: "{value}"},
		{in: "{grafana}/d/x?var-id={value}&from={row.ts_ms}", rows: []string{"ts_ms"}, bases: []string{"grafana"}},
		{in: "{a_1}{row.B-2}{row._x}", rows: []string{"B-2", "_x"}, bases: []string{"a_1"}},
		{in: "{value", wantErr: "'{' at byte 0 is not closed"},
		{in: "a{b{c}}", wantErr: "'{' at byte 1 is not closed"},
		{in: "a}b", wantErr: "'}' at byte 1 has no '{'"},
		{in: "{}", wantErr: "unknown token shape {}"},
		{in: "{row.}", wantErr: "unknown token shape {row.}"},
		{in: "{row.a b}", wantErr: "unknown token shape"},
		{in: "{Value}", wantErr: "unknown token shape {Value}"},
		{in: "{1base}", wantErr: "unknown token shape"},
		{in: "{ value }", wantErr: "unknown token shape"},
		{in: strings.Repeat("x", MaxTemplateLen+1), wantErr: "longer than 2048 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			tp, err := ParseTemplate(tc.in)
			if tc.wantErr != "" {
				if err == nil || !errors.Is(err, ErrTemplate) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseTemplate(%q) error = %v, want ErrTemplate containing %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTemplate(%q) = %v", tc.in, err)
			}
			if got := tp.RowFields(); !reflect.DeepEqual(got, tc.rows) {
				t.Errorf("RowFields = %v, want %v", got, tc.rows)
			}
			if got := tp.Bases(); !reflect.DeepEqual(got, tc.bases) {
				t.Errorf("Bases = %v, want %v", got, tc.bases)
			}
		})
	}
}

func TestMissingBases(t *testing.T) {
	t.Parallel()
	pages := onePage(tableWidget(), Widget{View: ViewTable, Source: Source{Kind: SourceTasks}, Columns: Columns{{Name: "a", Hint: "{wiki}", LinkTemplate: "{broken"}}})
	pd := details(itemsField(), ProbeField{Name: "s", View: ViewBadge, LinkTemplate: "{docs}/x", BadgeColors: map[string]string{"a": "red"}},
		ProbeField{Name: "t", View: ViewTable, RowFields: []string{"a"}, Detail: &Detail{Title: "{jira}", Elements: []Element{{View: ViewLinks, Links: []Link{{Template: "{kibana}/{row.a}"}, {Template: "{grafana}/{row.a}"}}}}}})
	got := MissingBases(map[string]string{"grafana": "https://g", "kibana": "https://k"}, pages, pd)
	want := []string{"docs", "jira", "shop", "wiki"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("MissingBases = %v, want %v", got, want)
	}
	if got := MissingBases(map[string]string{"shop": "https://s"}, onePage(tableWidget()), ProbeDetails{}); len(got) != 0 {
		t.Errorf("MissingBases with every base = %v, want none", got)
	}
}

func TestCheckLinkBases(t *testing.T) {
	t.Parallel()
	got := CheckLinkBases(map[string]string{
		"grafana": "https://grafana.example/", "wiki": "http://wiki", "docs": "https://docs.example",
		"Bad": "https://x", "ftp": "ftp://files", "js": "javascript:alert(1)",
	})
	want := []string{
		`ui.link_bases.Bad: base name must match ^[a-z][a-z0-9_]*$`,
		`ui.link_bases.docs: the base name "docs" is reserved for the worker's own docs site`,
		`ui.link_bases.ftp: "ftp://files" must start with http:// or https://`,
		`ui.link_bases.js: "javascript:alert(1)" must start with http:// or https://`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("CheckLinkBases =\n%v\nwant\n%v", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func FuzzParseTemplate(f *testing.F) {
	for _, s := range []string{"{value}", "{a}/{row.b}?{value}", "{", "}", "{row.}", "a{b}c{d}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tp, err := ParseTemplate(s)
		if err != nil {
			return
		}
		for _, b := range tp.Bases() {
			if !basePattern.MatchString(b) {
				t.Fatalf("ParseTemplate(%q) base %q does not match %s", s, b, basePattern)
			}
		}
		for _, r := range tp.RowFields() {
			if !rowFieldPattern.MatchString(r) {
				t.Fatalf("ParseTemplate(%q) row field %q does not match %s", s, r, rowFieldPattern)
			}
		}
	})
}
