package kafka

import (
	"bytes"
	"errors"
	"testing"

	"svc/worker/model"
	"svc/worker/sink"
	"svc/worker/workertest"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ktHandler is a Kafka handler built from a function.
type ktHandler struct {
	arrange func(batch []model.Message) ([]model.Task, error)
}

func (h ktHandler) Arrange(batch []model.Message) ([]model.Task, error) { return h.arrange(batch) }

// TestKafkaHandlerArrange covers library handlers: tasks may point at
// their own copy of a message (the natural `for _, m := range batch`
// loop), and a batch the handler cannot arrange goes to the DLQ message by
// message. Either way no message is committed without being processed.
func TestKafkaHandlerArrange(t *testing.T) {
	t.Parallel()
	c := ktCluster(t, 2)
	addrs := c.ListenAddrs()
	cfg := ktConfig(t, addrs, workertest.EchoScript(t))
	cfg.Sources.Kafka.MaxPollRecords = 1 // one message per batch: only the bad one fails to arrange
	h := ktHandler{arrange: func(batch []model.Message) ([]model.Task, error) {
		var tasks []model.Task
		for _, m := range batch {
			if bytes.Contains(m.Value, []byte("unarrangeable")) {
				return nil, errors.New("cannot arrange this")
			}
			tasks = append(tasks, model.Task{Msg: &m, Input: m.Value})
		}
		return tasks, nil
	}}
	w := ktStartWith(t, cfg, h)
	var recs []*kgo.Record
	for i := range 20 {
		r := ktMsg(i, "", false)
		if i == 13 {
			r.Value = append(r.Value, " unarrangeable"...)
		}
		recs = append(recs, r)
	}
	ktProduce(t, ktClient(t, addrs), recs)
	adm := ktAdmin(t, addrs)
	ktWaitCommitted(t, adm, cfg.Sources.Kafka.Group)
	out, dlq := ktCollect(t, addrs, addrs)
	ktCheckAllOut(t, ktIDs(0, 20), out, dlq)
	for i := range 20 {
		if want := i != 13; (out[i] > 0) != want {
			t.Errorf("message %d in the sink: %v, want %v", i, out[i] > 0, want)
		}
	}
	for _, r := range ktReadAll(t, addrs, ktDLQ) {
		if reason, _ := ktHeader(r, sink.HeaderDLQReason); reason != "arrange: cannot arrange this" {
			t.Errorf("DLQ %s = %q, want the arrange error", sink.HeaderDLQReason, reason)
		}
	}
	if got := w.Metric("svc_arrange_errors_total", "source", model.SourceKafka); got != 1 {
		t.Errorf("svc_arrange_errors_total{source=kafka} = %v, want 1", got)
	}
}
