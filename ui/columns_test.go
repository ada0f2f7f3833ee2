package ui

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestColumnsJSON(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		cols Columns
		wire string
	}{
		{"bare columns travel as names", Columns{{Name: "z"}, {Name: "a"}}, `["z","a"]`},
		{"settings make an ordered object", Columns{{Name: "z", Format: "bytes"}, {Name: "a"}, {Name: "m", Label: "M"}}, `{"z":{"format":"bytes"},"a":{},"m":{"label":"M"}}`},
		{"nil stays null", nil, `null`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := json.Marshal(tc.cols)
			if err != nil || string(got) != tc.wire {
				t.Fatalf("Marshal = %s, %v; want %s", got, err, tc.wire)
			}
			var back Columns
			if err := json.Unmarshal(got, &back); err != nil || !reflect.DeepEqual(back, tc.cols) {
				t.Errorf("Unmarshal(%s) = %+v, %v; want %+v", got, back, err, tc.cols)
			}
		})
	}
	for _, bad := range []string{`"a"`, `[1]`, `{"a":1}`, `{"a":{"label":3}}`, `7`} {
		var cs Columns
		if err := json.Unmarshal([]byte(bad), &cs); err == nil || !strings.Contains(err.Error(), "columns") {
			t.Errorf("Unmarshal(%s) error = %v, want one naming columns", bad, err)
		}
	}
}

// Widgets without columns omit the key rather than sending null.
func TestWidgetJSONOmitsEmpty(t *testing.T) {
	t.Parallel()
	got, _ := json.Marshal(statWidget())
	want := `{"title":"Orders","view":"stat","source":{"kind":"metrics","metric":"svc_tasks_total"},"format":"number"}`
	if string(got) != want {
		t.Errorf("Marshal(stat widget) = %s, want %s", got, want)
	}
}

func FuzzColumnsJSON(f *testing.F) {
	for _, s := range []string{`["a","b"]`, `{"a":{"label":"A"},"b":{}}`, `null`, `{"a":1}`, `[`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var cs Columns
		if json.Unmarshal(data, &cs) != nil {
			return
		}
		out, err := json.Marshal(cs)
		if err != nil {
			t.Fatalf("Marshal after Unmarshal(%q): %v", data, err)
		}
		var back Columns
		if err := json.Unmarshal(out, &back); err != nil || !reflect.DeepEqual(back.Names(), cs.Names()) {
			t.Fatalf("round trip of %q: %s -> %v, %v", data, out, back, err)
		}
	})
}
