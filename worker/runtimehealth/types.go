package runtimehealth

// The payloads below are the runtime_health events' and the API's;
// docs/runtime-health.md (Events) describes each field. Durations are
// milliseconds.

// Sample is one periodic reading: the payload of a runtime_health event of
// kind "sample", Snapshot.Current and the entries of Snapshot.Recent.
// Window figures cover the WindowSeconds before TSMS.
type Sample struct {
	TSMS              int64      `json:"ts_ms"`
	WindowSeconds     float64    `json:"window_seconds"`
	Beats             int        `json:"beats"`
	LagP50MS          float64    `json:"lag_p50_ms"`
	LagP99MS          float64    `json:"lag_p99_ms"`
	LagMaxMS          float64    `json:"lag_max_ms"`
	Goroutines        int64      `json:"goroutines"`
	Gomaxprocs        int64      `json:"gomaxprocs"`
	HeapLiveBytes     uint64     `json:"heap_live_bytes"`
	HeapTotalBytes    uint64     `json:"heap_total_bytes"`
	GCCycles          uint64     `json:"gc_cycles"`
	GCPauses          uint64     `json:"gc_pauses"`
	GCPauseP50MS      float64    `json:"gc_pause_p50_ms"`
	GCPauseP99MS      float64    `json:"gc_pause_p99_ms"`
	GCCPUFraction     float64    `json:"gc_cpu_fraction"`
	SchedLatencyP50MS float64    `json:"sched_latency_p50_ms"`
	SchedLatencyP99MS float64    `json:"sched_latency_p99_ms"`
	OpenFDs           int64      `json:"open_fds"`       // -1 when unknown (not Linux)
	RSSBytes          int64      `json:"rss_bytes"`      // -1 when unknown (not Linux)
	Pool              *PoolQueue `json:"pool,omitempty"` // absent without Options.PoolQueue
	StallsTotal       uint64     `json:"stalls_total"`
}

// PoolQueue is the executor pool at sample time.
type PoolQueue struct {
	Busy    int `json:"busy"`
	Size    int `json:"size"`
	Waiting int `json:"waiting"`
}

// Stall is the start of a stall episode: the payload of a runtime_health
// event of kind "stall" and an entry of Snapshot.Stalls. The dump holds
// goroutine stacks only, never memory contents. Sampled is false when a
// stack sample was taken less than Options.StallSampleEvery ago; the dump
// fields are then empty.
type Stall struct {
	TSMS          int64   `json:"ts_ms"`
	LagMS         float64 `json:"lag_ms"`
	ThresholdMS   float64 `json:"threshold_ms"`
	Goroutines    int     `json:"goroutines"`
	Sampled       bool    `json:"sampled"`
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
// of kind "stall_ended". It spans from the first late beat's due time to
// the last late beat.
type StallEnd struct {
	TSMS       int64   `json:"ts_ms"`
	StartedMS  int64   `json:"started_ms"`
	DurationMS float64 `json:"duration_ms"`
	MaxLagMS   float64 `json:"max_lag_ms"`
	LateBeats  int     `json:"late_beats"`
}
