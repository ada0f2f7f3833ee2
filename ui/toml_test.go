package ui_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"svc/ui"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/ui")

// handlerSection is the part of the worker config the exec handler reads.
type handlerSection struct {
	Handler struct {
		UIPages      []ui.Page       `toml:"ui_pages"`
		ProbeDetails ui.ProbeDetails `toml:"probe_details"`
	} `toml:"handler"`
}

// decodeLikeTheLoader decodes the way the worker's config loader does:
// into a generic tree, re-encoded, then into the typed struct, reporting
// undecoded keys.
func decodeLikeTheLoader(t *testing.T, text string) (handlerSection, []string, error) {
	t.Helper()
	var raw map[string]any
	if _, err := toml.Decode(text, &raw); err != nil {
		t.Fatalf("decode raw: %v", err)
	}
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(raw); err != nil {
		t.Fatalf("re-encode: %v", err)
	}
	var h handlerSection
	md, err := toml.Decode(buf.String(), &h)
	var undecoded []string
	for _, k := range md.Undecoded() {
		if k[0] == "handler" {
			undecoded = append(undecoded, k.String())
		}
	}
	return h, undecoded, err
}

// The shipped example decodes with the loader's two passes, validates, and
// its /api/v1/pages and probe-details JSON match the golden files.
func TestExampleConfigDecodesAndValidates(t *testing.T) {
	t.Parallel()
	text, err := os.ReadFile("../testdata/config/valid/ui-pages.toml")
	if err != nil {
		t.Fatal(err)
	}
	h, undecoded, err := decodeLikeTheLoader(t, string(text))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if len(undecoded) > 0 {
		t.Fatalf("undecoded handler keys: %v", undecoded)
	}
	if err := ui.ValidatePages(h.Handler.UIPages); err != nil {
		t.Fatalf("ValidatePages(example) = %v", err)
	}
	if err := ui.ValidateProbeDetails(h.Handler.ProbeDetails); err != nil {
		t.Fatalf("ValidateProbeDetails(example) = %v", err)
	}
	if n := len(h.Handler.UIPages); n != 2 {
		t.Fatalf("decoded %d pages, want 2", n)
	}
	cols := h.Handler.UIPages[0].Widgets[0].Columns.Names()
	if strings.Join(cols, ",") != "order_id,status,amount_cents,ts" {
		t.Errorf("column order = %v, want the declaration order", cols)
	}
	pages := ui.NormalizePages(h.Handler.UIPages)
	golden(t, "../testdata/ui/pages.golden.json", pages)
	golden(t, "../testdata/ui/probe-details.golden.json", h.Handler.ProbeDetails)

	// The JSON wire form reads back into the same declaration.
	var back []ui.Page
	data, _ := json.Marshal(pages)
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatalf("unmarshal pages JSON: %v", err)
	}
	again, _ := json.Marshal(back)
	if !bytes.Equal(data, again) {
		t.Errorf("pages JSON does not round-trip:\n%s\n%s", data, again)
	}
}

func golden(t *testing.T, path string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if *update {
		if err := os.WriteFile(path, got, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./ui -run TestExampleConfig -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run with -update after checking):\n%s", path, got)
	}
}

func TestColumnsTOMLErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, text, want string
	}{
		{"unknown column key", "[[handler.ui_pages]]\nslug='a'\n[[handler.ui_pages.widgets]]\nview='table'\n[[handler.ui_pages.widgets.columns]]\nname='a'\ncolour='red'\n", "colour: unknown key"},
		{"table loses order", "[[handler.ui_pages]]\nslug='a'\n[[handler.ui_pages.widgets]]\nview='table'\n[handler.ui_pages.widgets.columns]\na={}\n", "columns must be a list"},
		{"wrong type", "[[handler.ui_pages]]\nslug='a'\n[[handler.ui_pages.widgets]]\nview='table'\ncolumns=[1]\n", "must be a name or a table"},
		{"badge color not a string", "[[handler.ui_pages]]\nslug='a'\n[[handler.ui_pages.widgets]]\nview='table'\ncolumns=[{name='a', badge_colors={x=1}}]\n", "color must be a string"},
		{"label not a string", "[[handler.ui_pages]]\nslug='a'\n[[handler.ui_pages.widgets]]\nview='table'\ncolumns=[{name='a', label=2}]\n", "label: must be a string"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := decodeLikeTheLoader(t, tc.text)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("decode error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestColumnsTOMLForms(t *testing.T) {
	t.Parallel()
	for _, form := range []string{
		"columns=['b', 'a']",
		"columns=[{name='b'}, {name='a', format='bytes'}]",
		"[[handler.ui_pages.widgets.columns]]\nname='b'\n[[handler.ui_pages.widgets.columns]]\nname='a'\nformat='bytes'",
	} {
		text := "[[handler.ui_pages]]\nslug='a'\n[[handler.ui_pages.widgets]]\nview='table'\n" + form + "\n"
		h, undecoded, err := decodeLikeTheLoader(t, text)
		if err != nil || len(undecoded) > 0 {
			t.Fatalf("decode %s = %v, undecoded %v", form, err, undecoded)
		}
		got := h.Handler.UIPages[0].Widgets[0].Columns
		if got.Names()[0] != "b" || got.Names()[1] != "a" {
			t.Errorf("decode %s: columns %+v, want b then a", form, got)
		}
	}
	_, _, err := decodeLikeTheLoader(t, "[[handler.ui_pages]]\nslug='a'\n[[handler.ui_pages.widgets]]\nview='table'\ncolumns=['b', {name='a'}]\n")
	if err == nil || !strings.Contains(err.Error(), "not a mix") {
		t.Errorf("mixed columns error = %v, want one saying not a mix", err)
	}
}
