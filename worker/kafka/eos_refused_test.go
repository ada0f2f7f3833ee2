package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/worker/workertest"
)

// TestExactlyOnceRefusedBatch: the sink topic's max.message.bytes is
// lowered to 5,000 at runtime, under a worker in exactly-once mode whose
// results mix 8 KB ones among results of about 1 KB (several batches of
// the new limit). The broker refuses the
// transaction's batch as too large, every record of it included; the
// transaction aborts, and on the messages' second run only the results
// over the topic's new limit go to the DLQ: every small one is committed
// to the sink, exactly once. (The sink took the smallest refused record's
// size as its limit, and every small result went to the DLQ.)
func TestExactlyOnceRefusedBatch(t *testing.T) {
	t.Parallel()
	c := ktCluster(t, 1)
	addrs := c.ListenAddrs()
	script := workertest.Script(t, `in=$(cat)
case "$in" in
*big*) head -c 6000 /dev/urandom | base64 -w0;;
*) printf 'out:%s ' "$in"; head -c 600 /dev/urandom | base64 -w0;;
esac`)
	cfg := eosConfig(t, addrs, script)
	w := ktStart(t, cfg)
	adm := ktAdmin(t, addrs)
	ktProduce(t, ktClient(t, addrs), []*kgo.Record{ktMsg(0, "", false)})
	ktWaitCommitted(t, adm, cfg.Sources.Kafka.Group) // the sink knows the topic's limit: 1048588

	limit := "5000"
	rs, err := adm.AlterTopicConfigs(t.Context(), []kadm.AlterConfig{{Name: "max.message.bytes", Value: &limit}}, ktOut)
	if err == nil {
		_, err = rs.On(ktOut, nil)
	}
	if err != nil {
		t.Fatalf("set %s max.message.bytes: %v", ktOut, err)
	}
	const n = 61 // 40 small results of about 1 KB: several batches of the new limit
	big := func(id int) bool { return id%3 == 1 }
	var recs []*kgo.Record
	for i := 1; i < n; i++ {
		r := ktMsg(i, "", false)
		if big(i) {
			r.Value = append(r.Value, " big"...)
		}
		recs = append(recs, r)
	}
	ktProduce(t, ktClient(t, addrs), recs)
	ktWaitCommitted(t, adm, cfg.Sources.Kafka.Group)
	w.Stop()

	out, dlq := ktReadCommitted(t, addrs, ktOut), ktReadCommitted(t, addrs, ktDLQ)
	eosCheckExactlyOnce(t, n, big, out, dlq)
	if got := w.Metric("svc_kafka_transactions_total", "result", "aborted"); got < 1 {
		t.Errorf("svc_kafka_transactions_total{result=aborted} = %v, want a transaction refused as too large", got)
	}
	if got := w.Metric("svc_sink_records_too_large_total", "sink", "out"); got != float64(len(eosIDs(dlq))) {
		t.Errorf("svc_sink_records_too_large_total{sink=out} = %v, want %d (each result in the DLQ)", got, len(eosIDs(dlq)))
	}
}
