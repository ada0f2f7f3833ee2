package kafka

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"svc/worker/demo"
	"svc/worker/sink"
)

// execDemoStray is the sample executor in mode persistent with a bug of
// issue 24: behind each result frame it writes a copy of it, its body
// prefixed with STALE-, in the same write.
func execDemoStray() int {
	pr, pw := io.Pipe()
	code := make(chan int, 1)
	go func() {
		c := demo.Execute(os.Stdin, pw, os.Stderr, nil)
		pw.Close()
		code <- c
	}()
	r, w := bufio.NewReader(pr), bufio.NewWriter(os.Stdout)
	for ready := true; ; ready = false {
		var lb [4]byte
		if _, err := io.ReadFull(r, lb[:]); err != nil {
			break
		}
		frame := make([]byte, binary.BigEndian.Uint32(lb[:]))
		if _, err := io.ReadFull(r, frame); err != nil {
			break
		}
		w.Write(lb[:])
		w.Write(frame)
		if !ready {
			i := bytes.IndexByte(frame, '\n')
			stale := append(append(append([]byte(nil), frame[:i+1]...), "STALE-"...), frame[i+1:]...)
			binary.Write(w, binary.BigEndian, uint32(len(stale)))
			w.Write(stale)
		}
		if w.Flush() != nil {
			break
		}
	}
	return <-code
}

// Issue 24 through Kafka: with pool_size 1 and a child writing an extra
// frame behind each result, 19 of 20 sink records carried another key's
// value, with offsets committed and nothing logged. Every sink record
// must carry its own message's answer, the children be replaced, and
// that logged and counted.
func TestPipelinePersistentChildExtraFrames(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := ktCluster(t, 1)
	addrs := c.ListenAddrs()
	cfg := ktConfig(t, addrs, self)
	cfg.Executor.Args = []string{"exec-demo-stray"}
	cfg.Executor.Mode = "persistent"
	cfg.Executor.PoolSize = 1
	w := ktStart(t, cfg)

	const n = 20
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: ktIn, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "id=%d", i)})
	}
	ktProduce(t, ktClient(t, addrs), recs)
	ktWaitCommitted(t, ktAdmin(t, addrs), cfg.Sources.Kafka.Group)
	w.WaitSettled()

	seen := map[string]bool{}
	for _, r := range ktReadAll(t, addrs, ktOut) {
		var a struct {
			TaskID string `json:"task_id"`
			Upper  string `json:"upper"`
		}
		if err := json.Unmarshal(r.Value, &a); err != nil {
			t.Errorf("sink record of key %s: value %.40q is not the executor's answer", r.Key, r.Value)
			continue
		}
		if want := "ID=" + strings.TrimPrefix(string(r.Key), "k"); a.Upper != want {
			t.Errorf("sink record of key %s carries %q, want %q", r.Key, a.Upper, want)
		}
		if tid, _ := ktHeader(r, sink.HeaderTaskID); tid != a.TaskID {
			t.Errorf("sink record of key %s: task %q carries the answer to task %q", r.Key, tid, a.TaskID)
		}
		seen[string(r.Key)] = true
	}
	if len(seen) != n {
		t.Errorf("%d keys in the sink, want %d", len(seen), n)
	}
	if got := w.Metric("svc_executor_attempts_total"); got != n {
		t.Errorf("svc_executor_attempts_total = %v, want %d (no attempt charged for the child's stray frames)", got, n)
	}
	logged := w.Logs.Named("executor_child_protocol_violation")
	counted := w.Metric("svc_executor_protocol_violations_total", "kind", "unsolicited_output")
	if len(logged) == 0 || float64(len(logged)) != counted {
		t.Errorf("%d violations logged, %v counted; want as many, at least one", len(logged), counted)
	}
	if strings.Contains(w.Logs.String(), "STALE") {
		t.Errorf("the log shows what the child wrote")
	}
}
