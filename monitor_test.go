package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"svc/worker/workertest"
)

// TestRuntimeHealthAndThroughputWired: a worker with a cost label reports
// each task's cost and the window totals at /api/v1/debug/throughput,
// counts malformed cost labels, notes the cost on the task (svc.cost
// annotation), and serves the runtime monitor's snapshot and gauges.
func TestRuntimeHealthAndThroughputWired(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	exe := filepath.Join(dir, "exec.sh")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\ncat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ui, in, mt := freePort(t), freePort(t), freePort(t)
	cfg := workertest.WriteConfig(t, fmt.Sprintf(`
[worker]
name = "costly"
[metrics]
host = "127.0.0.1"
port = %d
[ui]
port = %d
[storage]
dir = ""
[executor]
binary_path = %q
[sources.http]
enabled = true
host = "127.0.0.1"
port = %d
[throughput]
cost_label = "cost"
`, mt, ui, exe, in))
	p := start(t, "run", "-config", cfg)
	base := fmt.Sprintf("http://127.0.0.1:%d", ui)
	p.WaitHTTP(t, base+"/healthz")
	for _, cost := range []string{"2.5", "4", "lots", "-1", ""} {
		req, _ := http.NewRequest("POST", fmt.Sprintf("http://127.0.0.1:%d/v1/process", in), strings.NewReader("x"))
		if cost != "" {
			req.Header.Set("X-Svc-Label-Cost", cost)
		}
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
	}
	var tp struct {
		Enabled   bool               `json:"enabled"`
		CostLabel string             `json:"cost_label"`
		Totals    map[string]float64 `json:"totals"`
		Skipped   map[string]int     `json:"skipped"`
	}
	getJSON(t, base+"/api/v1/debug/throughput", &tp)
	if !tp.Enabled || tp.CostLabel != "cost" {
		t.Errorf("throughput = %+v, want enabled with cost_label cost", tp)
	}
	var evs struct {
		Events []struct {
			Kind    string         `json:"kind"`
			Payload map[string]any `json:"payload"`
		} `json:"events"`
	}
	getJSON(t, base+"/api/v1/events?types=annotation", &evs)
	var costs []float64
	for _, e := range evs.Events {
		if e.Kind == "svc.cost" {
			costs = append(costs, e.Payload["cost"].(float64))
		}
	}
	if len(costs) != 2 || costs[0]+costs[1] != 6.5 {
		t.Errorf("svc.cost annotations = %v, want 2.5 and 4", costs)
	}
	var rt struct {
		Enabled bool `json:"enabled"`
		Current *struct {
			Goroutines int `json:"goroutines"`
		} `json:"current"`
	}
	getJSON(t, base+"/api/v1/debug/runtime", &rt)
	if !rt.Enabled {
		t.Errorf("runtime = %+v, want enabled", rt)
	}
	r, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", mt))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	for _, want := range []string{"svc_runtime_goroutines ", "svc_task_cost_total 6.5", `svc_task_cost_skipped_total{reason="not_numeric"} 1`, `svc_task_cost_skipped_total{reason="negative"} 1`, `svc_task_cost_skipped_total{reason="missing"} 1`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
