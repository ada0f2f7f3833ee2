// Package worker is the core of svc: the task model, the handler
// interfaces, the built-in exec handler and the App that runs tasks for the
// input sources. Its subpackages hold the parts; main wires them.
//
// # Map
//
//	worker/            App (app.go), tasks and handler hooks (task.go), the
//	                   interfaces between the parts (interfaces.go), the exec
//	                   handler (exec_handler.go), HTTP requests (http_source.go),
//	                   probes (probe.go), the optional UI hooks UIPages and
//	                   ProbeDetails (ui_hooks.go), flight-recorder events (events.go),
//	                   start and shutdown order (lifecycle.go), pipeline
//	                   metrics (metrics.go), offload/IO pools (threads.go)
//	worker/config/     the TOML config: keys, defaults, load, validation,
//	                   secret masking, Kafka connection views
//	worker/executor/   executor processes: spawn mode (protocol v1), the
//	                   fd 3 side channel, the pool with retries
//	worker/kafka/      the consumer-group source: poll loop, per-key lanes,
//	                   offsets, rebalance callbacks, consume pause and
//	                   backpressure
//	worker/sink/       Kafka sinks behind circuit breakers, the DLQ
//	worker/cache/      the handler cache (SQLite in storage.dir, last write
//	                   wins), the task hook (SVC_CACHE_* reads, fd 3
//	                   writes) and the cache exchange between peers
//	worker/fleet/      the worker registry: cards in the shared folder,
//	                   static peers, derived states
//	worker/demo/       `svc demo`: embedded Kafka, demo executor and config
//	worker/workertest/ helpers shared by the test suites; workertest/wait
//	                   holds wait.For, the one wait-until helper
//
// Elsewhere: httpd/ serves the UI server (API, /ws, probes), the HTTP
// ingress and the metrics exporter; kafkaread/ is the read-only Kafka view
// (kafkaread/kconn builds every Kafka client's connection); recorder/ is
// the SQLite flight recorder; ui/ the browser UI bundle.
//
// # Data flow: Kafka
//
//	kafka.Source poll loop ─▶ App.Arrange (handler, offload pool)
//	  ─▶ per partition+key lane ─▶ App.RunTasks ─▶ TaskRunner (executor pool)
//	  ─▶ App.Deliver ─▶ sink.Set: ok → named sinks (breaker), failed → DLQ
//	  ─▶ partition offsets: commit = highest contiguous finished offset + 1
//
// In-flight messages above pipeline.max_in_flight pause intake
// (backpressure) until half of them finished; an operator's consume pause
// holds intake too, and stall-paused partitions (a DLQ send failed under
// dlq.on_send_failure = "stall") are left alone by both.
//
// # Data flow: HTTP
//
//	httpd.Ingress (token, rpm, max_concurrent, body cap) ─▶ App.HandleHTTP
//	  ─▶ ArrangeHTTPRequest ─▶ App.RunTasks ─▶ optional App.Deliver
//	  (sources.http.sinks_enabled) ─▶ OnHTTPRequestComplete ─▶ JSON response
//
// Probes (POST /api/v1/debug/probe) take the same path as a message of
// source "probe": the live handler and pool, no sink, no commit.
//
// # Shutdown
//
// Lifecycle.Run: readiness flips to 503, intake stops (ingress listener
// closed, Kafka source drained and committed), the App drains the rest up
// to worker.shutdown_timeout, sinks close, then the services (UI, metrics,
// recorder) stop in reverse order.
//
// # Lock order
//
// kafka.Source.commitMu → kafka.Source.mu → kafka flow control mu →
// franz-go client. App.mu, workCount.mu, sink.Breaker.mu and the executor
// pool's slots are leaves: nothing else is locked while they are held.
package worker
