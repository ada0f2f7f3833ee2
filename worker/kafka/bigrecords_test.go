package kafka

import (
	"fmt"
	"strings"
	"testing"

	"svc/worker/sink"
	"svc/worker/workertest"
)

// bigResult is the size of the result the big executor prints: twice the
// brokers' default max.message.bytes (1048588).
const bigResult = 2 << 20

// ktBigScript is an executor that prints bigResult bytes for a message
// holding "big", fails one holding "fail" and echoes any other. It reads
// at most 64 KiB of the message and discards the rest, so a large input
// costs no shell work.
func ktBigScript(t testing.TB) string {
	return workertest.Script(t, fmt.Sprintf(`in=$(head -c 65536)
cat >/dev/null
case "$in" in
*big*) head -c %d /dev/zero | tr '\0' x;;
*fail*) echo "failing on purpose" >&2; exit 1;;
*) printf 'out:%%s' "$in";;
esac`, bigResult))
}

// TestKafkaResultTooLargeForSink: a result larger than the sink topic's
// max.message.bytes (the brokers' default, about 1 MB) is a failure of
// that one message: it goes to the DLQ with a reason naming the sink, its
// size and the limit, the commit moves past it, the messages after it
// reach the sink and the breaker never counts it. (It was retried forever:
// the partition's commit froze and the breaker opened.)
func TestKafkaResultTooLargeForSink(t *testing.T) {
	t.Parallel()
	c := ktCluster(t, 1)
	addrs := c.ListenAddrs()
	cfg := ktConfig(t, addrs, ktBigScript(t))
	group := cfg.Sources.Kafka.Group
	adm := ktAdmin(t, addrs)
	w := ktStart(t, cfg)
	w.WaitJoined()

	recs := ktPartitioned(0, 0, 10, 6) // id 6 fails in the executor
	recs[3].Value = append(recs[3].Value, " big"...)
	ktProduce(t, ktManual(t, addrs), recs)
	ktWaitCommitted(t, adm, group)

	out, _ := ktCollect(t, addrs, addrs)
	for _, id := range ktIDs(0, 10) {
		if want := id != 3 && id != 6; (out[id] > 0) != want {
			t.Errorf("message %d in the sink %d times, want it there: %v", id, out[id], want)
		}
	}
	reasons := map[int]string{}
	for _, r := range ktReadAll(t, addrs, ktDLQ) {
		reasons[ktID(r.Value)], _ = ktHeader(r, sink.HeaderDLQReason)
	}
	if r := reasons[3]; !strings.HasPrefix(r, "result too large for sink out: ") || !strings.HasSuffix(r, " bytes > limit 1048588") {
		t.Errorf("DLQ reason of the too-large result = %q, want \"result too large for sink out: N bytes > limit 1048588\"", r)
	}
	if _, ok := reasons[6]; !ok || len(reasons) != 2 {
		t.Errorf("DLQ holds ids %v, want 3 (too large) and 6 (failed)", reasons)
	}
	if st := w.Sinks.BreakerStates()["out"]; st != sink.Closed {
		t.Errorf("breaker of sink out is %s, want closed", st)
	}
	if n := w.Metric("svc_sink_breaker_transitions_total", "to", "open"); n != 0 {
		t.Errorf("the breaker opened %v times, want never", n)
	}
	if n := w.Metric("svc_sink_delivery_failures_total"); n != 0 {
		t.Errorf("svc_sink_delivery_failures_total = %v, want 0 (a record too large is not a delivery failure)", n)
	}
	if n := w.Metric("svc_sink_records_too_large_total", "sink", "out"); n != 1 {
		t.Errorf("svc_sink_records_too_large_total{sink=out} = %v, want 1", n)
	}

	// Later messages keep flowing.
	ktProduce(t, ktManual(t, addrs), ktPartitioned(0, 10, 5, -1))
	ktWaitCommitted(t, adm, group)
	out, _ = ktCollect(t, addrs, addrs)
	for _, id := range ktIDs(10, 5) {
		if out[id] == 0 {
			t.Errorf("message %d, produced after the too-large one, is not in the sink", id)
		}
	}
}
