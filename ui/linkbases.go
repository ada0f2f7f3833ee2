package ui

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// DocsBase is the link base reserved for the worker's own docs site.
const DocsBase = "docs"

// CheckLinkBases returns one problem per bad ui.link_bases entry, each
// naming its key.
func CheckLinkBases(bases map[string]string) []string {
	var out []string
	for _, name := range sortedKeys(bases) {
		key := "ui.link_bases." + name
		if name == DocsBase {
			out = append(out, key+`: the base name "docs" is reserved for the worker's own docs site`)
		} else if !basePattern.MatchString(name) {
			out = append(out, key+": base name must match ^[a-z][a-z0-9_]*$")
		}
		if v := bases[name]; !strings.HasPrefix(v, "http://") && !strings.HasPrefix(v, "https://") {
			out = append(out, fmt.Sprintf("%s: %q must start with http:// or https://", key, v))
		}
	}
	return out
}

// MissingBases returns, sorted and once each, every base a page or probe
// details template references that bases does not define (templates that
// do not parse are skipped: validation reports them).
func MissingBases(bases map[string]string, pages []Page, details ProbeDetails) []string {
	missing := map[string]bool{}
	for _, s := range templatesOf(pages, details) {
		t, err := ParseTemplate(s)
		if err != nil {
			continue
		}
		for _, b := range t.Bases() {
			if _, ok := bases[b]; !ok {
				missing[b] = true
			}
		}
	}
	return sortedKeys(missing)
}

// templatesOf lists every template string declared anywhere.
func templatesOf(pages []Page, details ProbeDetails) []string {
	var out []string
	cols := func(cs Columns) {
		for _, c := range cs {
			out = append(out, c.LinkTemplate, c.Hint)
		}
	}
	for _, p := range pages {
		for _, w := range p.Widgets {
			cols(w.Columns)
		}
	}
	for _, f := range details.Fields {
		out = append(out, f.LinkTemplate, f.Hint)
		cols(f.Columns)
		if f.Detail != nil {
			out = append(out, f.Detail.Title)
			for _, e := range f.Detail.Elements {
				for _, l := range e.Links {
					out = append(out, l.Template)
				}
			}
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
