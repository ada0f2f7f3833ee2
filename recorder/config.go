package recorder

import (
	"fmt"
	"log/slog"
	"time"
)

// Defaults applied by Open to zero Config fields.
const (
	DefaultSealInterval        = 10 * time.Minute
	DefaultArchiveAfter        = 2 * time.Minute
	DefaultArchiveWindow       = 10 * time.Minute
	DefaultMergedRetentionDays = 7
	DefaultMemoryEvents        = 10000
	DefaultBufferSize          = 8192
	DefaultWatchdogInterval    = 5 * time.Second
	DefaultLiveMaxBytes        = 128 << 20
	DefaultMaxBytes            = 4 << 30
	DefaultMaxAge              = 7 * 24 * time.Hour
)

// Upper bounds of the in-memory sizes (allocated up front or grown to).
const (
	maxMemoryEvents = 1_000_000
	maxBufferSize   = 1_000_000
)

// Config configures a Recorder. Zero durations and sizes take the defaults
// above; negative values are rejected by Open.
type Config struct {
	// Dir is storage.dir; empty selects memory-only mode.
	Dir string
	// SharedDir is shared.dir, the root of history/ and merged/; empty uses Dir.
	SharedDir string
	// Worker and Cluster name this worker; both must pass ValidName.
	Worker, Cluster string
	// StartedAt is the process start; it names the first live file.
	StartedAt time.Time
	// SealInterval and LiveMaxBytes are history.seal_interval and
	// history.live_max_bytes (checked after every write transaction).
	SealInterval time.Duration
	LiveMaxBytes int64
	// ArchiveEnabled, ArchiveAfter and ArchiveWindow are history.archive.*.
	ArchiveEnabled bool
	ArchiveAfter   time.Duration
	ArchiveWindow  time.Duration
	// MaxBytes and MaxAge are history.max_bytes and history.max_age, applied
	// only while archiving is enabled (retention.go).
	MaxBytes int64
	MaxAge   time.Duration
	// MergedRetentionDays is history.merged_retention_days (applied only
	// while archiving is enabled).
	MergedRetentionDays int
	// FullDetail (history.task_detail = "full") stores every event as its
	// own row instead of summarizing successful tasks (summary.go).
	FullDetail bool
	// SampleAbove is history.sample_above_per_second; 0 stores every task row.
	SampleAbove int
	// MemoryEvents is the ring size (events, and separately task rows) in
	// memory-only mode.
	MemoryEvents int
	// BufferSize is the write queue length, before the overflow list.
	BufferSize int
	// WatchdogInterval is how often the watchdog file is rewritten.
	WatchdogInterval time.Duration
	// MaskEnv redacts a task's environment before it is stored and again
	// when rows are read back; nil stores env as given.
	MaskEnv func(map[string]string) map[string]string
	// Logger receives the recorder's logs; nil discards them.
	Logger *slog.Logger
	// Now replaces time.Now, for tests.
	Now func() time.Time
}

// withDefaults returns cfg with defaults filled in, or an error naming the
// first invalid field.
func (cfg Config) withDefaults() (Config, error) {
	if err := ValidName(cfg.Worker); err != nil {
		return cfg, fmt.Errorf("validate config worker: %w", err)
	}
	if err := ValidName(cfg.Cluster); err != nil {
		return cfg, fmt.Errorf("validate config cluster: %w", err)
	}
	// merged_retention_days has no upper bound here: archive.go clamps it,
	// so a huge value means "keep for ever" rather than an overflow.
	for _, err := range []error{
		fill("seal_interval", &cfg.SealInterval, DefaultSealInterval, 0),
		fill("archive_after", &cfg.ArchiveAfter, DefaultArchiveAfter, 0),
		fill("archive_window", &cfg.ArchiveWindow, DefaultArchiveWindow, 0),
		fill("watchdog_interval", &cfg.WatchdogInterval, DefaultWatchdogInterval, 0),
		fill("max_age", &cfg.MaxAge, DefaultMaxAge, 0),
		fill("merged_retention_days", &cfg.MergedRetentionDays, DefaultMergedRetentionDays, 0),
		fill("memory_events", &cfg.MemoryEvents, DefaultMemoryEvents, maxMemoryEvents),
		fill("buffer_size", &cfg.BufferSize, DefaultBufferSize, maxBufferSize),
		fill("live_max_bytes", &cfg.LiveMaxBytes, DefaultLiveMaxBytes, 0),
		fill("max_bytes", &cfg.MaxBytes, DefaultMaxBytes, 0),
	} {
		if err != nil {
			return cfg, err
		}
	}
	// After the fill (Go leaves the order of a field read among the
	// literal's calls unspecified).
	if err := atLeastMs(cfg.ArchiveWindow); err != nil {
		return cfg, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.StartedAt.IsZero() {
		cfg.StartedAt = cfg.Now()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg, nil
}

// fill sets *v to def when it is zero; a negative value, or one above max
// when max > 0, is an error naming the key.
func fill[T int | int64 | time.Duration](name string, v *T, def, max T) error {
	switch {
	case *v < 0:
		kind := "value"
		if _, ok := any(*v).(time.Duration); ok {
			kind = "duration"
		}
		return fmt.Errorf("validate config %s: negative %s %v", name, kind, *v)
	case max > 0 && *v > max:
		return fmt.Errorf("validate config %s: %v is above %v", name, *v, max)
	case *v == 0:
		*v = def
	}
	return nil
}

// atLeastMs checks the archive window (the arguments are evaluated in
// order, so after its default was filled in).
func atLeastMs(w time.Duration) error {
	if w < time.Millisecond {
		return fmt.Errorf("validate config archive_window: %s is below 1ms", w)
	}
	return nil
}

// ValidName reports whether s can be used as a worker or cluster name: 1-128
// bytes of ASCII letters, digits, '.', '_' or '-', not starting with '.'.
// These names become path segments of the shared folder.
func ValidName(s string) error {
	if s == "" || len(s) > 128 {
		return fmt.Errorf("name %q: length must be 1-128", s)
	}
	if s[0] == '.' {
		return fmt.Errorf("name %q: must not start with '.'", s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("name %q: byte %q not allowed", s, c)
		}
	}
	return nil
}
