package kafka

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"svc/worker"
	"svc/worker/model"
	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

// TestKafkaProbe runs caller bytes through the live handler and executor
// pool of a running Kafka worker: the result carries the executor's
// output, stderr and fd 3 annotations; nothing reaches the sink or the
// DLQ and no offset moves; a 17th concurrent probe is refused with
// worker.ErrProbeQueueFull.
func TestKafkaProbe(t *testing.T) {
	t.Parallel()
	c := ktCluster(t, 2)
	addrs := c.ListenAddrs()
	gate := filepath.Join(t.TempDir(), "gate-open")
	exe := workertest.Script(t, `IFS= read -r in
case "$in" in *slow*) while [ ! -e '`+gate+`' ]; do sleep 0.05; done;; esac
echo "probe stderr: $in" >&2
printf '{"annotation":{"kind":"k","payload":{"len":%d,"source":"%s","tenant":"%s"}}}\n' "${#in}" "$SVC_SOURCE" "$SVC_LABEL_TENANT" >&3
case "$in" in *fail*) exit 1;; esac
printf 'out:%s' "$in"`)
	cfg := ktConfig(t, addrs, exe)
	cfg.Executor.PoolSize = 2
	group := cfg.Sources.Kafka.Group
	adm := ktAdmin(t, addrs)
	w := ktStart(t, cfg)
	w.WaitJoined()
	var recs = ktPartitioned(0, 0, 5, -1)
	recs = append(recs, ktPartitioned(1, 5, 5, -1)...)
	ktProduce(t, ktManual(t, addrs), recs)
	ktWaitCommitted(t, adm, group)
	w.WaitSettled()
	committed := ktCommitted(t, adm, group)
	sinkEnds, dlqEnds := ktEnds(t, adm, ktOut), ktEnds(t, adm, ktDLQ)

	res, err := w.App.Probe(t.Context(), worker.ProbeRequest{Key: []byte("pk"), Value: []byte("id=999 probe"),
		Headers: []model.Header{{Key: "h", Value: []byte("v")}}, Labels: map[string]string{"tenant": "t1"}})
	if err != nil || len(res) != 1 {
		t.Fatalf("Probe = %d results, %v; want 1 result", len(res), err)
	}
	r := res[0]
	if r.Status != model.StatusOK || string(r.Output) != "out:id=999 probe" || string(r.Stderr) != "probe stderr: id=999 probe\n" {
		t.Errorf("probe result = status %s output %q stderr %q, want ok, %q, %q", r.Status, r.Output, r.Stderr, "out:id=999 probe", "probe stderr: id=999 probe\n")
	}
	wantAnn := []workertest.Ann{{Kind: "k", Payload: map[string]any{"len": 12.0, "source": model.SourceProbe, "tenant": "t1"}}}
	if got := []workertest.Ann{}; len(r.Annotations) != 1 || !reflect.DeepEqual(append(got, workertest.Ann{Kind: r.Annotations[0].Kind, Payload: r.Annotations[0].Fields()}), wantAnn) {
		t.Errorf("probe annotations = %+v, want %+v", r.Annotations, wantAnn)
	}
	if r.Task == nil || r.Task.Msg == nil || r.Task.Msg.Source != model.SourceProbe || string(r.Task.Msg.Key) != "pk" {
		t.Errorf("probe task message = %+v, want source probe and key pk", r.Task)
	}

	res, err = w.App.Probe(t.Context(), worker.ProbeRequest{Value: []byte("id=998 fail")})
	if err != nil || len(res) != 1 || res[0].Status != model.StatusFailed || res[0].Attempts != cfg.Handler.MaxAttempts {
		t.Errorf("failing probe = %+v, %v; want one failed result after %d attempts", res, err, cfg.Handler.MaxAttempts)
	}

	// Probes deliver nothing and commit nothing.
	w.WaitSettled()
	if got := ktCommitted(t, adm, group); !reflect.DeepEqual(got, committed) {
		t.Errorf("committed offsets moved from %v to %v by probes", committed, got)
	}
	if got := ktEnds(t, adm, ktOut); !reflect.DeepEqual(got, sinkEnds) {
		t.Errorf("sink high watermarks moved from %v to %v by probes", sinkEnds, got)
	}
	if got := ktEnds(t, adm, ktDLQ); !reflect.DeepEqual(got, dlqEnds) {
		t.Errorf("DLQ high watermarks moved from %v to %v by a failing probe", dlqEnds, got)
	}

	// Queue: worker.ProbeQueueSize probes held in a slow executor fill it.
	var wg sync.WaitGroup
	errs := make(chan error, worker.ProbeQueueSize)
	for i := range worker.ProbeQueueSize {
		wg.Go(func() {
			res, err := w.App.Probe(t.Context(), worker.ProbeRequest{Value: fmt.Appendf(nil, "id=%d slow", 500+i)})
			if err == nil && (len(res) != 1 || res[0].Status != model.StatusOK) {
				err = fmt.Errorf("slow probe %d = %+v", i, res)
			}
			errs <- err
		})
	}
	wait.For(t, ktWait, "every probe slot is taken", func() (bool, string) {
		used, size := w.App.ProbeQueue()
		return used == size, fmt.Sprintf("%d of %d", used, size)
	})
	if _, err := w.App.Probe(t.Context(), worker.ProbeRequest{Value: []byte("id=1 one too many")}); !errors.Is(err, worker.ErrProbeQueueFull) {
		t.Errorf("probe %d = %v, want worker.ErrProbeQueueFull", worker.ProbeQueueSize+1, err)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if _, err := w.App.Probe(t.Context(), worker.ProbeRequest{Value: []byte("id=2 after")}); err != nil {
		t.Errorf("probe after the queue drained = %v, want it to run", err)
	}
}
