package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Bounds of the size keys, also documented with each key.
const (
	MaxBodyBytes    = 1 << 30 // sources.http.max_body_bytes
	MaxOutputBytes  = 1 << 30 // executor.max_output_bytes
	MaxRPM          = 100_000 // sources.http.clients[].rpm: the limiter keeps a timestamp per request
	MinLiveMaxBytes = 1 << 20 // history.live_max_bytes; at most 1 GiB as traces refuse larger archives
	MaxLiveMaxBytes = 1 << 30
	MinHistoryBytes = 64 << 20 // history.max_bytes
	MaxHistoryBytes = 1 << 50
)

// namePattern is the rule of worker, cluster, sink and peer names.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Validate returns every problem of a decoded, resolved configuration, each
// naming its TOML key. An empty result means the config can start.
func (c *Config) Validate() []string {
	var p problems
	c.validateIdentity(&p)
	c.validateSurfaces(&p)
	c.validateSources(&p)
	c.validateSinks(&p)
	c.validateExecutor(&p)
	c.validateHistory(&p)
	c.validateFleet(&p)
	return p
}

type problems []string

func (p *problems) add(key, format string, args ...any) {
	*p = append(*p, key+": "+fmt.Sprintf(format, args...))
}

// between checks lo <= v <= hi. Every number a config holds has such a
// bound, so `svc check` and `svc run` agree and no value overflows later.
func (p *problems) between(key string, v, lo, hi int64) {
	if v < lo || v > hi {
		p.add(key, "%d is outside %d-%d", v, lo, hi)
	}
}

// within checks lo <= d <= hi.
func (p *problems) within(key string, d Duration, lo, hi time.Duration) {
	if d.D() < lo || d.D() > hi {
		p.add(key, "%s is outside %s-%s", d, Duration(lo), Duration(hi))
	}
}

func (c *Config) validateIdentity(p *problems) {
	if !namePattern.MatchString(c.Worker.Name) {
		p.add("worker.name", "%q must be 1-64 characters of letters, digits, '.', '_' or '-' starting with a letter or digit (it names files)", c.Worker.Name)
	}
	if !namePattern.MatchString(c.Worker.Cluster) {
		p.add("worker.cluster", "%q must be 1-64 characters of letters, digits, '.', '_' or '-' starting with a letter or digit (it names folders)", c.Worker.Cluster)
	}
	p.within("worker.shutdown_timeout", c.Worker.ShutdownTimeout, time.Second, time.Hour)
}

func (c *Config) validateSurfaces(p *problems) {
	checkPort(p, "metrics.port", c.Metrics.Port)
	checkPort(p, "ui.port", c.UI.Port)
	checkPort(p, "sources.http.port", c.Sources.HTTP.Port)
	if path := c.UI.CustomRenderersPath; path != "" {
		if st, err := os.Stat(path); err != nil {
			p.add("ui.custom_renderers_path", "%s does not exist", path)
		} else if !st.Mode().IsRegular() {
			p.add("ui.custom_renderers_path", "%s is not a file", path)
		}
	}
	if n := len(c.UI.ConsumePause.DurationsSeconds); n > 16 {
		p.add("ui.consume_pause.durations_seconds", "%d presets; at most 16", n)
	}
	for i, d := range c.UI.ConsumePause.DurationsSeconds {
		p.between(fmt.Sprintf("ui.consume_pause.durations_seconds[%d]", i), int64(d), 1, 3600)
	}
	for i, o := range c.UI.AllowedWSOrigins {
		if !strings.HasPrefix(o, "http://") && !strings.HasPrefix(o, "https://") {
			p.add(fmt.Sprintf("ui.allowed_ws_origins[%d]", i), "%q must be an origin such as https://ops.example.com", o)
		} else {
			checkURL(p, fmt.Sprintf("ui.allowed_ws_origins[%d]", i), o)
		}
	}
	checkBindHost(p, "metrics.host", c.Metrics.Host)
	checkBindHost(p, "ui.host", c.UI.Host)
	checkBindHost(p, "sources.http.host", c.Sources.HTTP.Host)
	checkMaxConnections(p, "metrics.max_connections", c.Metrics.MaxConnections)
	checkMaxConnections(p, "ui.max_connections", c.UI.MaxConnections)
	checkMaxConnections(p, "sources.http.max_connections", c.Sources.HTTP.MaxConnections)
	if c.UI.AuthToken != "" {
		checkToken(p, "ui.auth_token", c.UI.AuthToken)
	}
	if c.UI.Enabled && c.UI.AuthToken == "" && !LoopbackBind(c.UI.Host) && !c.UI.AllowUnauthenticated {
		p.add("ui.auth_token", "required when ui.host %q is not a loopback address: without a token anyone who reaches the port reads the config and the history, probes, pauses and downloads databases; set a token, bind 127.0.0.1, or opt in with ui.allow_unauthenticated = true", c.UI.Host)
	}
	checkHosts(p, "ui.allowed_hosts", c.UI.AllowedHosts)
	checkHosts(p, "sources.http.allowed_hosts", c.Sources.HTTP.AllowedHosts)
	for _, ku := range [][2]string{{"ui.release.repo", c.UI.Release.Repo}, {"ui.public_url", c.UI.PublicURL}} {
		if u := ku[1]; u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			p.add(ku[0], "%q must start with http:// or https://", u)
		} else {
			checkURL(p, ku[0], u)
		}
	}
	checkURL(p, "ui.prometheus_url", c.UI.PrometheusURL)
	p.between("offload.max_threads", int64(c.Offload.MaxThreads), 1, 1024)
	p.between("io.max_threads", int64(c.IO.MaxThreads), 1, 1024)
}

// checkHosts checks a list of bare host names (no scheme, port or path).
func checkHosts(p *problems, key string, hosts []string) {
	for i, h := range hosts {
		bare := h
		if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
			bare = h[1 : len(h)-1]
		}
		if h == "" || strings.ContainsAny(h, "/:@ ") && !strings.HasPrefix(h, "[") || hostProblem(bare) != "" {
			p.add(fmt.Sprintf("%s[%d]", key, i), "%q must be a bare host name such as ops.example.com (no scheme, port or path)", h)
		}
	}
}

func checkPort(p *problems, key string, port int) {
	if port < 0 || port > 65535 {
		p.add(key, "%d is not a TCP port (0-65535; 0 picks a free one)", port)
	}
}

func (c *Config) validateSources(p *problems) {
	k, h := c.Sources.Kafka, c.Sources.HTTP
	if !k.Enabled && !h.Enabled {
		p.add("sources", "no input source is enabled: set sources.kafka.enabled or sources.http.enabled")
	}
	if k.Enabled {
		if len(k.Brokers) == 0 {
			p.add("sources.kafka.brokers", "required when the Kafka source is enabled")
		}
		if k.Topic == "" {
			p.add("sources.kafka.topic", "required when the Kafka source is enabled")
		} else {
			checkTopic(p, "sources.kafka.topic", k.Topic)
		}
		if k.Group == "" {
			p.add("sources.kafka.group", "required when the Kafka source is enabled")
		} else {
			checkGroup(p, "sources.kafka.group", k.Group)
		}
		checkBrokers(p, "sources.kafka.brokers", k.Brokers)
		p.within("sources.kafka.commit_interval", k.CommitInterval, 10*time.Millisecond, time.Hour)
		p.within("sources.kafka.revoke_timeout", k.RevokeTimeout, 100*time.Millisecond, time.Hour)
		p.between("sources.kafka.max_poll_records", int64(k.MaxPollRecords), 1, 100_000)
		p.between("sources.kafka.startup_align_seconds", int64(k.StartupAlignSeconds), 1, 3600)
		p.between("sources.kafka.fetch_buffer_bytes", k.FetchBufferBytes, 64<<10, 1<<30)
		checkConn(p, "sources.kafka", k.Brokers, k.Security, k.ClientConfig)
	}
	if h.Enabled {
		p.between("sources.http.max_concurrent", int64(h.MaxConcurrent), 1, 100_000)
		p.between("sources.http.max_body_bytes", h.MaxBodyBytes, 1, MaxBodyBytes)
		p.between("sources.http.max_concurrent_per_client", int64(h.MaxConcurrentPerClient), 1, 100_000)
		p.within("sources.http.body_timeout", h.BodyTimeout, 100*time.Millisecond, 10*time.Minute)
	}
	if h.Enabled && len(h.Clients) == 0 && !LoopbackBind(h.Host) && !h.AllowUnauthenticated {
		p.add("sources.http.clients", "required when sources.http.host %q is not a loopback address: without clients anyone who reaches the port runs the executor; add [[sources.http.clients]], bind 127.0.0.1, or opt in with sources.http.allow_unauthenticated = true", h.Host)
	}
	names, tokens := map[string]bool{}, map[string]bool{}
	for i, cl := range h.Clients {
		key := fmt.Sprintf("sources.http.clients[%d]", i)
		if cl.Name == "" {
			p.add(key+".name", "required")
		} else if names[cl.Name] {
			p.add(key+".name", "duplicate client name %q", cl.Name)
		}
		names[cl.Name] = true
		if cl.Token == "" {
			p.add(key+".token", "required (clients are told apart by their token)")
		} else if tokens[cl.Token] {
			p.add(key+".token", "two clients share one token")
		} else {
			checkToken(p, key+".token", cl.Token)
		}
		tokens[cl.Token] = true
		p.between(key+".rpm", int64(cl.RPM), 1, MaxRPM)
	}
	p.between("pipeline.max_in_flight", int64(c.Pipeline.MaxInFlight), 1, 100_000)
}

func (c *Config) validateSinks(p *problems) {
	if c.SinksRequired() && len(c.Sinks.Kafka) == 0 {
		p.add("sinks.kafka", "at least one sink is required when the Kafka source is on or sources.http.sinks_enabled is true, and none is configured")
	}
	seen := map[string]bool{}
	for i, s := range c.Sinks.Kafka {
		key := fmt.Sprintf("sinks.kafka[%d]", i)
		switch {
		case s.Name == "":
			p.add(key+".name", "required")
		case !namePattern.MatchString(s.Name):
			p.add(key+".name", "%q must be 1-64 characters of letters, digits, '.', '_' or '-'", s.Name)
		case seen[s.Name]:
			p.add(key+".name", "duplicate sink name %q", s.Name)
		}
		seen[s.Name] = true
		checkTopic(p, key+".topic", s.Topic)
		checkBrokers(p, key+".brokers", s.Brokers)
		if len(s.Brokers) == 0 && !c.Sources.Kafka.Enabled {
			p.add(key+".brokers", "required when the Kafka source is off (empty brokers means the consumer's cluster)")
		}
		p.between(key+".breaker.failure_threshold", int64(s.Breaker.FailureThreshold), 1, 1000)
		p.within(key+".delivery_timeout", s.DeliveryTimeout, 100*time.Millisecond, time.Hour)
		p.within(key+".breaker.open_timeout", s.Breaker.OpenTimeout, 10*time.Millisecond, time.Hour)
		checkProduce(p, key, s.Compression, s.MaxMessageBytes)
		checkConn(p, key, s.Brokers, s.Security, s.ClientConfig)
	}
	switch c.DLQ.OnSendFailure {
	case "stall", "drop":
	default:
		p.add("dlq.on_send_failure", "%q is not one of stall, drop", c.DLQ.OnSendFailure)
	}
	p.within("dlq.send_timeout", c.DLQ.SendTimeout, 100*time.Millisecond, time.Hour)
	if c.DLQ.Topic != "" && len(c.DLQ.Brokers) == 0 && !c.Sources.Kafka.Enabled {
		p.add("dlq.brokers", "required when dlq.topic is set and the Kafka source is off")
	}
	if t := c.DLQ.Topic; t != "" {
		if msg := topicProblem(t); msg != "" && !(c.dlqTopicDerived() && topicProblem(c.Sources.Kafka.Topic) != "") {
			if c.dlqTopicDerived() {
				msg += " (derived from sources.kafka.topic + \"_dlq\"; set dlq.topic)"
			}
			p.add("dlq.topic", "%s", msg)
		}
	}
	checkBrokers(p, "dlq.brokers", c.DLQ.Brokers)
	checkProduce(p, "dlq", c.DLQ.Compression, c.DLQ.MaxMessageBytes)
	checkConn(p, "dlq", c.DLQ.Brokers, c.DLQ.Security, c.DLQ.ClientConfig)
	c.validateExactlyOnce(p)
}

// validateExactlyOnce checks what sources.kafka.delivery = "exactly_once"
// needs: every result and DLQ record is produced by the consumer's own
// transactional client, so on the consumer's cluster with its settings,
// and a failed DLQ send can never be dropped past.
func (c *Config) validateExactlyOnce(p *problems) {
	k := c.Sources.Kafka
	switch k.Delivery {
	case DeliveryAtLeastOnce, DeliveryExactlyOnce:
	default:
		p.add("sources.kafka.delivery", "%q is not one of %s, %s", k.Delivery, DeliveryAtLeastOnce, DeliveryExactlyOnce)
		return
	}
	if !c.ExactlyOnce() {
		return
	}
	const why = "with sources.kafka.delivery = \"exactly_once\" results are produced by the consumer's transactional client"
	compression := ""
	for i := range len(c.Sinks.Kafka) + 1 {
		key, brokers, cc, comp := "dlq", c.DLQ.Brokers, c.DLQ.ClientConfig, c.DLQ.Compression
		if i < len(c.Sinks.Kafka) {
			s := c.Sinks.Kafka[i]
			key, brokers, cc, comp = fmt.Sprintf("sinks.kafka[%d]", i), s.Brokers, s.ClientConfig, s.Compression
		}
		if len(brokers) > 0 {
			p.add(key+".brokers", "must be empty (the source's cluster): %s", why)
		}
		if len(cc) > 0 {
			p.add(key+".client_config", "must be empty (set producer keys in sources.kafka.client_config): %s", why)
		}
		if compression == "" {
			compression = comp
		} else if comp != compression {
			p.add(key+".compression", "%q differs from sinks.kafka[0].compression %q: %s, whose codec is one for all topics", comp, compression, why)
		}
	}
	if c.DLQ.OnSendFailure == "drop" {
		p.add("dlq.on_send_failure", "\"drop\" would commit a failed message's offset without its DLQ record; exactly-once retries the transaction instead (use \"stall\")")
	}
}

// dlqTopicDerived reports whether dlq.topic is the one Resolve derived
// from sources.kafka.topic (or was set to the same name).
func (c *Config) dlqTopicDerived() bool {
	k := c.Sources.Kafka
	return k.Enabled && k.Topic != "" && c.DLQ.Topic == k.Topic+"_dlq"
}

// checkProduce checks the producer keys of a sink or the DLQ under prefix.
func checkProduce(p *problems, prefix, compression string, maxMessageBytes int) {
	if compression != "" && !slices.Contains(Compressions, compression) {
		p.add(prefix+".compression", "%q is not one of %s", compression, strings.Join(Compressions, ", "))
	}
	if maxMessageBytes != 0 && (maxMessageBytes < 1024 || maxMessageBytes > MaxMessageBytesMax) {
		p.add(prefix+".max_message_bytes", "%d is outside 1024-%d (or 0: ask the brokers)", maxMessageBytes, MaxMessageBytesMax)
	}
}

func (c *Config) validateExecutor(p *problems) {
	e := c.Executor
	if e.BinaryPath == "" {
		p.add("executor.binary_path", "required: the program that processes each message")
	} else if err := CheckExecutable(e.BinaryPath); err != nil {
		p.add("executor.binary_path", "%v", err)
	}
	p.between("executor.pool_size", int64(e.PoolSize), 1, 1024)
	p.within("executor.timeout", e.Timeout, time.Millisecond, 24*time.Hour)
	p.between("executor.max_output_bytes", e.MaxOutputBytes, 1, MaxOutputBytes)
	p.between("handler.max_attempts", int64(c.Handler.MaxAttempts), 1, 100)
	p.within("handler.retry_backoff", c.Handler.RetryBackoff, 0, time.Hour)
	switch e.Mode {
	case "spawn", "persistent":
	default:
		p.add("executor.mode", "%q is not one of spawn, persistent", e.Mode)
	}
	p.between("executor.max_tasks_per_child", int64(e.MaxTasksPerChild), 0, 1_000_000_000)
	p.within("executor.ready_timeout", e.ReadyTimeout, 10*time.Millisecond, 10*time.Minute)
}

func (c *Config) validateHistory(p *problems) {
	h := c.History
	day := 24 * time.Hour
	p.within("history.seal_interval", h.SealInterval, time.Second, 7*day)
	p.between("history.live_max_bytes", h.LiveMaxBytes, MinLiveMaxBytes, MaxLiveMaxBytes)
	p.between("history.max_bytes", h.MaxBytes, MinHistoryBytes, MaxHistoryBytes)
	if h.MaxBytes >= MinHistoryBytes && h.MaxBytes < 2*h.LiveMaxBytes {
		p.add("history.max_bytes", "%d is less than twice history.live_max_bytes (%d): the budget must hold at least two sealed files", h.MaxBytes, h.LiveMaxBytes)
	}
	p.within("history.max_age", h.MaxAge, time.Hour, 3650*day)
	p.between("history.merged_retention_days", int64(h.MergedRetentionDays), 1, 36500)
	p.within("history.archive.after", h.Archive.After, time.Minute, 3650*day)
	p.within("history.archive.window", h.Archive.Window, time.Minute, 31*day)
	if n := h.SampleAbovePerSecond; n != 0 {
		p.between("history.sample_above_per_second", int64(n), 100, 1_000_000)
	}
	if !slices.Contains(TaskDetails, h.TaskDetail) {
		p.add("history.task_detail", "%q is not one of %s", h.TaskDetail, strings.Join(TaskDetails, ", "))
	}
	p.within("throughput.window", c.Throughput.Window, time.Second, day)
	p.within("runtime_health.interval", c.RuntimeHealth.Interval, 10*time.Millisecond, 10*time.Second)
	p.within("runtime_health.stall_threshold", c.RuntimeHealth.StallThreshold, time.Millisecond, time.Minute)
}

// CheckExecutable reports why path cannot be started as the executor: it
// must name an executable regular file (a bare name is looked up on PATH).
func CheckExecutable(path string) error {
	if !strings.Contains(path, "/") {
		abs, err := exec.LookPath(path)
		if err != nil {
			return fmt.Errorf("%q is not found on PATH", path)
		}
		path = abs
	}
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s does not exist", path)
	case err != nil:
		return fmt.Errorf("%s: %w", path, errors.Unwrap(err))
	case st.IsDir():
		return fmt.Errorf("%s is a directory, not a program", path)
	case !st.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file", path)
	case st.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("%s is not executable (chmod +x it)", path)
	}
	return nil
}

// LoopbackBind reports whether a bind host keeps a socket on this
// machine: localhost, 127.0.0.0/8 or ::1 ("" and 0.0.0.0 are every
// interface).
func LoopbackBind(host string) bool {
	host = strings.Trim(strings.ToLower(host), "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
