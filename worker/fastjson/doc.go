// Package fastjson holds svc's hand-written JSON codecs, each beside its
// encoding/json twin and pinned equal to it by a fuzz test. A codec lives
// here only while removing it costs at least 3 % of throughput or of CPU
// per task on its path, measured with and without it in the same run
// (bench/speed.sh with SVC_B; docs/operations.md, "Benchmarks"); the
// others use encoding/json.
//
//   - DecodeResult: an executor's result header (executor.md, protocol
//     v2), by hand for the common shape; FuzzDecodeResult.
//
// The other speed paths that measured worth their code are not codecs and
// stay with their parts: sink.Set.DeliverAsync (worker/sink/async.go: a
// result produced and finished in the producer's acknowledgement, no
// goroutine waiting for it) and the collector's heap floor (worker/gcfloor).
package fastjson
