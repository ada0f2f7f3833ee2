// Package fastjson holds svc's hand-written JSON codecs, each beside its
// encoding/json twin and pinned equal to it by a fuzz test. A codec lives
// here only while removing it costs at least 3 % of throughput or of CPU
// per task on its path, measured with and without it in the same run
// (bench/speed.sh with SVC_B; docs/operations.md, "Benchmarks"); the
// others use encoding/json.
//
//   - DecodeResult: an executor's result header (executor.md, protocol
//     v2), by hand for the common shape; FuzzDecodeResult. With
//     json.Unmarshal alone a Kafka message cost 6.5 % more worker CPU and
//     an HTTP request 11-23 % more.
//   - AppendTaskHeader: a task frame's header, into the attempt's reused
//     buffer; FuzzTaskHeader. With json.Marshal a Kafka message cost 2.9 %
//     more worker CPU and the Kafka path moved 7 % fewer messages a
//     second (medians of 22 rounds). It writes strings with
//     event.AppendJSONString, the tree's one JSON string escaper.
//   - worker.ExecResponse.AppendJSON (beside its type): the ingress's
//     answer, its strings by event.AppendJSONStringNoHTML
//     (FuzzExecResponseAppendJSON): with encoding/json's Encoder an HTTP
//     request cost 5.6 % more worker CPU at 32 connections and the
//     ingress answered 9 % fewer a second (medians of 21 rounds).
//
// The other speed paths that measured worth their code are not codecs and
// stay with their parts:
//
//   - sink.Set.DeliverAsync (worker/sink/async.go): a Kafka message's one
//     result produced and finished in the producer's acknowledgement, no
//     goroutine waiting for it. Without it (a goroutine per delivery,
//     blocked in Deliver) a Kafka message cost 18 % more worker CPU
//     (36.8 → 43.6 µs, medians of 5 interleaved rounds; every round
//     +11..+29 %).
//   - worker/gcfloor: the collector's heap goal at least 20 MiB. Without it
//     (GOGC=100) an HTTP request cost 13-15 % more worker CPU.
package fastjson
