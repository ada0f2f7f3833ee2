package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse: no input makes the loader panic; a config it accepts
// validates clean again (check and run see the same config) and its svc
// check rendering loads back.
func FuzzParse(f *testing.F) {
	for _, dir := range []string{"../../testdata/config/valid", "../../testdata/config/invalid"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.toml"))
		for _, file := range files {
			if b, err := os.ReadFile(file); err == nil {
				f.Add(b)
			}
		}
	}
	f.Add([]byte("[sources.http]\nenabled = \"${X:-true}\"\nport = \"${P:-1}\"\n[executor]\nbinary_path = \"/bin/cat\"\n"))
	anyEnv := func(string) (string, bool) { return "1", true }
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, anyEnv)
		if err != nil {
			return
		}
		if problems := cfg.Validate(); len(problems) > 0 {
			t.Fatalf("Parse accepted a config that Validate refuses: %v", problems)
		}
		env := secretEnv(cfg)
		back, err := Parse([]byte(cfg.MaskedTOML()), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		if err != nil {
			t.Fatalf("the effective config does not load back: %v\n%s", err, cfg.MaskedTOML())
		}
		if back.Executor.BinaryPath != cfg.Executor.BinaryPath || back.UI.Port != cfg.UI.Port {
			t.Fatalf("loaded back differently: %q %d vs %q %d", back.Executor.BinaryPath, back.UI.Port, cfg.Executor.BinaryPath, cfg.UI.Port)
		}
	})
}

// secretEnv maps the variable of each ${VAR} reference MaskedTOML writes
// to the secret's value: the environment that loads that output back.
func secretEnv(c *Config) map[string]string {
	env := map[string]string{}
	c.masked(func(path, value string) string {
		ref := envRefName(path, value)
		env[strings.TrimSuffix(strings.TrimPrefix(ref, "${"), "}")] = value
		return ref
	})
	return env
}
