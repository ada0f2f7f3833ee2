package config

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestTypeErrorsAllAtOnceWithLines: every value of the wrong type is
// reported in one go, at the user's own line, in TOML's words.
func TestTypeErrorsAllAtOnceWithLines(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte(`[executor]
binary_path = "/bin/cat"
pool_size = "4"
[sources.http]
enabled = true
port = "8090"
max_body_bytes = 1.5
[[sources.http.clients]]
name = "a"
token = 7
[ui]
probe_enabled = "no"
allowed_ws_origins = "https://x"
`), noEnv)
	if err == nil {
		t.Fatal("Parse = nil error")
	}
	for _, want := range []string{
		`executor.pool_size (line 3): want an integer, got a string ("4")`,
		`sources.http.port (line 6): want an integer, got a string ("8090")`,
		`sources.http.max_body_bytes (line 7): want an integer, got a float (1.5)`,
		`sources.http.clients[0].token (line 10): want a string, got an integer (7)`,
		`ui.probe_enabled (line 12): want a boolean (true or false), got a string ("no")`,
		`ui.allowed_ws_origins (line 13): want an array, got a string`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	for _, goType := range []string{"float64", "int64", "map[string]", "[]interface", "[]string"} {
		if strings.Contains(err.Error(), goType) {
			t.Errorf("error names the Go type %s:\n%v", goType, err)
		}
	}
}

// TestEnvFillsNumbersBoolsAndDurations: containers set ports and sizes from
// the environment; expanded strings fill typed keys.
func TestEnvFillsNumbersBoolsAndDurations(t *testing.T) {
	t.Parallel()
	env := map[string]string{"PORT": "18090", "POOL": "3", "PROBE": "false"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cfg, err := Parse([]byte(`[executor]
binary_path = "/bin/cat"
pool_size = "${POOL:-4}"
timeout = "${TIMEOUT:-45s}"
[sources.http]
enabled = true
host = "localhost"
port = "${PORT:-8090}"
max_body_bytes = "${BODY:-2048}"
[ui]
probe_enabled = "${PROBE}"
`), lookup)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Sources.HTTP.Port != 18090 || cfg.Executor.PoolSize != 3 || cfg.Sources.HTTP.MaxBodyBytes != 2048 ||
		cfg.UI.ProbeEnabled || cfg.Executor.Timeout.String() != "45s" {
		t.Errorf("port %d pool %d body %d probe %v timeout %s", cfg.Sources.HTTP.Port, cfg.Executor.PoolSize,
			cfg.Sources.HTTP.MaxBodyBytes, cfg.UI.ProbeEnabled, cfg.Executor.Timeout)
	}
}

// TestEffectiveView: the views show the values the worker uses: default
// protocols and the derived DLQ topic, [] and {} instead of null, one
// duration format; svc check's TOML loads back with secrets as ${...}.
func TestEffectiveView(t *testing.T) {
	t.Parallel()
	src := `[executor]
binary_path = "/bin/cat"
env = { DB_PASSWORD = "pw" }
[sources.kafka]
enabled = true
brokers = ["127.0.0.1:9092"]
topic = "orders"
group = "g"
[[sinks.kafka]]
name = "out"
topic = "results"
[[sinks.kafka]]
name = "far"
topic = "results"
brokers = ["far:9092"]
[ui]
auth_token = "s3cret-operator-token"
[history]
seal_interval = "600s"
`
	cfg, err := Parse([]byte(src), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(cfg.Masked())
	view := string(js)
	for _, want := range []string{
		`"topic":"orders_dlq"`, `"protocol":"PLAINTEXT"`, `"seal_interval":"10m"`, `"shutdown_timeout":"30s"`,
		`"args":[]`, `"label_fields":[]`, `"link_bases":{}`, `"auth_token":"***"`, `"DB_PASSWORD":"***"`,
	} {
		if !strings.Contains(view, want) {
			t.Errorf("JSON view lacks %s", want)
		}
	}
	if strings.Contains(view, "null") || strings.Contains(view, "m0s") || strings.Contains(view, "s3cret") {
		t.Errorf("JSON view has a null, a 10m0s-style duration or a secret:\n%s", view)
	}
	if got := cfg.Sinks.Kafka[0].Security.Protocol; got != "" {
		t.Errorf("inheriting sink shows protocol %q, want none (it uses the consumer's connection)", got)
	}
	if got := cfg.Sinks.Kafka[1].Security.Protocol; got != "PLAINTEXT" {
		t.Errorf("sink with its own brokers shows protocol %q, want PLAINTEXT", got)
	}

	out := cfg.MaskedTOML()
	if strings.Contains(out, "s3cret") || strings.Contains(out, `"pw"`) {
		t.Fatalf("check output shows a secret:\n%s", out)
	}
	env := map[string]string{"SVC_UI_AUTH_TOKEN": "s3cret-operator-token", "SVC_EXECUTOR_ENV_DB_PASSWORD": "pw"}
	back, err := Parse([]byte(out), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatalf("svc check output does not load back: %v\n%s", err, out)
	}
	a, _ := json.Marshal(cfg.Masked())
	b, _ := json.Marshal(back.Masked())
	if string(a) != string(b) {
		t.Errorf("loaded back config differs:\n%s\n%s", a, b)
	}
	if back.UI.AuthToken != "s3cret-operator-token" || back.Executor.Env["DB_PASSWORD"] != "pw" {
		t.Errorf("secrets did not come back from their ${...} references")
	}
}

// TestHostileFilesRefusedBeforeDecoding: size and nesting are bounded.
func TestHostileFilesRefusedBeforeDecoding(t *testing.T) {
	t.Parallel()
	deep := "x = " + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + "\n"
	if _, err := Parse([]byte(deep), noEnv); err == nil || !strings.Contains(err.Error(), "nest 5000 deep") {
		t.Errorf("deep file: %v", err)
	}
	dotted := strings.Repeat("a.", 100) + "b = 1\n"
	if _, err := Parse([]byte(dotted), noEnv); err == nil || !strings.Contains(err.Error(), "at most 32 levels") {
		t.Errorf("dotted key 101 deep: %v", err)
	}
	big := strings.Repeat("# padding\n", maxConfigBytes/10+1)
	if _, err := Parse([]byte(big), noEnv); err == nil || !strings.Contains(err.Error(), "at most 1048576") {
		t.Errorf("2 MiB file: %v", err)
	}
}

func TestKeyLines(t *testing.T) {
	t.Parallel()
	lines := keyLines(`# comment
[worker]
name = "w" # trailing
[[sinks.kafka]]
name = "a"
breaker = { failure_threshold = 3, open_timeout = "1s" }
[[sinks.kafka]]
name = "b"
[sinks.kafka.breaker]
failure_threshold = 4
[executor]
args = [
  "x",
]
env.HOME = "/root"
"quoted.key" = 1
text = """
name = "not a key"
"""
timeout = "1s"
[fleet.registry]
peers = [{ name = "p0", url = "http://p0" }, { name = "p1" },
  { name = "p2", url = "x,}" }, # a } in a string
  { url = "http://p3" },
]
heartbeat = "1s"
`)
	for key, want := range map[string]int{
		"worker.name": 3, "sinks.kafka[0].name": 5, "sinks.kafka[0].breaker.failure_threshold": 6,
		"sinks.kafka[0].breaker.open_timeout": 6, "sinks.kafka[1].name": 8, "sinks.kafka[1].breaker.failure_threshold": 10,
		"executor.args": 12, "executor.env.HOME": 15, "executor.quoted.key": 16, "executor.timeout": 20,
		"fleet.registry.peers[0].name": 22, "fleet.registry.peers[1].name": 22, "fleet.registry.peers[2].url": 23,
		"fleet.registry.peers[3]": 24, "fleet.registry.peers[3].url": 24, "fleet.registry.heartbeat": 26,
	} {
		if got := lines[key]; got != want {
			t.Errorf("line of %s = %d, want %d", key, got, want)
		}
	}
	if _, ok := lines["executor.name"]; ok {
		t.Error("a line inside a multi-line string was read as a key")
	}
}
