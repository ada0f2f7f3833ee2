package ui

import "testing"

func TestCheckTag(t *testing.T) {
	t.Parallel()
	for tag, ok := range map[string]bool{
		"v1.0.0": true, "v10.20.300": true, "v0.0.1": true,
		"1.0.0": false, "v1.0": false, "v1.0.0-rc1": false, "v1.0.0/../x": false, "V1.0.0": false, "": false, "v1.0.0\n": false,
	} {
		if err := CheckTag(tag); (err == nil) != ok {
			t.Errorf("CheckTag(%q) = %v, want ok=%v", tag, err, ok)
		}
	}
}
