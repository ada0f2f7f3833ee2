package kafka

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"svc/worker/sink"
	"svc/worker/workertest"

	"github.com/twmb/franz-go/pkg/kgo"
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

// TestKafkaDLQTruncatesTooLargeInput: a failed input of 2 MiB, produced
// compressed so that the source topic took it, is larger than the DLQ
// topic's max.message.bytes. It is written to the DLQ with its value cut
// to fit and svc-dlq-truncated holding the original size; the commit moves
// past it. (The DLQ send failed every time, and under the default "stall"
// the partition stopped.)
func TestKafkaDLQTruncatesTooLargeInput(t *testing.T) {
	t.Parallel()
	c := ktCluster(t, 1)
	addrs := c.ListenAddrs()
	cfg := ktConfig(t, addrs, ktBigScript(t))
	group := cfg.Sources.Kafka.Group
	adm := ktAdmin(t, addrs)
	w := ktStart(t, cfg)
	w.WaitJoined()

	recs := ktPartitioned(0, 0, 5, 1)
	big := append(bytes.Clone(recs[1].Value), ' ')
	big = append(big, bytes.Repeat([]byte("y"), 2<<20)...)
	recs[1].Value = big
	// The producer's own cap is on the uncompressed batch; the broker's
	// is on the compressed one, which this value passes easily.
	prod := ktClient(t, addrs, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(4<<20), kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	ktProduce(t, prod, recs)
	ktWaitCommitted(t, adm, group)

	var got *kgo.Record
	for _, r := range ktReadAll(t, addrs, ktDLQ) {
		if ktID(r.Value) == 1 {
			got = r
		}
	}
	if got == nil {
		t.Fatal("the failed 2 MiB message is not in the DLQ")
	}
	if n, _ := ktHeader(got, sink.HeaderDLQTruncated); n != strconv.Itoa(len(big)) {
		t.Errorf("%s = %q, want the original value size %d", sink.HeaderDLQTruncated, n, len(big))
	}
	if len(got.Value) >= len(big) || len(got.Value) < 1<<19 || !bytes.HasPrefix(big, got.Value) {
		t.Errorf("DLQ value: %d bytes, want a prefix of the %d-byte original cut to fit about 1 MB", len(got.Value), len(big))
	}
	if r, _ := ktHeader(got, sink.HeaderDLQReason); !strings.Contains(r, "exited with code 1") {
		t.Errorf("DLQ reason = %q, want the executor's failure", r)
	}
	if id, _ := ktHeader(got, "h-id"); id != "1" {
		t.Errorf("original header h-id = %q on the truncated DLQ record, want 1", id)
	}
	if n := w.Metric("svc_kafka_partitions_stalled"); n != 0 {
		t.Errorf("svc_kafka_partitions_stalled = %v, want 0", n)
	}
	if n := w.Metric("svc_dlq_records_truncated_total"); n != 1 {
		t.Errorf("svc_dlq_records_truncated_total = %v, want 1", n)
	}
	out, _ := ktCollect(t, addrs, addrs)
	for _, id := range []int{0, 2, 3, 4} {
		if out[id] == 0 {
			t.Errorf("ok message %d is not in the sink", id)
		}
	}
}
