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

// Upper bounds of the in-memory sizes: both are allocated up front or grow
// to their size, so they are bounded like every other number.
const (
	maxMemoryEvents = 1_000_000
	maxBufferSize   = 1_000_000
)

// Config configures a Recorder. Zero durations and sizes take the defaults
// above; negative values are rejected by Open.
type Config struct {
	// Dir is storage.dir. Empty selects memory-only mode: a ring of recent
	// events and task rows, nothing sealed, no watchdog file.
	Dir string
	// SharedDir is shared.dir, the root of history/ and merged/. Empty uses
	// Dir; both empty means no shared folder at all.
	SharedDir string
	// Worker and Cluster name this worker; both become file and folder
	// names, so they must be safe names (see ValidName).
	Worker, Cluster string
	// StartedAt is the process start; it names the first live file.
	StartedAt time.Time
	// SealInterval is history.seal_interval.
	SealInterval time.Duration
	// LiveMaxBytes is history.live_max_bytes: the live file (with its
	// write-ahead log) is sealed early once it is larger, checked after
	// every write transaction (see liveTxBytes), so a busy worker's live
	// file stays bounded.
	LiveMaxBytes int64
	// ArchiveEnabled, ArchiveAfter and ArchiveWindow are history.archive.*.
	ArchiveEnabled bool
	ArchiveAfter   time.Duration
	ArchiveWindow  time.Duration
	// MaxBytes and MaxAge are history.max_bytes and history.max_age, the
	// budget and age limit of the cluster's history (sealed files and
	// archives). While archiving is enabled the oldest files are deleted
	// before a seal or an archive part would take the history past
	// MaxBytes (see makeRoom), and the holder of the archive lock deletes
	// whole windows past MaxAge, never one a live file may still be sealed
	// into.
	MaxBytes int64
	MaxAge   time.Duration
	// MergedRetentionDays is history.merged_retention_days; merge results
	// older than this are removed only while archiving is enabled.
	MergedRetentionDays int
	// FullDetail (history.task_detail = "full") stores every event of a
	// successful task as its own row, stdout tail included; otherwise they
	// are summarized into the task row (summary.go).
	FullDetail bool
	// SampleAbove (history.sample_above_per_second) is the rate of plain
	// successful tasks above which the rest of each second's are not
	// stored (their counts are); 0 stores every task row.
	SampleAbove int
	// MemoryEvents is the ring size (events, and separately task rows) in
	// memory-only mode.
	MemoryEvents int
	// BufferSize is the write queue length shared by events and task rows;
	// when it is full new items wait in the overflow list behind it
	// (overflow.go, 32 MiB), and past that are dropped and counted.
	BufferSize int
	// WatchdogInterval is how often the watchdog file is rewritten.
	WatchdogInterval time.Duration
	// MaskEnv redacts a task's environment (secret names' values masked)
	// before it is stored and again when rows are read back, so a file
	// written elsewhere shows no secret either; nil stores env as given.
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
	durations := []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"seal_interval", &cfg.SealInterval, DefaultSealInterval},
		{"archive_after", &cfg.ArchiveAfter, DefaultArchiveAfter},
		{"archive_window", &cfg.ArchiveWindow, DefaultArchiveWindow},
		{"watchdog_interval", &cfg.WatchdogInterval, DefaultWatchdogInterval},
		{"max_age", &cfg.MaxAge, DefaultMaxAge},
	}
	for _, d := range durations {
		if *d.v < 0 {
			return cfg, fmt.Errorf("validate config %s: negative duration %s", d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if cfg.ArchiveWindow < time.Millisecond {
		return cfg, fmt.Errorf("validate config archive_window: %s is below 1ms", cfg.ArchiveWindow)
	}
	// Retention has no upper bound here: archive.go clamps it, so a huge
	// value means "keep for ever" rather than an overflow.
	ints := []struct {
		name     string
		v        *int
		def, max int
	}{
		{"merged_retention_days", &cfg.MergedRetentionDays, DefaultMergedRetentionDays, 0},
		{"memory_events", &cfg.MemoryEvents, DefaultMemoryEvents, maxMemoryEvents},
		{"buffer_size", &cfg.BufferSize, DefaultBufferSize, maxBufferSize},
	}
	for _, n := range ints {
		if *n.v < 0 {
			return cfg, fmt.Errorf("validate config %s: negative value %d", n.name, *n.v)
		}
		if n.max > 0 && *n.v > n.max {
			return cfg, fmt.Errorf("validate config %s: %d is above %d", n.name, *n.v, n.max)
		}
		if *n.v == 0 {
			*n.v = n.def
		}
	}
	sizes := []struct {
		name string
		v    *int64
		def  int64
	}{
		{"live_max_bytes", &cfg.LiveMaxBytes, DefaultLiveMaxBytes},
		{"max_bytes", &cfg.MaxBytes, DefaultMaxBytes},
	}
	for _, n := range sizes {
		if *n.v < 0 {
			return cfg, fmt.Errorf("validate config %s: negative value %d", n.name, *n.v)
		}
		if *n.v == 0 {
			*n.v = n.def
		}
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
