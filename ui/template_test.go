package ui

import (
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
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
			if tp.String() != tc.in {
				t.Errorf("String = %q, want %q", tp.String(), tc.in)
			}
		})
	}
}

func TestExpand(t *testing.T) {
	t.Parallel()
	bases := map[string]string{"grafana": "https://grafana.example/", "shop": "https://shop.example/admin//"}
	row := map[string]any{"sku": "A/B 1", "qty": float64(3), "big": float64(12345678901), "ok": true, "nil": nil, "tags": []any{"x", "y"}, "name": "Zoë & 李"}
	cases := []struct {
		name     string
		tmpl     string
		value    any
		url      string // "" = unresolved
		text     string // "" = unresolved
		textOnly bool
	}{
		{name: "value in path", tmpl: "{shop}/sku/{value}", value: "A/B 1", url: "https://shop.example/admin/sku/A%2FB%201", text: "https://shop.example/admin/sku/A/B 1"},
		{name: "reserved characters", tmpl: "https://x.test/q?v={value}", value: "a&b=c?d#e%f+g", url: "https://x.test/q?v=a%26b%3Dc%3Fd%23e%25f%2Bg", text: "https://x.test/q?v=a&b=c?d#e%f+g"},
		{name: "unreserved kept", tmpl: "/x/{value}", value: "Az09-._~", url: "/x/Az09-._~", text: "/x/Az09-._~"},
		{name: "unicode", tmpl: "{grafana}/{row.name}", url: "https://grafana.example/Zo%C3%AB%20%26%20%E6%9D%8E", text: "https://grafana.example/Zoë & 李"},
		{name: "number and bool", tmpl: "/t/{row.qty}/{row.big}/{row.ok}", url: "/t/3/12345678901/true", text: "/t/3/12345678901/true"},
		{name: "list value as JSON", tmpl: "/t?tags={row.tags}", url: "/t?tags=%5B%22x%22%2C%22y%22%5D", text: `/t?tags=["x","y"]`},
		{name: "base verbatim", tmpl: "{grafana}?a=b&c={value}", value: "1 2", url: "https://grafana.example?a=b&c=1%202", text: "https://grafana.example?a=b&c=1 2"},
		{name: "missing base", tmpl: "{kibana}/{value}", value: "x"},
		{name: "docs base unset", tmpl: "{docs}/states", value: "x"},
		{name: "missing row field", tmpl: "/x/{row.colour}"},
		{name: "null row field", tmpl: "/x/{row.nil}"},
		{name: "null value", tmpl: "/x/{value}", value: nil},
		{name: "no link scheme", tmpl: "item {value}", value: "7", text: "item 7"},
		{name: "hint keeps text", tmpl: "took {value} ms for {row.sku}", value: float64(12.5), text: "took 12.5 ms for A/B 1", textOnly: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tp, err := ParseTemplate(tc.tmpl)
			if err != nil {
				t.Fatal(err)
			}
			v := Values{Value: tc.value, Row: row, Bases: bases}
			got, ok := tp.ExpandText(v)
			if (tc.text == "") == ok || got != tc.text {
				t.Errorf("ExpandText(%q) = %q, %v; want %q", tc.tmpl, got, ok, tc.text)
			}
			if tc.textOnly {
				return
			}
			got, ok = tp.ExpandURL(v)
			if (tc.url == "") == ok || got != tc.url {
				t.Errorf("ExpandURL(%q) = %q, %v; want %q", tc.tmpl, got, ok, tc.url)
			}
			if ok {
				if _, err := url.Parse(got); err != nil {
					t.Errorf("ExpandURL result %q does not parse: %v", got, err)
				}
			}
		})
	}
}

// A value can never turn a link into another scheme or a protocol-relative
// link, because substitutions are encoded and the start is checked.
func TestExpandURLRefusesUnsafeResults(t *testing.T) {
	t.Parallel()
	for _, tmpl := range []string{"{value}", "javascript:{value}", "//evil.test/{value}", "{row.u}"} {
		tp, err := ParseTemplate(tmpl)
		if err != nil {
			t.Fatal(err)
		}
		v := Values{Value: "javascript:alert(1)", Row: map[string]any{"u": "https://x"}}
		if got, ok := tp.ExpandURL(v); ok {
			t.Errorf("ExpandURL(%q) = %q, want unresolved", tmpl, got)
		}
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
	if got := TrimBases(map[string]string{"a": "https://a//"}); got["a"] != "https://a" {
		t.Errorf("TrimBases = %v, want the trailing slashes gone", got)
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
		v := Values{Value: s, Row: map[string]any{}, Bases: map[string]string{}}
		for _, b := range tp.Bases() {
			v.Bases[b] = "https://b.test"
		}
		for _, r := range tp.RowFields() {
			v.Row[r] = s
		}
		text, ok := tp.ExpandText(v)
		if !ok {
			t.Fatalf("ExpandText(%q) unresolved with every token defined", s)
		}
		if utf8.ValidString(s) && !utf8.ValidString(text) {
			t.Fatalf("ExpandText(%q) = %q is not UTF-8", s, text)
		}
		if u, ok := tp.ExpandURL(v); ok && !safeLinkPrefix(u) {
			t.Fatalf("ExpandURL(%q) = %q starts unsafely", s, u)
		}
	})
}
