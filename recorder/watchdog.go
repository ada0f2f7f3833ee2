package recorder

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// watchdogPath is {Dir}/{worker}.watchdog.
func (r *Recorder) watchdogPath() string {
	return filepath.Join(r.ownDir, r.cfg.Worker+".watchdog")
}

// watchdogState is the watchdog file's JSON.
type watchdogState struct {
	PID      int   `json:"pid"`
	RSSBytes int64 `json:"rss_bytes"`
	TSms     int64 `json:"ts_ms"`
}

// takeWatchdog reads and removes a watchdog file left by a previous run
// that never shut down cleanly: the crash_detected payload (nil: none).
func (r *Recorder) takeWatchdog() json.RawMessage {
	path := r.watchdogPath()
	// Temp files of a rewrite the dead process was in the middle of.
	if stale, _ := filepath.Glob(filepath.Join(r.ownDir, "."+r.cfg.Worker+".watchdog.*.tmp")); len(stale) > 0 {
		for _, f := range stale {
			os.Remove(f)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	os.Remove(path)
	if !json.Valid(data) {
		raw, _ := json.Marshal(map[string]string{"raw": string(data)})
		return raw
	}
	return data
}

func (r *Recorder) writeWatchdog() {
	data, _ := json.Marshal(watchdogState{PID: os.Getpid(), RSSBytes: rssBytes(), TSms: r.cfg.Now().UnixMilli()})
	if err := writeFileAtomic(r.watchdogPath(), data); err != nil {
		r.log.Warn("recorder_watchdog_write_failed", "error", err)
	}
}

// rssBytes reads the resident set size from /proc/self/statm (second field,
// in pages); 0 where that file does not exist.
func rssBytes() int64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(data))
	if len(fields) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}
