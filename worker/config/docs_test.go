package config

import (
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestConfigKeysDocumented: every key the config accepts (the toml tags of
// Config, followed into this package's structs) has its row in
// docs/configuration.md, so an operator can look up whatever a config may
// set. A key is documented by a row whose first cell names it in full
// (`history.archive.after`), or relative to the section's table
// (`commit_interval` under "## [sources.kafka]"); a field of a security
// block by the "Security blocks" table; the field of a list of tables
// that has no rows of its own (fleet.registry.peers) by its parent's row.
func TestConfigKeysDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := docRows(string(doc))
	keys := configKeys(reflect.TypeOf(Config{}), "")
	if len(keys) < 100 {
		t.Fatalf("found %d config keys, want the whole set (is Config still tagged toml?)", len(keys))
	}
	var missing []string
	for _, k := range keys {
		if !documented(k, rows) {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("docs/configuration.md has no row for %d key(s):\n%s", len(missing), strings.Join(missing, "\n"))
	}
}

// docRow is one table row of the doc: the heading it is under, the names
// its first cell gives in backquotes, and the row's whole text.
type docRow struct {
	heading string
	names   []string
	text    string
}

var backquoted = regexp.MustCompile("`([a-z0-9_.]+)`")

func docRows(doc string) []docRow {
	var rows []docRow
	heading := ""
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "#") {
			heading = line
			continue
		}
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "| `") || len(cells) < 3 {
			continue
		}
		r := docRow{heading: heading, text: line}
		for _, m := range backquoted.FindAllStringSubmatch(cells[1], -1) {
			r.names = append(r.names, m[1])
		}
		rows = append(rows, r)
	}
	return rows
}

// configKeys returns the dotted keys of t's toml-tagged fields, following
// structs (and lists of structs) of this package that have tagged fields
// of their own; anything else (a map, a duration, a ui type) is one key.
func configKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "" || name == "-" {
			continue
		}
		key := prefix + name
		ft := f.Type
		if ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft.PkgPath() == t.PkgPath() && hasTomlFields(ft) {
			keys = append(keys, configKeys(ft, key+".")...)
			continue
		}
		keys = append(keys, key)
	}
	return keys
}

func hasTomlFields(t reflect.Type) bool {
	for i := 0; i < t.NumField(); i++ {
		if t.Field(i).Tag.Get("toml") != "" {
			return true
		}
	}
	return false
}

func documented(key string, rows []docRow) bool {
	if rowFor(key, rows) != nil {
		return true
	}
	// A field of a list of tables without rows of its own: named in the
	// row of the list (`name`, or `name = ` in an example).
	parent, child, ok := cutLast(key)
	if !ok {
		return false
	}
	r := rowFor(parent, rows)
	return r != nil && (strings.Contains(r.text, "`"+child+"`") || strings.Contains(r.text, child+" = "))
}

// rowFor returns the row that documents key: by its full name, by its
// name within the section's table, or, for a field of a security block,
// in the "Security blocks" table.
func rowFor(key string, rows []docRow) *docRow {
	for i, r := range rows {
		for _, n := range r.names {
			if n == key {
				return &rows[i]
			}
			prefix, ok := strings.CutSuffix(key, "."+n)
			if !ok {
				continue
			}
			if strings.Contains(r.heading, "["+prefix+"]") {
				return &rows[i]
			}
			if _, last, _ := cutLast(prefix); last == "security" && strings.Contains(r.heading, "Security blocks") {
				return &rows[i]
			}
		}
	}
	return nil
}

func cutLast(key string) (string, string, bool) {
	i := strings.LastIndex(key, ".")
	if i < 0 {
		return "", key, false
	}
	return key[:i], key[i+1:], true
}
