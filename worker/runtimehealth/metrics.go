package runtimehealth

import (
	"github.com/prometheus/client_golang/prometheus"
)

// collector exports the monitor's last sample, so a scrape sees the API's
// numbers and costs no reading. The windowed percentiles are summaries:
// quantiles over the window, _count and _sum since the start.
type collector struct {
	m                                        *Monitor
	lag, gcPause, schedLatency, gcCPU        *prometheus.Desc
	goroutines, heapLive, heapTotal, openFDs *prometheus.Desc
	rss, stalls                              *prometheus.Desc
}

func newCollector(m *Monitor) *collector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, nil, nil)
	}
	return &collector{
		m: m,
		lag: d("svc_runtime_scheduler_lag_seconds",
			"Heartbeat lag (how late the monitor's timer woke): quantiles 0.5, 0.99 and 1 (the maximum) over the monitor's window; count and sum of every heartbeat since the start."),
		gcPause: d("svc_runtime_gc_pause_seconds",
			"GC stop-the-world pauses: quantiles 0.5 and 0.99 over the monitor's window (bucket upper bounds); count since the process started, sum at bucket lower bounds."),
		schedLatency: d("svc_runtime_sched_latency_seconds",
			"Time goroutines spent runnable before running: quantiles 0.5 and 0.99 over the monitor's window (bucket upper bounds); count since the process started, sum at bucket lower bounds."),
		gcCPU: d("svc_runtime_gc_cpu_fraction",
			"Share of GOMAXPROCS CPU time the GC used over the window."),
		goroutines: d("svc_runtime_goroutines", "Live goroutines."),
		heapLive:   d("svc_runtime_heap_live_bytes", "Heap the last GC found reachable."),
		heapTotal:  d("svc_runtime_heap_total_bytes", "Heap memory held from the OS (objects, unused and free spans)."),
		openFDs:    d("svc_runtime_open_fds", "Open file descriptors (Linux only)."),
		rss:        d("svc_runtime_resident_memory_bytes", "Resident set size (Linux only)."),
		stalls:     d("svc_runtime_stalls_total", "Stall episodes: heartbeat lag at or over the stall threshold."),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.lag, c.gcPause, c.schedLatency, c.gcCPU,
		c.goroutines, c.heapLive, c.heapTotal, c.openFDs, c.rss, c.stalls} {
		ch <- d
	}
}

// Collect implements prometheus.Collector; before the first sample only the
// stall counter is exported.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	stalls := c.m.stallsTotal
	var s Sample
	have := c.m.current != nil
	if have {
		s = *c.m.current
	}
	beats, lagTotal := c.m.beatsTotal, c.m.lagTotal
	pauses, sched := c.m.pausesTotal, c.m.schedTotal
	c.m.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(c.stalls, prometheus.CounterValue, float64(stalls))
	if !have {
		return
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	ch <- prometheus.MustNewConstSummary(c.lag, beats, lagTotal.Seconds(),
		map[float64]float64{0.5: s.LagP50MS / 1e3, 0.99: s.LagP99MS / 1e3, 1: s.LagMaxMS / 1e3})
	ch <- prometheus.MustNewConstSummary(c.gcPause, pauses.count, pauses.sum,
		map[float64]float64{0.5: s.GCPauseP50MS / 1e3, 0.99: s.GCPauseP99MS / 1e3})
	ch <- prometheus.MustNewConstSummary(c.schedLatency, sched.count, sched.sum,
		map[float64]float64{0.5: s.SchedLatencyP50MS / 1e3, 0.99: s.SchedLatencyP99MS / 1e3})
	gauge(c.gcCPU, s.GCCPUFraction)
	gauge(c.goroutines, float64(s.Goroutines))
	gauge(c.heapLive, float64(s.HeapLiveBytes))
	gauge(c.heapTotal, float64(s.HeapTotalBytes))
	if s.OpenFDs >= 0 {
		gauge(c.openFDs, float64(s.OpenFDs))
	}
	if s.RSSBytes >= 0 {
		gauge(c.rss, float64(s.RSSBytes))
	}
}
