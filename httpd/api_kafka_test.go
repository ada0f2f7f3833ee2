package httpd

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/worker/config"
)

// kafkaStack runs the UI server against a kfake cluster holding topic
// "orders-raw" (3 partitions) with 30 records at timestamps 1000..1029.
func kafkaStack(t *testing.T, tune func(*config.Config)) (*stack, []string) {
	t.Helper()
	cfg, brokers := kafkaConfig(t, tune)
	return startStack(t, cfg), brokers
}

// kafkaConfig is kafkaStack's config and cluster.
func kafkaConfig(t *testing.T, tune func(*config.Config)) (*config.Config, []string) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "orders-raw", "orders-out", "orders-raw_dlq"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	brokers := c.ListenAddrs()
	cl := manualProducer(t, brokers)
	for i := range 30 {
		rec := &kgo.Record{Topic: "orders-raw", Partition: int32(i % 3), Key: []byte("k"), Value: []byte(`{"n":` + string(rune('0'+i%10)) + `}`),
			Timestamp: time.UnixMilli(int64(1000 + i)), Headers: []kgo.RecordHeader{{Key: "bin", Value: []byte{0xff}}}}
		if err := cl.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cfg := testConfig(t, "/bin/cat")
	cfg.Sources.Kafka.Enabled = true
	cfg.Sources.Kafka.Brokers = brokers
	cfg.Sources.Kafka.Topic = "orders-raw"
	cfg.Sources.Kafka.Group = "g"
	cfg.Sources.Kafka.StartupAlignEnabled = false // join at once, not at the next 10 s mark
	cfg.Sinks.Kafka = []config.KafkaSink{{Name: "results", Topic: "orders-out"}, {Name: "dlq", Topic: "orders-out"}}
	if tune != nil {
		tune(cfg)
	}
	return cfg, brokers
}

func TestKafkaReadTopicsAndMessage(t *testing.T) {
	t.Parallel()
	s, brokers := kafkaStack(t, nil)
	noLeak := func(body string) {
		t.Helper()
		for _, secret := range append([]string{"orders-raw", "orders-out"}, brokers...) {
			if strings.Contains(body, secret) {
				t.Errorf("response leaks %q: %s", secret, body)
			}
		}
	}
	r := do(t, "GET", s.uiURL+"/api/v1/debug/kafka/topics", "")
	want := `{"topics":[{"alias":"source","kind":"source"},{"alias":"dlq","kind":"dlq"},{"alias":"results","kind":"sink"}]}`
	if r.status != 200 || strings.TrimSpace(r.body) != want {
		t.Errorf("topics = %d %s\nwant %s", r.status, r.body, want)
	}
	noLeak(r.body)

	r = do(t, "GET", s.uiURL+"/api/v1/debug/kafka/source/message?partition=1&offset=2", "")
	var rec map[string]any
	if err := json.Unmarshal([]byte(r.body), &rec); err != nil || r.status != 200 {
		t.Fatalf("message = %d %s", r.status, r.body)
	}
	if rec["alias"] != "source" || rec["partition"] != 1.0 || rec["offset"] != 2.0 || rec["timestamp_ms"] != 1007.0 || rec["key"] != "k" {
		t.Errorf("record = %v", rec)
	}
	hdr := rec["headers"].([]any)[0].(map[string]any)
	if hdr["value"] != "/w==" || hdr["value_encoding"] != "base64" {
		t.Errorf("binary header = %v, want base64 /w==", hdr)
	}
	noLeak(r.body)

	cases := []struct {
		path   string
		status int
		detail string
	}{
		{"/api/v1/debug/kafka/nope/message?partition=0&offset=0", 404, ""},
		{"/api/v1/debug/kafka/source/message?partition=0", 400, "offset"},
		{"/api/v1/debug/kafka/source/message?partition=x&offset=0", 400, "partition"},
		{"/api/v1/debug/kafka/source/message?partition=9&offset=0", 404, ""},
		{"/api/v1/debug/kafka/source/message?partition=0&offset=10", 404, "[0, 10)"},
		{"/api/v1/debug/kafka/source/messages", 400, "from_ts"},
	}
	for _, c := range cases {
		r := do(t, "GET", s.uiURL+c.path, "")
		var e ErrorBody
		_ = json.Unmarshal([]byte(r.body), &e)
		if r.status != c.status || e.Error == "" || !strings.Contains(e.Detail, c.detail) {
			t.Errorf("GET %s = %d %s, want %d naming %q", c.path, r.status, r.body, c.status, c.detail)
		}
		noLeak(r.body)
	}
}

func TestKafkaReadUnavailableAliasesAndKillSwitch(t *testing.T) {
	t.Parallel()
	s := startStack(t, testConfig(t, "/bin/cat")) // HTTP only: no source, no DLQ
	for alias, detail := range map[string]string{
		"source": "alias 'source' is not available: the Kafka source is disabled",
		"dlq":    "alias 'dlq' is not available: the DLQ is disabled (set dlq.topic)",
	} {
		r := do(t, "GET", s.uiURL+"/api/v1/debug/kafka/"+alias+"/message?partition=0&offset=0", "")
		var e ErrorBody
		_ = json.Unmarshal([]byte(r.body), &e)
		if r.status != 404 || e.Detail != detail {
			t.Errorf("%s = %d %q, want 404 %q", alias, r.status, e.Detail, detail)
		}
	}
	cfg := testConfig(t, "/bin/cat")
	cfg.UI.KafkaReadEnabled = false
	s2 := startStack(t, cfg)
	for _, p := range []string{"/api/v1/debug/kafka/topics", "/api/v1/debug/kafka/source/message?partition=0&offset=0", "/api/v1/debug/kafka/dlq/messages?from_ts=0"} {
		r := do(t, "GET", s2.uiURL+p, "")
		if r.status != 403 || !strings.Contains(r.body, "ui.kafka_read_enabled is false") {
			t.Errorf("GET %s with kafka read off = %d %s", p, r.status, r.body)
		}
	}
}

func TestKafkaReadStreamNDJSON(t *testing.T) {
	t.Parallel()
	s, _ := kafkaStack(t, nil)
	resp, err := http.Get(s.uiURL + "/api/v1/debug/kafka/source/messages?from_ts=1010&to_ts=1020&partition=0")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("stream = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var offsets []int
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var rec struct {
			Partition int    `json:"partition"`
			Offset    int    `json:"offset"`
			TS        int    `json:"timestamp_ms"`
			Error     string `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if rec.Error != "" || rec.Partition != 0 || rec.TS < 1010 || rec.TS > 1020 {
			t.Errorf("unexpected line %s", sc.Text())
		}
		offsets = append(offsets, rec.Offset)
	}
	// Partition 0 holds timestamps 1000, 1003, ...: 1012, 1015, 1018 are
	// offsets 4, 5, 6; 1021 is past to_ts and ends the partition.
	if len(offsets) != 3 || offsets[0] != 4 || offsets[2] != 6 {
		t.Errorf("offsets = %v, want [4 5 6]", offsets)
	}
	r := do(t, "GET", s.uiURL+"/api/v1/debug/kafka/source/messages?from_ts=0&limit=5", "")
	if n := strings.Count(r.body, "\n"); r.status != 200 || n != 5 {
		t.Errorf("limit=5 gave %d lines (status %d)", n, r.status)
	}
	r = do(t, "GET", s.uiURL+"/api/v1/debug/kafka/source/messages?from_ts=99999", "")
	if r.status != 200 || r.body != "" || r.header.Get("Content-Type") != "application/x-ndjson" {
		t.Errorf("empty window = %d %q %s", r.status, r.body, r.header.Get("Content-Type"))
	}
}

func TestKafkaReadStartupWarnings(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "/bin/cat")
	cfg.Sources.Kafka.Enabled = true
	cfg.Sources.Kafka.Brokers = []string{"127.0.0.1:1"}
	cfg.Sources.Kafka.Topic = "orders-raw"
	cfg.Sources.Kafka.Group = "g"
	cfg.Sources.Kafka.Security = config.Security{Protocol: "SASL_PLAINTEXT", SASLMechanism: "PLAIN", Username: "u", Password: "p"}
	cfg.Sinks.Kafka = []config.KafkaSink{{Name: "dlq", Topic: "x"}, {Name: "results", Topic: "y"}}
	cfg.Resolve()
	var buf strings.Builder
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	_, b := buildStack(t, cfg, BuildOptions{Log: log})
	b.Close()
	out := buf.String()
	for _, want := range []string{`"msg":"kafka_read_alias_shadowed"`, `"sink":"dlq"`, `"msg":"kafka_read_exposed_without_ui_auth"`, `"aliases":["source","dlq","results"]`, `"msg":"ui_unauthenticated"`} {
		if !strings.Contains(out, want) {
			t.Errorf("startup log lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, `"p"`) || strings.Contains(out, "orders-raw") {
		t.Errorf("startup log leaks a password or topic:\n%s", out)
	}

	buf.Reset()
	cfg.UI.AuthToken = "tok-0123456789abcdef"
	_, b = buildStack(t, cfg, BuildOptions{Log: log})
	b.Close()
	if strings.Contains(buf.String(), "kafka_read_exposed_without_ui_auth") || strings.Contains(buf.String(), "ui_unauthenticated") {
		t.Errorf("with a UI token the exposure warnings remain:\n%s", buf.String())
	}
}
