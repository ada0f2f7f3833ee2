// Package worker is the core of svc: the task model, the handler
// interfaces, the built-in exec handler and the App that runs tasks for the
// input sources. Its subpackages hold the parts; httpd/root assembles
// them (the one composition root: `svc run`, `svc demo` and the tests).
//
// # Map
//
// Every package of the module, one entry each (bench/ and testdata/ aside):
// the path, then what it holds. TestPackageMap (doc_test.go) checks the
// entries against the tree, so a package added, moved or removed gets its
// line here in the same change.
//
//	./                   package main: the svc command (run, check, demo,
//	                     health, ui, version), flags and exit codes
//	worker/              App (app.go), tasks and handler hooks (task.go), the
//	                     interfaces between the parts (interfaces.go), the exec
//	                     handler (exec_handler.go), HTTP requests (http_source.go),
//	                     probes (probe.go), flight-recorder events
//	                     (events.go), start and shutdown order (lifecycle.go),
//	                     pipeline metrics (metrics.go), offload/IO pools
//	                     (threads.go), the drain's work count (work.go)
//	worker/config/       the TOML config: keys, defaults, load, validation,
//	                     secret masking, Kafka connection views; declared
//	                     pages kept as plain tables (DecodeTables), their
//	                     rules checked by ui through the root (Check)
//	worker/kconn/        the Kafka connection builder every Kafka client uses
//	                     (brokers, security, client_config), the bounded
//	                     decompressor of fetched batches
//	worker/payload/      the UTF-8-or-base64 rule of every JSON surface and
//	                     executor variable
//	worker/executor/     executor processes: spawn mode (protocol v1, one
//	                     process per attempt) and persistent mode (protocol v2,
//	                     long-lived children speaking length-prefixed frames,
//	                     persistent.go, child.go, frame.go), the fd 3 side
//	                     channel, the guard that kills orphaned trees, the
//	                     reaper, the pool with retries
//	worker/fastjson/     the hand-written JSON codecs that measured worth their
//	                     code (executor frame headers, JSON strings), each
//	                     pinned equal to encoding/json by a fuzz test
//	worker/kafka/        the consumer-group source: poll loop, intake queues
//	                     and fair dispatch, per-key lanes, offsets, rebalance
//	                     callbacks, consume pause, backpressure, lag and the
//	                     whole group's view, the clean leave at shutdown
//	worker/sink/         Kafka sinks behind circuit breakers, the DLQ
//	worker/redrive/      DLQ redrive: dry runs through the live handler, real
//	                     runs re-produced to the source topic, once per record
//	                     (ledger.go) and one call per DLQ partition at a time
//	worker/cache/        the handler cache (SQLite in storage.dir, last write
//	                     wins), the task hook (SVC_CACHE_* reads, fd 3
//	                     writes) and the cache exchange between peers
//	worker/event/        the event vocabulary: event and task row types,
//	                     the per-task payloads, their one JSON codec and
//	                     string escaper; the recorder imports only this leaf
//	worker/fleet/        the worker registry: cards in the shared folder,
//	                     static peers, derived states, which of them the
//	                     UI trusts with its token (fleet.trusted_urls)
//	worker/gcfloor/      the floor under the Go collector's heap goal
//	worker/runtimehealth/ the runtime monitor: scheduler lag heartbeats, GC,
//	                     memory, goroutines, stalls with sampled stacks
//	worker/throughput/   task costs by throughput.cost_label over a window
//	worker/trends/       throughput, failures and lag sampled every 10 s into
//	                     bounded rings (1 h of 10 s steps, 24 h of 5 min)
//	worker/demo/         `svc demo`: embedded Kafka, demo executor and config
//	worker/workertest/   helpers shared by the test suites
//	worker/workertest/wait/ wait.For, the one wait-until helper (stdlib only)
//	httpd/               the UI server (API, /ws, probes), the HTTP ingress and
//	                     the metrics exporter
//	httpd/root/          the composition root: config → every part, socket and
//	                     feature switch under one Lifecycle, identity's
//	                     features (features.go), the config loaded with ui's
//	                     checks (config.go); main.go, cmd_*.go and the tests
//	                     that need a whole worker call it
//	kafkaread/           the read-only Kafka view: topic aliases, one record by
//	                     coordinates, records by time window
//	kafkaread/triage/    DLQ pages for an operator: newest first, filtered,
//	                     reasons counted, bounded reads
//	recorder/            the SQLite flight recorder: live file, seals, archives,
//	                     traces, merges
//	ui/                  the browser UI's source and the declared-pages and
//	                     probe-details models (the only part of ui the worker
//	                     imports)
//	ui/release/          packs, fetches, caches and serves UI releases
//	ui/browsertest/      the browser tests of the UI (no code of its own)
//
// Layering: nothing under worker/ imports httpd; under worker/ only
// worker/redrive imports kafkaread (httpd builds the read API's aliases
// from the config); the recorder imports worker/event and nothing else of
// worker/; worker/config does not import ui.
//
// # Data flow: Kafka
//
//	kafka.Source poll loop ─▶ App.Arrange (handler, offload pool)
//	  ─▶ per partition+key lane ─▶ App.RunTasks ─▶ TaskRunner (executor pool)
//	  ─▶ App.Deliver ─▶ sink.Set: ok → named sinks (breaker), failed → DLQ
//	  ─▶ partition offsets: commit = highest contiguous finished offset + 1
//
// At most pipeline.max_in_flight messages run their tasks at once, and
// 4 × that many deliver their results (the next message of a key starts
// once the previous one is delivered). Backpressure is
// polled work waiting to run over its cap (6 × max(max_in_flight,
// max_poll_records) messages or 64 MiB): it pauses every partition's
// fetching until the waiting work is below half; a partition with too much
// waiting work of its own is paused alone. An operator's consume pause holds
// intake too (and stops commits until it ends), and stall-paused partitions
// (a DLQ send failed under dlq.on_send_failure = "stall") are left alone by
// both.
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
// DLQ redrive (POST /api/v1/debug/dlq/redrive, worker/redrive) reads the
// DLQ through the Kafka read API, probes each record (dry run) or produces
// it back to the source topic, where the Kafka source consumes it again.
//
// # Start and shutdown
//
// root.New binds every socket first (a bind failure is fatal before
// anything else opens), then builds: executor pool, runtime monitor and
// cost tracker, cache, sinks and DLQ, App, Kafka source, and with the UI:
// fleet registry, recorder, Kafka read API, redrive, UI release, UI server,
// cache exchange; then the metrics exporter and the ingress. Lifecycle.Run
// starts the services in that order (runtime monitor, registry, recorder,
// UI release, UI server, cache exchange, metrics), then intake (ingress,
// Kafka source). When its context ends or a part fails: readiness flips to
// 503, intake stops (ingress listener closed, Kafka source drained and
// committed), the App drains the rest up to worker.shutdown_timeout, the
// sinks flush and close once, the services stop in reverse order (the
// registry last: its card says "stopped"), and the released parts close in
// reverse build order (redrive producer, recorder files, cache, executor
// pool, sockets). The lifecycle is the only owner of that shutdown.
//
// # Lock order
//
// kafka.Source.commitMu → kafka.Source.mu → kafka flow control mu →
// franz-go client. The lag tracker's mu, App.mu, workCount.mu,
// sink.Breaker.mu, the executor pool's slots and children's mu, the guard's
// mu and redrive's ledger and partition locks are leaves: nothing else is
// locked while they are held.
package worker
