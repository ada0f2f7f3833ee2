// Package fastjson holds svc's hand-written JSON codecs, each pinned equal
// to its encoding/json twin by a fuzz test. A codec stays here only while
// removing it costs at least 3 % of throughput or CPU per task on its path,
// measured A/B with bench/speed.sh (docs/operations.md, "Benchmarks"):
//
//   - DecodeResult: a protocol v2 result header (FuzzDecodeResult).
//   - AppendTaskHeader: a task frame's header (FuzzTaskHeader).
//
// worker.ExecResponse.AppendJSON, sink.Set.DeliverAsync and worker/gcfloor
// are the other measured fast paths; they stay with their parts.
package fastjson
