// Package worker is the App that runs tasks for the input sources: it
// arranges a message into tasks through the handler, runs them on the
// executor pool and delivers their results; with the built-in exec handler,
// probes and the running-tasks view. The task model it works on is the leaf
// worker/model. httpd/root assembles the parts (the one composition root).
//
// # Map
//
// Every package of the module (bench/ and testdata/ aside); TestPackageMap
// checks the entries against the tree.
//
//	./                   package main: the svc command, flags and exit codes
//	worker/              App: arrange, run, deliver; exec handler, probes, running
//	worker/model/        the task model: messages, tasks, results, events (a leaf)
//	worker/config/       the TOML config: keys, defaults, validation, masking
//	worker/kconn/        the Kafka connection builder, bounded decompressor
//	worker/payload/      the UTF-8-or-base64 rule of every JSON surface
//	worker/executor/     executor processes (spawn, persistent), guard, pool
//	worker/fastjson/     hand-written JSON codecs, fuzzed against encoding/json
//	worker/kafka/        the consumer-group source: poll, lanes, offsets, pauses
//	worker/sink/         Kafka sinks behind circuit breakers, the DLQ
//	worker/redrive/      DLQ redrive: dry runs and re-produced records
//	worker/cache/        the handler cache (SQLite), its task hook and exchange
//	worker/event/        the event vocabulary and its JSON codec (a leaf)
//	worker/fleet/        the worker registry: cards, peers, trusted URLs
//	worker/gcfloor/      the floor under the Go collector's heap goal
//	worker/runtimehealth/ the runtime monitor: lag, GC, memory, stalls
//	worker/throughput/   task costs by throughput.cost_label over a window
//	worker/trends/       throughput, failures and lag in bounded rings
//	worker/demo/         `svc demo`: embedded Kafka, demo executor and config
//	worker/workertest/   helpers shared by the test suites
//	worker/workertest/wait/ wait.For, the one wait-until helper (stdlib only)
//	httpd/               the UI server, the HTTP ingress, the metrics exporter
//	httpd/root/          the composition root: config → parts under a Lifecycle
//	kafkaread/           the read-only Kafka view: aliases, records, windows
//	kafkaread/triage/    DLQ pages for an operator: filtered, bounded reads
//	recorder/            the SQLite flight recorder: live file, seals, archives
//	ui/                  the browser UI and its declared-pages models
//	ui/release/          packs, fetches, caches and serves UI releases
//	ui/browsertest/      the browser tests of the UI (no code of its own)
//
// Layering: the parts (executor, sinks, cache) import worker/model, not
// the App; the sources that drive the App (kafka, redrive) import both;
// nothing under worker/ imports httpd; under worker/ only
// worker/redrive imports kafkaread; the recorder imports worker/event and
// nothing else of worker/; worker/config does not import ui.
//
// # Data flow
//
//	kafka.Source poll loop ─▶ App.Arrange (handler, offload pool)
//	  ─▶ per partition+key lane ─▶ App.RunTasks ─▶ TaskRunner (executor pool)
//	  ─▶ App.Deliver ─▶ sink.Set: ok → named sinks (breaker), failed → DLQ
//	  ─▶ partition offsets: commit = highest contiguous finished offset + 1
//
//	httpd.Ingress ─▶ App.HandleHTTP ─▶ ArrangeHTTPRequest ─▶ App.RunTasks
//	  ─▶ optional App.Deliver ─▶ OnHTTPRequestComplete ─▶ JSON response
//
// Probes run through the live handler as source "probe": no sink, no commit.
// Backpressure and pauses: docs/operations.md "Intake queues and fair
// dispatch"; start and shutdown order: Lifecycle.
//
// # Lock order
//
// kafka.Source.commitMu → kafka.Source.mu → kafka flow control mu →
// franz-go client. The lag tracker's mu, App.mu, workCount.mu,
// sink.Breaker.mu, the executor pool's slots and children's mu, the guard's
// mu and redrive's ledger and partition locks are leaves: nothing else is
// locked while they are held.
package worker
