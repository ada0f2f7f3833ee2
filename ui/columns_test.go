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
