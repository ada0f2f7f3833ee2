package worker

import (
	"os"
	"runtime"
	"time"
)

// Config is the whole TOML configuration of a worker. Keys keep the spec's
// names; DefaultConfig holds every default. Secret fields carry the struct
// tag `secret:"true"` and are masked in every view (see Masked).
type Config struct {
	Worker        WorkerConfig        `toml:"worker" json:"worker"`
	Metrics       MetricsConfig       `toml:"metrics" json:"metrics"`
	UI            UIConfig            `toml:"ui" json:"ui"`
	Executor      ExecutorConfig      `toml:"executor" json:"executor"`
	Handler       HandlerConfig       `toml:"handler" json:"handler"`
	Pipeline      PipelineConfig      `toml:"pipeline" json:"pipeline"`
	Sources       SourcesConfig       `toml:"sources" json:"sources"`
	Sinks         SinksConfig         `toml:"sinks" json:"sinks"`
	DLQ           DLQConfig           `toml:"dlq" json:"dlq"`
	Storage       DirConfig           `toml:"storage" json:"storage"`
	Shared        DirConfig           `toml:"shared" json:"shared"`
	History       HistoryConfig       `toml:"history" json:"history"`
	Cache         CacheConfig         `toml:"cache" json:"cache"`
	Fleet         FleetConfig         `toml:"fleet" json:"fleet"`
	Offload       ThreadsConfig       `toml:"offload" json:"offload"`
	IO            ThreadsConfig       `toml:"io" json:"io"`
	RuntimeHealth RuntimeHealthConfig `toml:"runtime_health" json:"runtime_health"`
	Throughput    ThroughputConfig    `toml:"throughput" json:"throughput"`
}

// WorkerConfig identifies the worker in its fleet.
type WorkerConfig struct {
	Name            string   `toml:"name" json:"name"`
	Cluster         string   `toml:"cluster" json:"cluster"`
	ShutdownTimeout Duration `toml:"shutdown_timeout" json:"shutdown_timeout"`
}

// MetricsConfig is the Prometheus exporter surface.
type MetricsConfig struct {
	Enabled bool   `toml:"enabled" json:"enabled"`
	Host    string `toml:"host" json:"host"`
	Port    int    `toml:"port" json:"port"`
}

// UIConfig is the operator UI server and its feature switches.
type UIConfig struct {
	Enabled                bool               `toml:"enabled" json:"enabled"`
	Host                   string             `toml:"host" json:"host"`
	Port                   int                `toml:"port" json:"port"`
	AuthToken              string             `toml:"auth_token" json:"auth_token" secret:"true"`
	PublicURL              string             `toml:"public_url" json:"public_url"`
	ProbeEnabled           bool               `toml:"probe_enabled" json:"probe_enabled"`
	MergeEnabled           bool               `toml:"merge_enabled" json:"merge_enabled"`
	KafkaReadEnabled       bool               `toml:"kafka_read_enabled" json:"kafka_read_enabled"`
	ConsumePause           ConsumePauseConfig `toml:"consume_pause" json:"consume_pause"`
	Release                ReleaseConfig      `toml:"release" json:"release"`
	PrometheusURL          string             `toml:"prometheus_url" json:"prometheus_url"`
	PrometheusWorkerLabel  string             `toml:"prometheus_worker_label" json:"prometheus_worker_label"`
	PrometheusClusterLabel string             `toml:"prometheus_cluster_label" json:"prometheus_cluster_label"`
	CustomLinks            []CustomLink       `toml:"custom_links" json:"custom_links"`
	CustomRenderersPath    string             `toml:"custom_renderers_path" json:"custom_renderers_path"`
	LinkBases              map[string]string  `toml:"link_bases" json:"link_bases"`
	AllowedWSOrigins       []string           `toml:"allowed_ws_origins" json:"allowed_ws_origins"`
}

// ConsumePauseConfig switches the timed consume pause (spec 2.3).
type ConsumePauseConfig struct {
	Enabled          bool  `toml:"enabled" json:"enabled"`
	DurationsSeconds []int `toml:"durations_seconds" json:"durations_seconds"`
}

// ReleaseConfig is where the decoupled UI bundle comes from.
type ReleaseConfig struct {
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

// ExecutorConfig describes the external executor binary and its pool.
type ExecutorConfig struct {
	BinaryPath     string            `toml:"binary_path" json:"binary_path"`
	Args           []string          `toml:"args" json:"args"`
	Env            map[string]string `toml:"env" json:"env" secret:"values"`
	PoolSize       int               `toml:"pool_size" json:"pool_size"`
	Timeout        Duration          `toml:"timeout" json:"timeout"`
	MaxOutputBytes int64             `toml:"max_output_bytes" json:"max_output_bytes"`
}

// HandlerConfig tunes the built-in exec handler.
type HandlerConfig struct {
	MaxAttempts  int      `toml:"max_attempts" json:"max_attempts"`
	RetryBackoff Duration `toml:"retry_backoff" json:"retry_backoff"`
	LabelFields  []string `toml:"label_fields" json:"label_fields"`
}

// PipelineConfig bounds work in flight.
type PipelineConfig struct {
	MaxInFlight int `toml:"max_in_flight" json:"max_in_flight"`
}

// SourcesConfig holds the input sources.
type SourcesConfig struct {
	Kafka KafkaSourceConfig `toml:"kafka" json:"kafka"`
	HTTP  HTTPSourceConfig  `toml:"http" json:"http"`
}

// KafkaSourceConfig is the consumer-group input.
type KafkaSourceConfig struct {
	Enabled             bool              `toml:"enabled" json:"enabled"`
	Brokers             []string          `toml:"brokers" json:"brokers"`
	Topic               string            `toml:"topic" json:"topic"`
	Group               string            `toml:"group" json:"group"`
	Security            SecurityConfig    `toml:"security" json:"security"`
	ClientConfig        map[string]string `toml:"client_config" json:"client_config" secret:"values"`
	StartupAlignEnabled bool              `toml:"startup_align_enabled" json:"startup_align_enabled"`
	StartupAlignSeconds int               `toml:"startup_align_seconds" json:"startup_align_seconds"`
	CommitInterval      Duration          `toml:"commit_interval" json:"commit_interval"`
	MaxPollRecords      int               `toml:"max_poll_records" json:"max_poll_records"`
	RevokeTimeout       Duration          `toml:"revoke_timeout" json:"revoke_timeout"`
}

// SecurityConfig is a Kafka connection's security block.
type SecurityConfig struct {
	Protocol      string `toml:"protocol" json:"protocol"`
	SASLMechanism string `toml:"sasl_mechanism" json:"sasl_mechanism"`
	Username      string `toml:"username" json:"username"`
	Password      string `toml:"password" json:"password" secret:"true"`
	CAFile        string `toml:"ca_file" json:"ca_file"`
	CertFile      string `toml:"cert_file" json:"cert_file"`
	KeyFile       string `toml:"key_file" json:"key_file"`
}

// HTTPSourceConfig is the HTTP ingress input.
type HTTPSourceConfig struct {
	Enabled       bool         `toml:"enabled" json:"enabled"`
	Host          string       `toml:"host" json:"host"`
	Port          int          `toml:"port" json:"port"`
	SinksEnabled  bool         `toml:"sinks_enabled" json:"sinks_enabled"`
	MaxConcurrent int          `toml:"max_concurrent" json:"max_concurrent"`
	MaxBodyBytes  int64        `toml:"max_body_bytes" json:"max_body_bytes"`
	Clients       []HTTPClient `toml:"clients" json:"clients"`
}

// HTTPClient is one ingress caller with its own token and rate.
type HTTPClient struct {
	Name  string `toml:"name" json:"name"`
	Token string `toml:"token" json:"token" secret:"true"`
	RPM   int    `toml:"rpm" json:"rpm"`
}

// SinksConfig holds the named sink instances.
type SinksConfig struct {
	Kafka []KafkaSinkConfig `toml:"kafka" json:"kafka"`
}

// KafkaSinkConfig is one named Kafka sink.
type KafkaSinkConfig struct {
	Name         string            `toml:"name" json:"name"`
	Topic        string            `toml:"topic" json:"topic"`
	Brokers      []string          `toml:"brokers" json:"brokers"`
	Security     SecurityConfig    `toml:"security" json:"security"`
	ClientConfig map[string]string `toml:"client_config" json:"client_config" secret:"values"`
	Breaker      BreakerConfig     `toml:"breaker" json:"breaker"`
	// DeliveryTimeout is how long a produce may go unacknowledged before it
	// counts as a breaker failure (the record itself is kept and retried).
	DeliveryTimeout Duration `toml:"delivery_timeout" json:"delivery_timeout"`
}

// BreakerConfig tunes a sink's circuit breaker.
type BreakerConfig struct {
	FailureThreshold int      `toml:"failure_threshold" json:"failure_threshold"`
	OpenTimeout      Duration `toml:"open_timeout" json:"open_timeout"`
}

// DLQConfig is the dead-letter queue.
type DLQConfig struct {
	Topic         string            `toml:"topic" json:"topic"`
	Brokers       []string          `toml:"brokers" json:"brokers"`
	Security      SecurityConfig    `toml:"security" json:"security"`
	ClientConfig  map[string]string `toml:"client_config" json:"client_config" secret:"values"`
	OnSendFailure string            `toml:"on_send_failure" json:"on_send_failure"`
	// SendTimeout bounds one DLQ send; past it on_send_failure applies.
	SendTimeout Duration `toml:"send_timeout" json:"send_timeout"`
}

// DirConfig is a directory setting (storage.dir, shared.dir).
type DirConfig struct {
	Dir string `toml:"dir" json:"dir"`
}

// HistoryConfig tunes sealing and archiving of recorder files.
type HistoryConfig struct {
	SealInterval        Duration      `toml:"seal_interval" json:"seal_interval"`
	MergedRetentionDays int           `toml:"merged_retention_days" json:"merged_retention_days"`
	Archive             ArchiveConfig `toml:"archive" json:"archive"`
}

// ArchiveConfig folds sealed files into window archives.
type ArchiveConfig struct {
	Enabled bool     `toml:"enabled" json:"enabled"`
	After   Duration `toml:"after" json:"after"`
	Window  Duration `toml:"window" json:"window"`
}

// CacheConfig switches the handler cache.
type CacheConfig struct {
	Enabled bool `toml:"enabled" json:"enabled"`
}

// FleetConfig is the worker registry and cache exchange.
type FleetConfig struct {
	Registry      RegistryConfig      `toml:"registry" json:"registry"`
	CacheExchange CacheExchangeConfig `toml:"cache_exchange" json:"cache_exchange"`
}

// RegistryConfig selects how workers find each other.
type RegistryConfig struct {
	Provider  string   `toml:"provider" json:"provider"`
	Heartbeat Duration `toml:"heartbeat" json:"heartbeat"`
	Peers     []string `toml:"peers" json:"peers"`
}

// CacheExchangeConfig is the peer pull of cache rows. Enabled nil means
// "on when the cache is on".
type CacheExchangeConfig struct {
	Enabled  *bool    `toml:"enabled" json:"enabled"`
	Interval Duration `toml:"interval" json:"interval"`
}

// ThreadsConfig sizes a bounded pool.
type ThreadsConfig struct {
	MaxThreads int `toml:"max_threads" json:"max_threads"`
}

// RuntimeHealthConfig switches the runtime health monitor.
type RuntimeHealthConfig struct {
	Enabled bool `toml:"enabled" json:"enabled"`
}

// ThroughputConfig enables per-task cost and windowed throughput.
type ThroughputConfig struct {
	CostLabel string   `toml:"cost_label" json:"cost_label"`
	Window    Duration `toml:"window" json:"window"`
}

// DefaultConfig returns the configuration with every default applied.
// Defaults that depend on other keys (pool sizes, max_in_flight, DLQ topic)
// are resolved by Config.Resolve after decoding.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	return Config{
		Worker:  WorkerConfig{Name: host, Cluster: "default", ShutdownTimeout: Duration(30 * time.Second)},
		Metrics: MetricsConfig{Enabled: true, Host: "0.0.0.0", Port: 9090},
		UI: UIConfig{
			Enabled: true, Host: "127.0.0.1", Port: 8080,
			ProbeEnabled: true, MergeEnabled: true, KafkaReadEnabled: true,
			ConsumePause: ConsumePauseConfig{DurationsSeconds: []int{15, 60, 300, 900}},
			Release:      ReleaseConfig{Enabled: true},
		},
		Executor: ExecutorConfig{Timeout: Duration(30 * time.Second), MaxOutputBytes: 8 << 20},
		Handler:  HandlerConfig{MaxAttempts: 3, RetryBackoff: Duration(200 * time.Millisecond)},
		Sources: SourcesConfig{
			Kafka: KafkaSourceConfig{
				StartupAlignEnabled: true, StartupAlignSeconds: 10, CommitInterval: Duration(5 * time.Second),
				MaxPollRecords: 500, RevokeTimeout: Duration(30 * time.Second),
			},
			HTTP: HTTPSourceConfig{Host: "0.0.0.0", Port: 8090, MaxConcurrent: 64, MaxBodyBytes: 1 << 20},
		},
		DLQ:     DLQConfig{OnSendFailure: "stall", SendTimeout: Duration(30 * time.Second)},
		Storage: DirConfig{Dir: "/tmp/svc"},
		History: HistoryConfig{
			SealInterval: Duration(10 * time.Minute), MergedRetentionDays: 7,
			Archive: ArchiveConfig{Enabled: true, After: Duration(time.Hour), Window: Duration(time.Hour)},
		},
		Fleet: FleetConfig{
			Registry:      RegistryConfig{Provider: "filesystem", Heartbeat: Duration(5 * time.Second)},
			CacheExchange: CacheExchangeConfig{Interval: Duration(5 * time.Second)},
		},
		Offload:       ThreadsConfig{MaxThreads: 2},
		RuntimeHealth: RuntimeHealthConfig{Enabled: true},
		Throughput:    ThroughputConfig{Window: Duration(60 * time.Second)},
	}
}

// DefaultRPM is a client's requests-per-minute when its entry sets none.
const DefaultRPM = 600

// Resolve fills the defaults that depend on other keys or on the machine.
func (c *Config) Resolve() {
	cpus := runtime.NumCPU()
	if c.Executor.PoolSize == 0 {
		c.Executor.PoolSize = cpus
	}
	if c.Pipeline.MaxInFlight == 0 {
		c.Pipeline.MaxInFlight = 4 * c.Executor.PoolSize
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
		b := &c.Sinks.Kafka[i].Breaker
		if b.FailureThreshold == 0 {
			b.FailureThreshold = 5
		}
		if b.OpenTimeout == 0 {
			b.OpenTimeout = Duration(10 * time.Second)
		}
		if c.Sinks.Kafka[i].DeliveryTimeout == 0 {
			c.Sinks.Kafka[i].DeliveryTimeout = Duration(10 * time.Second)
		}
	}
	if c.Fleet.CacheExchange.Enabled == nil {
		on := c.Cache.Enabled
		c.Fleet.CacheExchange.Enabled = &on
	}
	for k, v := range c.UI.LinkBases {
		for len(v) > 0 && v[len(v)-1] == '/' {
			v = v[:len(v)-1]
		}
		c.UI.LinkBases[k] = v
	}
}

// DLQTopic is the dead-letter topic: dlq.topic, else {sources.kafka.topic}_dlq
// when the Kafka source is on, else "" (no DLQ; spec 1.2 rule 3).
func (c *Config) DLQTopic() string {
	if c.DLQ.Topic != "" {
		return c.DLQ.Topic
	}
	if c.Sources.Kafka.Enabled && c.Sources.Kafka.Topic != "" {
		return c.Sources.Kafka.Topic + "_dlq"
	}
	return ""
}

// SinksRequired reports whether results go to sinks (spec 1.2 rule 2).
func (c *Config) SinksRequired() bool {
	return c.Sources.Kafka.Enabled || (c.Sources.HTTP.Enabled && c.Sources.HTTP.SinksEnabled)
}

// CacheExchangeOn reports the effective fleet.cache_exchange.enabled.
func (c *Config) CacheExchangeOn() bool {
	return c.Fleet.CacheExchange.Enabled != nil && *c.Fleet.CacheExchange.Enabled
}
