package root

import (
	"testing"

	"svc/worker/config"
	"svc/worker/model"
)

// TestMaskEnvOnceRedactsSecretsOnly: a task row's environment with a
// secret name is redacted into a copy (the caller's map keeps its value);
// one without is passed through as it is, not copied again.
func TestMaskEnvOnceRedactsSecretsOnly(t *testing.T) {
	env := map[string]string{"API_TOKEN": "s3cret", "REGION": "eu"}
	got := maskEnvOnce(env)
	if got["API_TOKEN"] != config.Mask || got["REGION"] != "eu" {
		t.Errorf("maskEnvOnce(%v) = %v, want API_TOKEN masked and REGION kept", env, got)
	}
	if env["API_TOKEN"] != "s3cret" {
		t.Errorf("the caller's map was changed: %v", env)
	}
	plain := map[string]string{"SVC_KEY_ENCODING": "utf8"}
	if got := maskEnvOnce(plain); len(got) != 1 || got["SVC_KEY_ENCODING"] != "utf8" {
		t.Errorf("maskEnvOnce(%v) = %v, want it unchanged", plain, got)
	} else {
		got["probe"] = "x" // the same map, not a copy
		if plain["probe"] != "x" {
			t.Error("a map without secrets was copied")
		}
	}
	// The key encoding entry skips the name check: the rule must agree,
	// and a secret beside it is still masked.
	if config.IsSecretName(model.KeyEncodingEnv) {
		t.Errorf("IsSecretName(%q) = true: maskEnvOnce's shortcut would leak it", model.KeyEncodingEnv)
	}
	both := map[string]string{model.KeyEncodingEnv: "utf-8", "DB_PASSWORD": "pw"}
	if got := maskEnvOnce(both); got["DB_PASSWORD"] != config.Mask || got[model.KeyEncodingEnv] != "utf-8" {
		t.Errorf("maskEnvOnce(%v) = %v, want DB_PASSWORD masked", both, got)
	}
	if got := maskEnvOnce(nil); got != nil {
		t.Errorf("maskEnvOnce(nil) = %v, want nil", got)
	}
}
