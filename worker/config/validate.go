package config

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"svc/ui"
)

var (
	namePattern     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	sinkNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
)

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
	c.validateUIDeclarations(&p)
	return p
}

type problems []string

func (p *problems) add(key, format string, args ...any) {
	*p = append(*p, key+": "+fmt.Sprintf(format, args...))
}

func (c *Config) validateIdentity(p *problems) {
	if !namePattern.MatchString(c.Worker.Name) {
		p.add("worker.name", "%q must be 1-64 characters of letters, digits, '.', '_' or '-' starting with a letter or digit (it names files)", c.Worker.Name)
	}
	if !namePattern.MatchString(c.Worker.Cluster) {
		p.add("worker.cluster", "%q must be 1-64 characters of letters, digits, '.', '_' or '-' starting with a letter or digit (it names folders)", c.Worker.Cluster)
	}
	if c.Worker.ShutdownTimeout <= 0 {
		p.add("worker.shutdown_timeout", "must be positive")
	}
}

func (c *Config) validateSurfaces(p *problems) {
	checkPort(p, "metrics.port", c.Metrics.Port)
	checkPort(p, "ui.port", c.UI.Port)
	checkPort(p, "sources.http.port", c.Sources.HTTP.Port)
	*p = append(*p, ui.CheckLinkBases(c.UI.LinkBases)...)
	if path := c.UI.CustomRenderersPath; path != "" {
		if st, err := os.Stat(path); err != nil {
			p.add("ui.custom_renderers_path", "%s does not exist", path)
		} else if !st.Mode().IsRegular() {
			p.add("ui.custom_renderers_path", "%s is not a file", path)
		}
	}
	for i, d := range c.UI.ConsumePause.DurationsSeconds {
		if d < 1 || d > 3600 {
			p.add(fmt.Sprintf("ui.consume_pause.durations_seconds[%d]", i), "%d is outside 1-3600", d)
		}
	}
	for i, o := range c.UI.AllowedWSOrigins {
		if !strings.HasPrefix(o, "http://") && !strings.HasPrefix(o, "https://") {
			p.add(fmt.Sprintf("ui.allowed_ws_origins[%d]", i), "%q must be an origin such as https://ops.example.com", o)
		}
	}
	if v := c.UI.Release.Version; v != "" && ui.CheckTag(v) != nil {
		p.add("ui.release.version", "%q must be a release tag vX.Y.Z (empty: the release embedded in this binary)", v)
	}
	if r := c.UI.Release.Repo; r != "" && !strings.HasPrefix(r, "http://") && !strings.HasPrefix(r, "https://") {
		p.add("ui.release.repo", "%q must start with http:// or https://", r)
	}
	if u := c.UI.PublicURL; u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		p.add("ui.public_url", "%q must start with http:// or https://", u)
	}
	switch c.Fleet.Registry.Provider {
	case "filesystem":
	case "static":
		if len(c.Fleet.Registry.Peers) == 0 {
			p.add("fleet.registry.peers", "the static provider needs at least one peer URL")
		}
	default:
		p.add("fleet.registry.provider", "%q is not one of filesystem, static", c.Fleet.Registry.Provider)
	}
	if c.Offload.MaxThreads < 1 {
		p.add("offload.max_threads", "must be at least 1")
	}
	if c.IO.MaxThreads < 1 {
		p.add("io.max_threads", "must be at least 1 (0 means min(32, cpu_count + 4))")
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
		}
		if k.Group == "" {
			p.add("sources.kafka.group", "required when the Kafka source is enabled")
		}
		if k.CommitInterval <= 0 {
			p.add("sources.kafka.commit_interval", "must be positive")
		}
		if k.RevokeTimeout <= 0 {
			p.add("sources.kafka.revoke_timeout", "must be positive")
		}
		if k.MaxPollRecords < 1 {
			p.add("sources.kafka.max_poll_records", "must be at least 1")
		}
		if k.StartupAlignSeconds < 1 {
			p.add("sources.kafka.startup_align_seconds", "must be at least 1")
		}
		checkSecurity(p, "sources.kafka", k.Security, k.ClientConfig)
	}
	if h.Enabled {
		if h.MaxConcurrent < 1 {
			p.add("sources.http.max_concurrent", "must be at least 1")
		}
		if h.MaxBodyBytes < 1 {
			p.add("sources.http.max_body_bytes", "must be at least 1")
		}
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
		}
		tokens[cl.Token] = true
		if cl.RPM < 1 {
			p.add(key+".rpm", "must be at least 1")
		}
	}
	if c.Pipeline.MaxInFlight < 1 {
		p.add("pipeline.max_in_flight", "must be at least 1")
	}
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
		case !sinkNamePattern.MatchString(s.Name):
			p.add(key+".name", "%q must be 1-64 characters of letters, digits, '.', '_' or '-'", s.Name)
		case seen[s.Name]:
			p.add(key+".name", "duplicate sink name %q", s.Name)
		}
		seen[s.Name] = true
		if s.Topic == "" {
			p.add(key+".topic", "required")
		}
		if len(s.Brokers) == 0 && !c.Sources.Kafka.Enabled {
			p.add(key+".brokers", "required when the Kafka source is off (empty brokers means the consumer's cluster)")
		}
		if s.Breaker.FailureThreshold < 1 {
			p.add(key+".breaker.failure_threshold", "must be at least 1")
		}
		if s.DeliveryTimeout <= 0 {
			p.add(key+".delivery_timeout", "must be positive")
		}
		if s.Breaker.OpenTimeout <= 0 {
			p.add(key+".breaker.open_timeout", "must be positive")
		}
		checkSecurity(p, key, s.Security, s.ClientConfig)
	}
	switch c.DLQ.OnSendFailure {
	case "stall", "drop":
	default:
		p.add("dlq.on_send_failure", "%q is not one of stall, drop", c.DLQ.OnSendFailure)
	}
	if c.DLQ.SendTimeout <= 0 {
		p.add("dlq.send_timeout", "must be positive")
	}
	if c.DLQ.Topic != "" && len(c.DLQ.Brokers) == 0 && !c.Sources.Kafka.Enabled {
		p.add("dlq.brokers", "required when dlq.topic is set and the Kafka source is off")
	}
	checkSecurity(p, "dlq", c.DLQ.Security, c.DLQ.ClientConfig)
}

func (c *Config) validateExecutor(p *problems) {
	e := c.Executor
	if e.BinaryPath == "" {
		p.add("executor.binary_path", "required: the program that processes each message")
	}
	if e.PoolSize < 1 {
		p.add("executor.pool_size", "must be at least 1")
	}
	if e.Timeout <= 0 {
		p.add("executor.timeout", "must be positive")
	}
	if e.MaxOutputBytes < 1 {
		p.add("executor.max_output_bytes", "must be at least 1")
	}
	if c.Handler.MaxAttempts < 1 {
		p.add("handler.max_attempts", "must be at least 1")
	}
	if c.Handler.RetryBackoff < 0 {
		p.add("handler.retry_backoff", "must not be negative")
	}
}

func (c *Config) validateHistory(p *problems) {
	h := c.History
	if h.SealInterval <= 0 {
		p.add("history.seal_interval", "must be positive")
	}
	if h.MergedRetentionDays < 1 {
		p.add("history.merged_retention_days", "must be at least 1")
	}
	if h.Archive.After <= 0 {
		p.add("history.archive.after", "must be positive")
	}
	if h.Archive.Window <= 0 {
		p.add("history.archive.window", "must be positive")
	}
	if c.Fleet.Registry.Heartbeat <= 0 {
		p.add("fleet.registry.heartbeat", "must be positive")
	}
	if c.Fleet.CacheExchange.Interval <= 0 {
		p.add("fleet.cache_exchange.interval", "must be positive")
	}
	if c.Throughput.Window <= 0 {
		p.add("throughput.window", "must be positive")
	}
}

// validateUIDeclarations checks the exec handler's declared pages and probe
// details; each problem names its key under handler.ui_pages or
// handler.probe_details and the error type a Go handler would get.
func (c *Config) validateUIDeclarations(p *problems) {
	var pe *ui.UIPagesConfigError
	if err := ui.ValidatePages(c.Handler.UIPages); errors.As(err, &pe) {
		for _, pr := range pe.Problems {
			*p = append(*p, declProblem("handler.ui_pages", "pages", "UIPagesConfigError", pr))
		}
	}
	var de *ui.ProbeDetailsConfigError
	if err := ui.ValidateProbeDetails(c.Handler.ProbeDetails); errors.As(err, &de) {
		for _, pr := range de.Problems {
			*p = append(*p, declProblem("handler.probe_details.fields", "fields", "ProbeDetailsConfigError", pr))
		}
	}
}

// declProblem renders a ui.Problem under its config key: the ui package's
// list name (pages, fields) becomes root, e.g.
// `handler.ui_pages[0] (slug "orders") widgets[1].columns: ...`.
func declProblem(root, list, kind string, pr ui.Problem) string {
	where, field := pr.Where, pr.Field
	if rest, ok := strings.CutPrefix(where, list+"["); ok {
		where = root + "[" + rest
	}
	if where == "" {
		where, field = root, ""
	}
	if field != "" {
		where += " " + field
	}
	return fmt.Sprintf("%s: %s (%s)", where, pr.Message, kind)
}
