package httpd

import (
	"bytes"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"svc/worker"
	"svc/worker/model"
)

// BenchmarkIngressRecorder runs ingress → exec handler → cat → response
// with 1 KiB bodies, with the flight recorder attached (on disk) and
// detached, in one run, to measure what recording costs the pipeline.
func BenchmarkIngressRecorder(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 1024)
	for _, mode := range []string{"off", "on-disk"} {
		b.Run(mode, func(b *testing.B) {
			cfg := testConfig(b, "/bin/cat")
			cfg.Executor.PoolSize = 8
			cfg.Sources.HTTP.MaxConcurrent = 1024
			cfg.Handler.MaxAttempts = 1
			if mode == "on-disk" {
				cfg.Storage.Dir = filepath.Join(b.TempDir(), "storage")
			} else {
				cfg.UI.Enabled = false // no recorder attached
			}
			s := startStack(b, cfg)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			url := s.inURL + "/v1/process"
			b.SetParallelism(4) // 8 clients on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r, err := client.Post(url, "application/octet-stream", bytes.NewReader(body))
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, r.Body)
					r.Body.Close()
					if r.StatusCode != 200 {
						b.Errorf("status %d", r.StatusCode)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
}

// BenchmarkWriteJSON answers a 1 KiB output as the ingress does after
// every request. A fresh buffer per response grew through several sizes:
// 3,949 ns, 1,536 B and 13 allocations, against 2,663 ns, 336 B and 11
// with the pooled buffer.
func BenchmarkWriteJSON(b *testing.B) {
	body := map[string]any{"task_id": "3f1c9a2b7d10-17", "status": "ok", "output": strings.Repeat("x", 1024)}
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		writeJSON(w, http.StatusOK, body)
	}
}

// BenchmarkWriteExecResponse writes the ingress's answer to one 1 KiB
// task, which encodes itself (worker.ExecResponse.AppendJSON).
func BenchmarkWriteExecResponse(b *testing.B) {
	body := worker.ExecResponse{RequestID: "3f1c9a2b7d10-17", Status: model.StatusOK, Tasks: []worker.ExecTaskResult{{
		TaskID: "3f1c9a2b7d10-18", Status: model.StatusOK, Output: strings.Repeat("x", 1024), OutputEncoding: "utf-8", DurationMS: 3, Attempts: 1}}}
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		writeJSON(w, http.StatusOK, body)
	}
}

// discardWriter is an http.ResponseWriter that keeps nothing.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}
