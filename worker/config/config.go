package config

import (
	"maps"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"svc/worker/kconn"
)

// Config is the whole TOML configuration of a worker (docs/configuration.md
// lists every key); Default holds every default. Secret fields carry the
// tag `secret:"true"` and are masked in every view (see Masked).
type Config struct {
	Worker        Worker        `toml:"worker" json:"worker"`
	Metrics       Metrics       `toml:"metrics" json:"metrics"`
	UI            UI            `toml:"ui" json:"ui"`
	Executor      Executor      `toml:"executor" json:"executor"`
	Handler       Handler       `toml:"handler" json:"handler"`
	Pipeline      Pipeline      `toml:"pipeline" json:"pipeline"`
	Sources       Sources       `toml:"sources" json:"sources"`
	Sinks         Sinks         `toml:"sinks" json:"sinks"`
	DLQ           DLQ           `toml:"dlq" json:"dlq"`
	Storage       Dir           `toml:"storage" json:"storage"`
	Shared        Dir           `toml:"shared" json:"shared"`
	History       History       `toml:"history" json:"history"`
	Cache         Cache         `toml:"cache" json:"cache"`
	Fleet         Fleet         `toml:"fleet" json:"fleet"`
	Offload       Threads       `toml:"offload" json:"offload"`
	IO            Threads       `toml:"io" json:"io"`
	RuntimeHealth RuntimeHealth `toml:"runtime_health" json:"runtime_health"`
	Throughput    Throughput    `toml:"throughput" json:"throughput"`

	// src is where a loaded config's keys came from, for DecodeTables.
	src *source
}

// Worker identifies the worker in its fleet.
type Worker struct {
	Name            string   `toml:"name" json:"name"`
	Cluster         string   `toml:"cluster" json:"cluster"`
	ShutdownTimeout Duration `toml:"shutdown_timeout" json:"shutdown_timeout"`
}

// Metrics is the Prometheus exporter surface.
type Metrics struct {
	Enabled bool   `toml:"enabled" json:"enabled"`
	Host    string `toml:"host" json:"host"`
	Port    int    `toml:"port" json:"port"`
	// MaxConnections: 0 derives the cap from the file limit (httpd.ConnCaps).
	MaxConnections int `toml:"max_connections" json:"max_connections"`
}

// UI is the operator UI server and its feature switches.
type UI struct {
	Enabled                bool              `toml:"enabled" json:"enabled"`
	Host                   string            `toml:"host" json:"host"`
	Port                   int               `toml:"port" json:"port"`
	AuthToken              string            `toml:"auth_token" json:"auth_token" secret:"true"`
	MaxConnections         int               `toml:"max_connections" json:"max_connections"`
	AllowUnauthenticated   bool              `toml:"allow_unauthenticated" json:"allow_unauthenticated"`
	PublicURL              string            `toml:"public_url" json:"public_url"`
	ProbeEnabled           bool              `toml:"probe_enabled" json:"probe_enabled"`
	MergeEnabled           bool              `toml:"merge_enabled" json:"merge_enabled"`
	KafkaReadEnabled       bool              `toml:"kafka_read_enabled" json:"kafka_read_enabled"`
	RedriveEnabled         bool              `toml:"redrive_enabled" json:"redrive_enabled"`
	ConsumePause           ConsumePause      `toml:"consume_pause" json:"consume_pause"`
	Release                Release           `toml:"release" json:"release"`
	PrometheusURL          string            `toml:"prometheus_url" json:"prometheus_url"`
	PrometheusWorkerLabel  string            `toml:"prometheus_worker_label" json:"prometheus_worker_label"`
	PrometheusClusterLabel string            `toml:"prometheus_cluster_label" json:"prometheus_cluster_label"`
	CustomLinks            []CustomLink      `toml:"custom_links" json:"custom_links"`
	CustomRenderersPath    string            `toml:"custom_renderers_path" json:"custom_renderers_path"`
	LinkBases              map[string]string `toml:"link_bases" json:"link_bases"`
	AllowedWSOrigins       []string          `toml:"allowed_ws_origins" json:"allowed_ws_origins"`
	AllowedHosts           []string          `toml:"allowed_hosts" json:"allowed_hosts"`
}

// ConsumePause switches the timed consume pause.
type ConsumePause struct {
	Enabled          bool  `toml:"enabled" json:"enabled"`
	DurationsSeconds []int `toml:"durations_seconds" json:"durations_seconds"`
}

// Release is where the decoupled UI bundle comes from.
type Release struct {
	Enabled  bool   `toml:"enabled" json:"enabled"`
	Repo     string `toml:"repo" json:"repo"`
	Version  string `toml:"version" json:"version"`
	CacheDir string `toml:"cache_dir" json:"cache_dir"`
}

// CustomLink is an extra dashboard link.
type CustomLink struct {
	Label string `toml:"label" json:"label"`
	URL   string `toml:"url" json:"url"`
}

// Executor describes the external executor binary and its pool.
type Executor struct {
	BinaryPath     string            `toml:"binary_path" json:"binary_path"`
	Args           []string          `toml:"args" json:"args"`
	Env            map[string]string `toml:"env" json:"env" secret:"values"`
	PoolSize       int               `toml:"pool_size" json:"pool_size"`
	Timeout        Duration          `toml:"timeout" json:"timeout"`
	MaxOutputBytes int64             `toml:"max_output_bytes" json:"max_output_bytes"`
	// Mode is "spawn" or "persistent" (executor protocol v2).
	Mode             string   `toml:"mode" json:"mode"`
	MaxTasksPerChild int      `toml:"max_tasks_per_child" json:"max_tasks_per_child"`
	ReadyTimeout     Duration `toml:"ready_timeout" json:"ready_timeout"`
}

// Handler tunes the built-in exec handler.
type Handler struct {
	MaxAttempts  int      `toml:"max_attempts" json:"max_attempts"`
	RetryBackoff Duration `toml:"retry_backoff" json:"retry_backoff"`
	LabelFields  []string `toml:"label_fields" json:"label_fields"`
	CacheKeys    []string `toml:"cache_keys" json:"cache_keys"`
	// UIPages and ProbeDetails are plain tables here: package ui owns their
	// model and validation, and DecodeTables reads them into it.
	UIPages      []map[string]any `toml:"ui_pages" json:"ui_pages"`
	ProbeDetails map[string]any   `toml:"probe_details" json:"probe_details"`
}

// Pipeline bounds work in flight.
type Pipeline struct {
	MaxInFlight int `toml:"max_in_flight" json:"max_in_flight"`
}

// Sources holds the input sources.
type Sources struct {
	Kafka KafkaSource `toml:"kafka" json:"kafka"`
	HTTP  HTTPSource  `toml:"http" json:"http"`
}

// KafkaSource is the consumer-group input.
type KafkaSource struct {
	Enabled             bool              `toml:"enabled" json:"enabled"`
	Brokers             []string          `toml:"brokers" json:"brokers"`
	Topic               string            `toml:"topic" json:"topic"`
	Group               string            `toml:"group" json:"group"`
	Security            Security          `toml:"security" json:"security"`
	ClientConfig        map[string]string `toml:"client_config" json:"client_config" secret:"values"`
	StartupAlignEnabled bool              `toml:"startup_align_enabled" json:"startup_align_enabled"`
	StartupAlignSeconds int               `toml:"startup_align_seconds" json:"startup_align_seconds"`
	CommitInterval      Duration          `toml:"commit_interval" json:"commit_interval"`
	MaxPollRecords      int               `toml:"max_poll_records" json:"max_poll_records"`
	RevokeTimeout       Duration          `toml:"revoke_timeout" json:"revoke_timeout"`
	// LeaveGroupOnShutdown leaves the group even as a static member.
	LeaveGroupOnShutdown bool  `toml:"leave_group_on_shutdown" json:"leave_group_on_shutdown"`
	FetchBufferBytes     int64 `toml:"fetch_buffer_bytes" json:"fetch_buffer_bytes"`
	// Delivery is DeliveryAtLeastOnce or DeliveryExactlyOnce.
	Delivery string `toml:"delivery" json:"delivery"`
}

// Delivery guarantees of sources.kafka.delivery.
const (
	DeliveryAtLeastOnce = "at_least_once"
	DeliveryExactlyOnce = "exactly_once"
)

// sources.kafka.commit_interval's defaults; in exactly-once mode it is the
// transaction interval (Kafka Streams' default for exactly_once_v2).
const (
	atLeastOnceCommitInterval = 5 * time.Second
	exactlyOnceCommitInterval = 100 * time.Millisecond
)

// ExactlyOnce reports whether the Kafka source is on in exactly-once mode.
func (c *Config) ExactlyOnce() bool {
	return c.Sources.Kafka.Enabled && c.Sources.Kafka.Delivery == DeliveryExactlyOnce
}

// KafkaDelivery is sources.kafka.delivery when the Kafka source is on,
// else "".
func (c *Config) KafkaDelivery() string {
	if !c.Sources.Kafka.Enabled {
		return ""
	}
	return c.Sources.Kafka.Delivery
}

// TransactionalID is the exactly-once producer's transactional.id: stable
// per worker name, so a restarted worker fences its predecessor.
func (c *Config) TransactionalID() string { return "svc-" + c.Worker.Name }

// DefaultFetchBufferBytes is sources.kafka.fetch_buffer_bytes' default.
const DefaultFetchBufferBytes = 2 << 20

// Security is a Kafka connection's security block.
type Security struct {
	Protocol      string `toml:"protocol" json:"protocol"`
	SASLMechanism string `toml:"sasl_mechanism" json:"sasl_mechanism"`
	Username      string `toml:"username" json:"username"`
	Password      string `toml:"password" json:"password" secret:"true"`
	CAFile        string `toml:"ca_file" json:"ca_file"`
	CertFile      string `toml:"cert_file" json:"cert_file"`
	KeyFile       string `toml:"key_file" json:"key_file"`
}

// HTTPSource is the HTTP ingress input.
type HTTPSource struct {
	Enabled       bool   `toml:"enabled" json:"enabled"`
	Host          string `toml:"host" json:"host"`
	Port          int    `toml:"port" json:"port"`
	SinksEnabled  bool   `toml:"sinks_enabled" json:"sinks_enabled"`
	MaxConcurrent int    `toml:"max_concurrent" json:"max_concurrent"`
	MaxBodyBytes  int64  `toml:"max_body_bytes" json:"max_body_bytes"`
	// MaxConnections counts idle and unauthenticated connections too.
	MaxConnections         int          `toml:"max_connections" json:"max_connections"`
	MaxConcurrentPerClient int          `toml:"max_concurrent_per_client" json:"max_concurrent_per_client"`
	BodyTimeout            Duration     `toml:"body_timeout" json:"body_timeout"`
	AllowedHosts           []string     `toml:"allowed_hosts" json:"allowed_hosts"`
	Clients                []HTTPClient `toml:"clients" json:"clients"`
	AllowUnauthenticated   bool         `toml:"allow_unauthenticated" json:"allow_unauthenticated"`
}

// HTTPClient is one ingress caller with its own token and rate.
type HTTPClient struct {
	Name  string `toml:"name" json:"name"`
	Token string `toml:"token" json:"token" secret:"true"`
	RPM   int    `toml:"rpm" json:"rpm"`
}

// Sinks holds the named sink instances.
type Sinks struct {
	Kafka []KafkaSink `toml:"kafka" json:"kafka"`
}

// KafkaSink is one named Kafka sink.
type KafkaSink struct {
	Name         string            `toml:"name" json:"name"`
	Topic        string            `toml:"topic" json:"topic"`
	Brokers      []string          `toml:"brokers" json:"brokers"`
	Security     Security          `toml:"security" json:"security"`
	ClientConfig map[string]string `toml:"client_config" json:"client_config" secret:"values"`
	Breaker      Breaker           `toml:"breaker" json:"breaker"`
	// ForwardHeaders copies the input's own headers (not svc-*) onto results.
	ForwardHeaders  bool     `toml:"forward_headers" json:"forward_headers"`
	DeliveryTimeout Duration `toml:"delivery_timeout" json:"delivery_timeout"`
	Compression     string   `toml:"compression" json:"compression"`
	// MaxMessageBytes: 0 asks the brokers (the topic's max.message.bytes).
	MaxMessageBytes int `toml:"max_message_bytes" json:"max_message_bytes"`
}

// Breaker tunes a sink's circuit breaker.
type Breaker struct {
	FailureThreshold int      `toml:"failure_threshold" json:"failure_threshold"`
	OpenTimeout      Duration `toml:"open_timeout" json:"open_timeout"`
}

// DLQ is the dead-letter queue.
type DLQ struct {
	Topic           string            `toml:"topic" json:"topic"`
	Brokers         []string          `toml:"brokers" json:"brokers"`
	Security        Security          `toml:"security" json:"security"`
	ClientConfig    map[string]string `toml:"client_config" json:"client_config" secret:"values"`
	OnSendFailure   string            `toml:"on_send_failure" json:"on_send_failure"`
	SendTimeout     Duration          `toml:"send_timeout" json:"send_timeout"`
	Compression     string            `toml:"compression" json:"compression"`
	MaxMessageBytes int               `toml:"max_message_bytes" json:"max_message_bytes"`
}

// Compressions are the codecs of sinks.kafka[].compression and dlq.compression.
var Compressions = []string{"none", "gzip", "snappy", "lz4", "zstd"}

// DefaultCompression is the codec of a sink or the DLQ that sets none
// (cheap on small cores, read by every Kafka version in use).
const DefaultCompression = "snappy"

// MaxMessageBytesMax bounds the max_message_bytes keys (Kafka's
// socket.request.max.bytes default).
const MaxMessageBytesMax = 100 << 20

// Dir is a directory setting (storage.dir, shared.dir).
type Dir struct {
	Dir string `toml:"dir" json:"dir"`
}

// History tunes sealing and archiving of recorder files.
type History struct {
	MaxBytes             int64    `toml:"max_bytes" json:"max_bytes"`
	MaxAge               Duration `toml:"max_age" json:"max_age"`
	SealInterval         Duration `toml:"seal_interval" json:"seal_interval"`
	LiveMaxBytes         int64    `toml:"live_max_bytes" json:"live_max_bytes"`
	MergedRetentionDays  int      `toml:"merged_retention_days" json:"merged_retention_days"`
	Archive              Archive  `toml:"archive" json:"archive"`
	TaskDetail           string   `toml:"task_detail" json:"task_detail"` // one of TaskDetails
	SampleAbovePerSecond int      `toml:"sample_above_per_second" json:"sample_above_per_second"`
}

// TaskDetails are the accepted values of history.task_detail.
var TaskDetails = []string{"summary", "full"}

// Archive folds sealed files into window archives.
type Archive struct {
	Enabled bool     `toml:"enabled" json:"enabled"`
	After   Duration `toml:"after" json:"after"`
	Window  Duration `toml:"window" json:"window"`
}

// Cache is the handler cache, a last-write-wins key/value store.
type Cache struct {
	Enabled  bool  `toml:"enabled" json:"enabled"`
	MaxRows  int   `toml:"max_rows" json:"max_rows"`
	MaxBytes int64 `toml:"max_bytes" json:"max_bytes"`
}

// Fleet is the worker registry and cache exchange, and the workers the
// UI may send its token to.
type Fleet struct {
	Registry      Registry      `toml:"registry" json:"registry"`
	CacheExchange CacheExchange `toml:"cache_exchange" json:"cache_exchange"`
	// TrustedURLs are the origins besides this worker's and the static
	// peers' that the browser may send the UI token to (cards in the shared
	// folder are not trusted: anyone who can write there chooses them).
	TrustedURLs []string `toml:"trusted_urls" json:"trusted_urls"`
}

// Registry selects how workers find each other. Peers are listed with
// either provider; the filesystem provider adds the cards it finds.
type Registry struct {
	Provider      string   `toml:"provider" json:"provider"`
	Heartbeat     Duration `toml:"heartbeat" json:"heartbeat"`
	CardRetention Duration `toml:"card_retention" json:"card_retention"`
	Peers         []Peer   `toml:"peers" json:"peers"`
}

// Peer is a worker the registry lists from the config (a static peer).
type Peer struct {
	Name    string `toml:"name" json:"name"`
	Cluster string `toml:"cluster" json:"cluster"`
	URL     string `toml:"url" json:"url"`
}

// CacheExchange is the peer pull of cache rows. Enabled nil means
// "on when the cache is on".
type CacheExchange struct {
	Enabled  *bool    `toml:"enabled" json:"enabled"`
	Interval Duration `toml:"interval" json:"interval"`
	Timeout  Duration `toml:"timeout" json:"timeout"`
}

// Threads sizes a bounded pool.
type Threads struct {
	MaxThreads int `toml:"max_threads" json:"max_threads"`
}

// RuntimeHealth switches the runtime health monitor.
type RuntimeHealth struct {
	Enabled        bool     `toml:"enabled" json:"enabled"`
	Interval       Duration `toml:"interval" json:"interval"`
	StallThreshold Duration `toml:"stall_threshold" json:"stall_threshold"`
}

// Throughput enables per-task cost and windowed throughput.
type Throughput struct {
	CostLabel string   `toml:"cost_label" json:"cost_label"`
	Window    Duration `toml:"window" json:"window"`
}

// Default returns the configuration with every default applied.
// Defaults that depend on other keys (pool sizes, max_in_flight, DLQ topic,
// commit_interval) are resolved by Config.Resolve after decoding.
func Default() Config {
	host, _ := os.Hostname()
	return Config{
		Worker:  Worker{Name: host, Cluster: "default", ShutdownTimeout: Duration(30 * time.Second)},
		Metrics: Metrics{Enabled: true, Host: "0.0.0.0", Port: 9090},
		UI: UI{
			Enabled: true, Host: "127.0.0.1", Port: 8080,
			ProbeEnabled: true, MergeEnabled: true, KafkaReadEnabled: true,
			ConsumePause: ConsumePause{DurationsSeconds: []int{15, 60, 300, 900}},
			Release:      Release{Enabled: true},
		},
		Executor: Executor{Timeout: Duration(30 * time.Second), MaxOutputBytes: 8 << 20, Mode: "spawn", ReadyTimeout: Duration(10 * time.Second)},
		Handler:  Handler{MaxAttempts: 3, RetryBackoff: Duration(200 * time.Millisecond)},
		Sources: Sources{
			Kafka: KafkaSource{
				StartupAlignEnabled: true, StartupAlignSeconds: 10,
				MaxPollRecords: 500, RevokeTimeout: Duration(30 * time.Second), LeaveGroupOnShutdown: true,
				FetchBufferBytes: DefaultFetchBufferBytes,
			},
			HTTP: HTTPSource{
				Host: "0.0.0.0", Port: 8090, MaxConcurrent: 64, MaxBodyBytes: 1 << 20,
				MaxConcurrentPerClient: 16, BodyTimeout: Duration(10 * time.Second),
			},
		},
		DLQ:     DLQ{OnSendFailure: "stall", SendTimeout: Duration(30 * time.Second), Compression: DefaultCompression},
		Storage: Dir{Dir: "/tmp/svc"},
		History: History{
			MaxBytes: 4 << 30, MaxAge: Duration(7 * 24 * time.Hour),
			SealInterval: Duration(10 * time.Minute), LiveMaxBytes: 128 << 20, MergedRetentionDays: 7, TaskDetail: "summary", SampleAbovePerSecond: 2000,
			Archive: Archive{Enabled: true, After: Duration(2 * time.Minute), Window: Duration(10 * time.Minute)},
		},
		Cache: Cache{MaxRows: 10_000, MaxBytes: 64 << 20},
		Fleet: Fleet{
			Registry:      Registry{Provider: "filesystem", Heartbeat: Duration(5 * time.Second), CardRetention: Duration(24 * time.Hour)},
			CacheExchange: CacheExchange{Interval: Duration(5 * time.Second), Timeout: Duration(10 * time.Second)},
		},
		Offload:       Threads{MaxThreads: 2},
		RuntimeHealth: RuntimeHealth{Enabled: true, Interval: Duration(250 * time.Millisecond), StallThreshold: Duration(100 * time.Millisecond)},
		Throughput:    Throughput{Window: Duration(60 * time.Second)},
	}
}

// DefaultRPM is a client's requests-per-minute when its entry sets none.
const DefaultRPM = 600

// Resolve fills the defaults that depend on other keys or on the machine
// (a bare executor name is looked up on PATH here), so the config shows
// the values the worker uses. Calling it again changes nothing.
func (c *Config) Resolve() {
	cpus := runtime.NumCPU()
	if p := c.Executor.BinaryPath; p != "" && !strings.Contains(p, "/") {
		if abs, err := exec.LookPath(p); err == nil {
			c.Executor.BinaryPath = abs
		}
	}
	k := &c.Sources.Kafka
	if k.Security.Protocol == "" {
		k.Security.Protocol = kconn.ProtocolPlaintext
	}
	if k.Delivery == "" {
		k.Delivery = DeliveryAtLeastOnce
	}
	if k.CommitInterval == 0 {
		k.CommitInterval = Duration(atLeastOnceCommitInterval)
		if k.Delivery == DeliveryExactlyOnce {
			k.CommitInterval = Duration(exactlyOnceCommitInterval)
		}
	}
	if c.DLQ.Topic == "" && k.Enabled && k.Topic != "" {
		c.DLQ.Topic = k.Topic + "_dlq"
	}
	// A sink or the DLQ with empty brokers uses the consumer's whole
	// connection, so only one with its own brokers shows its own protocol.
	if len(c.DLQ.Brokers) > 0 && c.DLQ.Security.Protocol == "" {
		c.DLQ.Security.Protocol = kconn.ProtocolPlaintext
	}
	if c.Executor.PoolSize == 0 {
		c.Executor.PoolSize = cpus
	}
	if c.Pipeline.MaxInFlight == 0 {
		// docs/operations.md, "Intake queues and fair dispatch".
		c.Pipeline.MaxInFlight = 8 * c.Executor.PoolSize
	}
	if c.IO.MaxThreads == 0 {
		c.IO.MaxThreads = min(32, cpus+4)
	}
	for i := range c.Sources.HTTP.Clients {
		if c.Sources.HTTP.Clients[i].RPM == 0 {
			c.Sources.HTTP.Clients[i].RPM = DefaultRPM
		}
	}
	for i := range c.Sinks.Kafka {
		s := &c.Sinks.Kafka[i]
		if len(s.Brokers) > 0 && s.Security.Protocol == "" {
			s.Security.Protocol = kconn.ProtocolPlaintext
		}
		if s.Breaker.FailureThreshold == 0 {
			s.Breaker.FailureThreshold = 5
		}
		if s.Breaker.OpenTimeout == 0 {
			s.Breaker.OpenTimeout = Duration(10 * time.Second)
		}
		if s.DeliveryTimeout == 0 {
			s.DeliveryTimeout = Duration(10 * time.Second)
		}
		if s.Compression == "" {
			s.Compression = DefaultCompression
		}
	}
	if c.DLQ.Compression == "" {
		c.DLQ.Compression = DefaultCompression
	}
	c.resolveFleet()
	for k, v := range c.UI.LinkBases {
		c.UI.LinkBases[k] = strings.TrimRight(v, "/")
	}
}

// connOf is the connection of a sink or the DLQ: its own, or a copy of the
// consumer's whole connection when it names no broker, its own
// client_config keys (linger.ms, say) overriding the consumer's.
func (c *Config) connOf(brokers []string, sec Security, cc map[string]string) kconn.Conn {
	if len(brokers) > 0 {
		return kconn.Conn{Brokers: brokers, Security: sec.toKafka(), ClientConfig: cc}
	}
	k := c.Sources.Kafka
	var own map[string]string
	if k.ClientConfig != nil || cc != nil {
		own = maps.Clone(k.ClientConfig)
		if own == nil {
			own = map[string]string{}
		}
		maps.Copy(own, cc)
	}
	return kconn.Conn{Brokers: slices.Clone(k.Brokers), Security: k.Security.toKafka(), ClientConfig: own}
}

// DLQTopic is the dead-letter topic: dlq.topic, else {sources.kafka.topic}_dlq
// when the Kafka source is on, else "" (no DLQ).
func (c *Config) DLQTopic() string {
	if c.DLQ.Topic != "" {
		return c.DLQ.Topic
	}
	if c.Sources.Kafka.Enabled && c.Sources.Kafka.Topic != "" {
		return c.Sources.Kafka.Topic + "_dlq"
	}
	return ""
}

// SinksRequired reports whether results go to sinks.
func (c *Config) SinksRequired() bool {
	return c.Sources.Kafka.Enabled || (c.Sources.HTTP.Enabled && c.Sources.HTTP.SinksEnabled)
}

// CacheExchangeOn reports the effective fleet.cache_exchange.enabled.
func (c *Config) CacheExchangeOn() bool {
	return c.Fleet.CacheExchange.Enabled != nil && *c.Fleet.CacheExchange.Enabled
}
