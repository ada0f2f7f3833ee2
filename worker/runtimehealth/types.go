package runtimehealth

// Sample is one periodic reading: the payload of a runtime_health event of
// kind "sample", Snapshot.Current and the entries of Snapshot.Recent.
// Window figures cover the WindowSeconds before TSMS (on the first sample
// after Run starts, nothing yet). Durations are milliseconds.
type Sample struct {
	TSMS          int64   `json:"ts_ms"`
	WindowSeconds float64 `json:"window_seconds"`

	// Heartbeat lag over the window: how late the heartbeat timer woke.
	Beats    int     `json:"beats"`
	LagP50MS float64 `json:"lag_p50_ms"`
	LagP99MS float64 `json:"lag_p99_ms"`
	LagMaxMS float64 `json:"lag_max_ms"`

	Goroutines int64 `json:"goroutines"`
	Gomaxprocs int64 `json:"gomaxprocs"`
	// HeapLiveBytes is the heap the last GC found reachable.
	HeapLiveBytes uint64 `json:"heap_live_bytes"`
	// HeapTotalBytes is the heap memory held from the OS: objects, unused
	// span space and free spans not yet returned.
	HeapTotalBytes uint64 `json:"heap_total_bytes"`

	// GC over the window: cycles, stop-the-world pauses and their
	// percentiles, and the share of the CPU (GOMAXPROCS × wall time) the GC
	// used, as estimated by the runtime at the end of each cycle.
	GCCycles      uint64  `json:"gc_cycles"`
	GCPauses      uint64  `json:"gc_pauses"`
	GCPauseP50MS  float64 `json:"gc_pause_p50_ms"`
	GCPauseP99MS  float64 `json:"gc_pause_p99_ms"`
	GCCPUFraction float64 `json:"gc_cpu_fraction"`

	// Time goroutines spent runnable before they ran, over the window.
	SchedLatencyP50MS float64 `json:"sched_latency_p50_ms"`
	SchedLatencyP99MS float64 `json:"sched_latency_p99_ms"`

	OpenFDs  int64 `json:"open_fds"`  // -1 when unknown (not Linux)
	RSSBytes int64 `json:"rss_bytes"` // -1 when unknown (not Linux)

	Pool        *PoolQueue `json:"pool,omitempty"` // absent without Options.PoolQueue
	StallsTotal uint64     `json:"stalls_total"`   // stall episodes since start
}

// PoolQueue is the executor pool at sample time.
type PoolQueue struct {
	Busy    int `json:"busy"`
	Size    int `json:"size"`
	Waiting int `json:"waiting"`
}

// Stall is the start of a stall episode: the payload of a runtime_health
// event of kind "stall" and an entry of Snapshot.Stalls. The dump holds
// goroutine stacks only (function names, file:line, argument words), never
// memory contents.
type Stall struct {
	TSMS        int64   `json:"ts_ms"`
	LagMS       float64 `json:"lag_ms"`
	ThresholdMS float64 `json:"threshold_ms"`
	Goroutines  int     `json:"goroutines"`
	// Sampled is false when a stack sample was taken less than
	// Options.StallSampleEvery ago; the dump fields are then empty.
	Sampled bool `json:"sampled"`
	// TopFrames groups the other goroutines by state and innermost frame,
	// running and runnable ones first, then by count; at most 10.
	TopFrames     []Frame `json:"top_frames"`
	Dump          string  `json:"dump"`
	DumpTruncated bool    `json:"dump_truncated"`
}

// Frame is a group of goroutines in one state stopped at one function.
type Frame struct {
	State      string `json:"state"`
	Function   string `json:"function"`
	Location   string `json:"location"` // file:line
	Goroutines int    `json:"goroutines"`
}

// StallEnd closes a stall episode: the payload of a runtime_health event
// of kind "stall_ended".
type StallEnd struct {
	TSMS      int64 `json:"ts_ms"`
	StartedMS int64 `json:"started_ms"` // when the first late beat was due
	// DurationMS spans from the first late beat's due time to the last
	// late beat.
	DurationMS float64 `json:"duration_ms"`
	MaxLagMS   float64 `json:"max_lag_ms"`
	LateBeats  int     `json:"late_beats"`
}
