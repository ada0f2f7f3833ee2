package kafka

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"svc/worker/config"
	"svc/worker/workertest"
	"svc/worker/workertest/wait"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ktPauseConfig is ktConfig with the consume pause switched on.
func ktPauseConfig(t testing.TB, addrs []string, exe string) *config.Config {
	cfg := ktConfig(t, addrs, exe)
	cfg.UI.ConsumePause = config.ConsumePause{Enabled: true, DurationsSeconds: []int{5, 30}}
	return cfg
}

// ktFrozen lets in-flight work finish (its commit waits for the pause's
// end), then checks over about a second and a half that the worker polls
// nothing and the group's commit does not move, with the consume pause
// still on throughout.
func ktFrozen(t *testing.T, w *ktWorker, what string, committed func() map[int32]int64) {
	t.Helper()
	wait.For(t, ktWait, what+": in-flight work finishes", func() (bool, string) {
		return w.InFlight() == 0 && w.Waiting() == 0, fmt.Sprintf("%d in flight, %d waiting", w.InFlight(), w.Waiting())
	})
	polled, before := w.Metric("svc_kafka_records_polled_total"), committed()
	for range 6 {
		time.Sleep(250 * time.Millisecond)
		if got := w.Metric("svc_kafka_records_polled_total"); got != polled {
			t.Fatalf("%s: %v records polled, want none", what, got-polled)
		}
		if got := committed(); !reflect.DeepEqual(got, before) {
			t.Fatalf("%s: committed offsets moved from %v to %v", what, before, got)
		}
	}
	if w.Metric("svc_consume_pause_active") != 1 {
		t.Fatalf("%s: the consume pause ended during the check, which then proves nothing", what)
	}
}

// TestKafkaConsumePauseErrors covers the refusals: feature off, consumer
// not running, durations outside 1-3600 (without a Kafka source at all,
// httpd answers; see its tests).
func TestKafkaConsumePauseErrors(t *testing.T) {
	t.Parallel()
	exe := workertest.EchoScript(t)

	t.Run("disabled", func(t *testing.T) {
		cfg := ktConfig(t, []string{"127.0.0.1:1"}, exe)
		w := ktNew(t, cfg)
		if _, err := w.Src.Pause(60); !errors.Is(err, ErrPauseDisabled) {
			t.Errorf("ConsumePause(60) = %v, want ErrPauseDisabled", err)
		}
		if _, err := w.Src.Resume(); !errors.Is(err, ErrPauseDisabled) {
			t.Errorf("ConsumeResume() = %v, want ErrPauseDisabled", err)
		}
		want := PauseState{Enabled: false, DurationsSeconds: []int{15, 60, 300, 900}}
		if got := w.Src.PauseState(); !reflect.DeepEqual(got, want) {
			t.Errorf("ConsumePauseState() = %+v, want %+v", got, want)
		}
	})

	t.Run("consumer not started", func(t *testing.T) {
		w := ktNew(t, ktPauseConfig(t, []string{"127.0.0.1:1"}, exe))
		if _, err := w.Src.Pause(60); !errors.Is(err, ErrConsumerNotRunning) {
			t.Errorf("ConsumePause(60) before Run = %v, want ErrConsumerNotRunning", err)
		}
	})

	t.Run("durations", func(t *testing.T) {
		c := ktCluster(t, 2)
		w := ktStart(t, ktPauseConfig(t, c.ListenAddrs(), exe))
		w.WaitJoined()
		for _, s := range []int64{0, -1, 3601} {
			_, err := w.Src.Pause(s)
			var de *DurationError
			if !errors.As(err, &de) || de.Seconds != s {
				t.Errorf("ConsumePause(%d) = %v, want *DurationError{%d}", s, err, s)
			}
			if w.Src.PauseState().Active {
				t.Errorf("ConsumePause(%d) left a pause active", s)
			}
		}
		for _, s := range []int64{1, 3600} {
			st, err := w.Src.Pause(s)
			if err != nil || !st.Active || st.RequestedSeconds != int(s) {
				t.Errorf("ConsumePause(%d) = %+v, %v, want an active pause of %d s", s, st, err, s)
			}
		}
		if _, err := w.Src.Resume(); err != nil {
			t.Errorf("ConsumeResume() = %v", err)
		}
	})
}

// TestKafkaConsumePause walks the consume pause state table on a
// live consumer: nothing is consumed or committed while paused, a re-pause
// moves the deadline, resume is idempotent, the deadline resumes
// consumption where it stopped; gauges, state objects and logs follow.
func TestKafkaConsumePause(t *testing.T) {
	if testing.Short() {
		t.Skip("the whole pause state table with timed deadlines: runs in the full suite")
	}
	t.Parallel()
	c := ktCluster(t, 4)
	addrs := c.ListenAddrs()
	cfg := ktPauseConfig(t, addrs, workertest.EchoScript(t))
	w := ktStart(t, cfg)
	group := cfg.Sources.Kafka.Group
	adm := ktAdmin(t, addrs)
	prod := ktClient(t, addrs)
	committed := func() map[int32]int64 { return ktCommitted(t, adm, group) }
	per := 100 // messages per phase
	if testing.Short() {
		per = 40
	}
	batch := func(from, n int) []*kgo.Record {
		var out []*kgo.Record
		for i := from; i < from+n; i++ {
			out = append(out, ktMsg(i, fmt.Sprintf("k%d", i%5), false))
		}
		return out
	}

	ktProduce(t, prod, batch(0, per))
	ktWaitCommitted(t, adm, group)
	inactive := PauseState{Enabled: true, DurationsSeconds: []int{5, 30}}
	if got := w.Src.PauseState(); !reflect.DeepEqual(got, inactive) {
		t.Errorf("state before any pause = %+v, want %+v", got, inactive)
	}

	t0 := time.Now()
	st, err := w.Src.Pause(30)
	t1 := time.Now()
	if err != nil {
		t.Fatalf("ConsumePause(30) = %v", err)
	}
	if !st.Active || !st.Enabled || st.RequestedSeconds != 30 || !reflect.DeepEqual(st.DurationsSeconds, []int{5, 30}) ||
		st.ResumeAtMS < t0.Add(30*time.Second).UnixMilli() || st.ResumeAtMS > t1.Add(30*time.Second).UnixMilli() {
		t.Errorf("ConsumePause(30) = %+v, want active, requested 30, resume_at_ms now + 30 s", st)
	}
	if got := w.Src.PauseState(); !reflect.DeepEqual(got, st) {
		t.Errorf("ConsumePauseState() = %+v, want what ConsumePause returned, %+v", got, st)
	}
	if got := w.Metric("svc_consume_pause_active"); got != 1 {
		t.Errorf("svc_consume_pause_active = %v while paused, want 1", got)
	}
	if logs := w.Logs.Named("consume_pause_started"); len(logs) != 1 {
		t.Errorf("%d consume_pause_started logs, want 1", len(logs))
	} else if l := logs[0]; l["duration_seconds"] != 30.0 || l["deadline_ms"] != float64(st.ResumeAtMS) || fmt.Sprint(l["partitions"]) != "[0 1 2 3]" {
		t.Errorf("consume_pause_started = %v, want duration 30, deadline %d, partitions [0 1 2 3]", l, st.ResumeAtMS)
	}

	w.WaitSettled()
	sinkBefore := ktSum(ktEnds(t, adm, ktOut))
	ktProduce(t, prod, batch(per, per))
	ktFrozen(t, w, "while paused", committed)
	if got := ktSum(ktEnds(t, adm, ktOut)); got != sinkBefore {
		t.Errorf("sink grew from %d to %d records while paused", sinkBefore, got)
	}
	if !w.IntakePaused() {
		t.Error("source topic fetching is not paused during a consume pause")
	}

	st2, err := w.Src.Pause(60)
	if err != nil || !st2.Active || st2.RequestedSeconds != 60 || st2.ResumeAtMS <= st.ResumeAtMS {
		t.Errorf("re-pause ConsumePause(60) = %+v, %v, want active with resume_at_ms past %d and requested 60", st2, err, st.ResumeAtMS)
	}

	st3, err := w.Src.Resume()
	if err != nil || !reflect.DeepEqual(st3, inactive) {
		t.Errorf("ConsumeResume() = %+v, %v, want %+v", st3, err, inactive)
	}
	if got := w.Metric("svc_consume_pause_active"); got != 0 {
		t.Errorf("svc_consume_pause_active = %v after resume, want 0", got)
	}
	st4, err := w.Src.Resume()
	if err != nil || !reflect.DeepEqual(st4, inactive) {
		t.Errorf("second ConsumeResume() = %+v, %v, want %+v and no error", st4, err, inactive)
	}
	if n := len(w.Logs.Named("consume_pause_ended")); n != 1 {
		t.Errorf("%d consume_pause_ended logs after two resumes, want 1", n)
	}
	ktWaitCommitted(t, adm, group)

	// Deadline: the pause ends by itself and consumption continues.
	if _, err := w.Src.Pause(2); err != nil {
		t.Fatalf("ConsumePause(2) = %v", err)
	}
	ktProduce(t, prod, batch(2*per, per))
	// The state turns inactive just before the line is logged: wait for both.
	wait.For(t, ktWait, "the deadline ends the pause, logged", func() (bool, string) {
		st := w.Src.PauseState()
		n := len(w.Logs.Named("consume_pause_deadline_reached"))
		return !st.Active && n > 0, fmt.Sprintf("%+v, %d consume_pause_deadline_reached logs", st, n)
	})
	if got := w.Src.PauseState(); !reflect.DeepEqual(got, inactive) {
		t.Errorf("state after the deadline = %+v, want %+v", got, inactive)
	}
	if n := len(w.Logs.Named("consume_pause_deadline_reached")); n != 1 {
		t.Errorf("%d consume_pause_deadline_reached logs, want 1", n)
	}
	if got := w.Metric("svc_consume_pause_active"); got != 0 {
		t.Errorf("svc_consume_pause_active = %v after the deadline, want 0", got)
	}
	ktWaitCommitted(t, adm, group)
	out, dlq := ktCollect(t, addrs, addrs)
	ktCheckAllOut(t, ktIDs(0, 3*per), out, dlq)
}

// TestKafkaPausePrecedenceBackpressure checks the two precedence rows
// between the operator's pause and backpressure: a debug resume
// while backpressure holds leaves intake paused until in-flight work
// drains; backpressure releasing during a debug pause does not resume it.
func TestKafkaPausePrecedenceBackpressure(t *testing.T) {
	t.Parallel()
	const parts = 4
	c := ktCluster(t, parts)
	addrs := c.ListenAddrs()
	gate := workertest.NewGate(t)
	cfg := ktPauseConfig(t, addrs, gate.Path)
	const maxIn = 8
	cfg.Pipeline.MaxInFlight = maxIn
	cfg.Sources.Kafka.MaxPollRecords = maxIn // waiting caps: 16 per partition, 48 in all
	cfg.Executor.PoolSize = 2
	w := ktStart(t, cfg)
	w.WaitJoined()
	group := cfg.Sources.Kafka.Group
	adm := ktAdmin(t, addrs)
	prod := ktManual(t, addrs)
	committed := func() map[int32]int64 { return ktCommitted(t, adm, group) }
	full := func() {
		t.Helper()
		wait.For(t, ktWait, "backpressure engages", func() (bool, string) {
			bp, in := w.Metric("svc_backpressure_active"), w.InFlight()
			return bp == 1 && in == maxIn && w.IntakePaused(), fmt.Sprintf("backpressure %v, %d in flight, %d waiting, intake paused %v %s", bp, in, w.Waiting(), w.IntakePaused(), w.QueueDetail())
		})
	}
	// Each phase puts 20 messages on every partition: more than the
	// partition's waiting cap (16), so together (80, 72 of them waiting)
	// they reach the overall one (48).
	const phase = 20 * parts
	var recs []*kgo.Record
	for i := range 2 * phase {
		r := ktMsg(i, "", false)
		r.Partition = int32(i % parts)
		recs = append(recs, r)
	}

	// Row: debug resume while backpressure still holds.
	ktProduce(t, prod, recs[:phase])
	full()
	if _, err := w.Src.Pause(60); err != nil {
		t.Fatal(err)
	}
	if st, err := w.Src.Resume(); err != nil || st.Active {
		t.Fatalf("ConsumeResume() = %+v, %v", st, err)
	}
	if !w.IntakePaused() || w.Metric("svc_backpressure_active") != 1 || w.Metric("svc_consume_pause_active") != 0 {
		t.Errorf("after a debug resume under backpressure: intake paused %v, svc_backpressure_active %v, svc_consume_pause_active %v; want true, 1, 0",
			w.IntakePaused(), w.Metric("svc_backpressure_active"), w.Metric("svc_consume_pause_active"))
	}
	gate.Open(t)
	ktWaitCommitted(t, adm, group)
	if w.IntakePaused() || w.Metric("svc_backpressure_active") != 0 {
		t.Errorf("after the drain: intake paused %v, svc_backpressure_active %v; want false, 0", w.IntakePaused(), w.Metric("svc_backpressure_active"))
	}

	// Row: backpressure wants to resume during a debug pause.
	gate.Close(t)
	ktProduce(t, prod, recs[phase:])
	full()
	if _, err := w.Src.Pause(60); err != nil {
		t.Fatal(err)
	}
	gate.Open(t)
	wait.For(t, ktWait, "in-flight work drains and backpressure lets go", func() (bool, string) {
		bp, in, waiting := w.Metric("svc_backpressure_active"), w.InFlight(), w.Waiting()
		return bp == 0 && in == 0 && waiting == 0, fmt.Sprintf("backpressure %v, %d in flight, %d waiting", bp, in, waiting)
	})
	if !w.IntakePaused() {
		t.Error("backpressure resumed intake during a debug pause")
	}
	ktFrozen(t, w, "debug pause after backpressure let go", committed)
	if _, err := w.Src.Resume(); err != nil {
		t.Fatal(err)
	}
	ktWaitCommitted(t, adm, group)
	out, dlq := ktCollect(t, addrs, addrs)
	ktCheckAllOut(t, ktIDs(0, 2*phase), out, dlq)
}

// TestKafkaPauseNewPartitionsArrivePaused: while a worker is paused, the
// other member of its group leaves and the paused worker is assigned its
// partitions: they arrive paused, nothing of them is consumed until the
// resume.
func TestKafkaPauseNewPartitionsArrivePaused(t *testing.T) {
	t.Parallel()
	const parts = 4
	c := ktCluster(t, parts)
	addrs := c.ListenAddrs()
	exe := workertest.EchoScript(t)
	cfgA, cfgB := ktPauseConfig(t, addrs, exe), ktPauseConfig(t, addrs, exe)
	cfgB.Sources.Kafka.Group = cfgA.Sources.Kafka.Group
	group := cfgA.Sources.Kafka.Group
	adm := ktAdmin(t, addrs)
	a := ktStart(t, cfgA)
	a.WaitJoined()
	b := ktStart(t, cfgB)
	wait.For(t, ktWait, "both workers own partitions", func() (bool, string) {
		return len(a.Owned()) > 0 && len(b.Owned()) > 0 && len(a.Owned())+len(b.Owned()) == parts,
			fmt.Sprintf("A %v, B %v", a.Owned(), b.Owned())
	})
	fromB := b.Owned()
	if _, err := a.Src.Pause(300); err != nil {
		t.Fatal(err)
	}
	b.Stop()
	wait.For(t, ktWait, "A is assigned every partition", func() (bool, string) {
		return len(a.Owned()) == parts, fmt.Sprintf("A %v", a.Owned())
	})

	prod := ktManual(t, addrs)
	var recs []*kgo.Record
	for i := range 40 {
		r := ktMsg(i, "", false)
		r.Partition = int32(i % parts)
		recs = append(recs, r)
	}
	ktProduce(t, prod, recs)
	ktFrozen(t, a, fmt.Sprintf("paused worker after taking over partitions %v", fromB), func() map[int32]int64 { return ktCommitted(t, adm, group) })
	if !a.IntakePaused() {
		t.Error("intake is not paused after the rebalance")
	}
	if _, err := a.Src.Resume(); err != nil {
		t.Fatal(err)
	}
	ktWaitCommitted(t, adm, group)
	out, dlq := ktCollect(t, addrs, addrs)
	ktCheckAllOut(t, ktIDs(0, 40), out, dlq)
}

// ktFakeTarget records what flow control does to intake.
type ktFakeTarget struct {
	paused    bool
	moves     []string
	parts     map[int32]bool // paused one by one
	partMoves []string       // repeated pauses or resumes of one partition
}

func (f *ktFakeTarget) pauseIntake()                { f.paused = true; f.moves = append(f.moves, "pause") }
func (f *ktFakeTarget) resumeIntake()               { f.paused = false; f.moves = append(f.moves, "resume") }
func (f *ktFakeTarget) assignedPartitions() []int32 { return []int32{0, 1} }
func (f *ktFakeTarget) consuming() bool             { return true }
func (f *ktFakeTarget) pausePartitions(ps []int32) {
	for _, p := range ps {
		if f.parts[p] {
			f.partMoves = append(f.partMoves, fmt.Sprint("pause of paused ", p))
		}
		f.parts[p] = true
	}
}
func (f *ktFakeTarget) resumePartitions(ps []int32) {
	for _, p := range ps {
		if !f.parts[p] {
			f.partMoves = append(f.partMoves, fmt.Sprint("resume of fetched ", p))
		}
		delete(f.parts, p)
	}
}

// fetched reports whether partition p is fetched: neither the topic nor p
// itself is paused.
func (f *ktFakeTarget) fetched(p int32) bool { return !f.paused && !f.parts[p] }

// TestKafkaFlowControlPrecedence drives flow control directly through the
// rows of the precedence table: intake runs only when neither the debug
// pause nor backpressure holds it, whatever the order of events.
func TestKafkaFlowControlPrecedence(t *testing.T) {
	t.Parallel()
	type step struct {
		do         string // pause, resume, deadline, bp_on, bp_off
		wantPaused bool
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"backpressure cannot resume a debug pause", []step{{"pause", true}, {"bp_on", true}, {"bp_off", true}, {"resume", false}}},
		{"debug resume under backpressure stays paused", []step{{"bp_on", true}, {"pause", true}, {"resume", true}, {"bp_off", false}}},
		{"deadline under backpressure stays paused", []step{{"pause", true}, {"bp_on", true}, {"deadline", true}, {"bp_off", false}}},
		{"deadline resumes", []step{{"pause", true}, {"deadline", false}}},
		{"resume is idempotent", []step{{"resume", false}, {"pause", true}, {"resume", false}, {"resume", false}}},
		{"re-pause keeps intake paused", []step{{"pause", true}, {"pause", true}, {"resume", false}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, target := ktFlow()
			for i, s := range tc.steps {
				ktFlowStep(t, f, s.do)
				if target.paused != s.wantPaused {
					t.Fatalf("step %d (%s): intake paused = %v, want %v (moves %v)", i, s.do, target.paused, s.wantPaused, target.moves)
				}
			}
			// Never two pauses or two resumes in a row.
			for i := 1; i < len(target.moves); i++ {
				if target.moves[i] == target.moves[i-1] {
					t.Errorf("moves %v repeat %q", target.moves, target.moves[i])
				}
			}
			if _, err := f.Resume(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// ktFlow is flow control with the consume pause enabled, attached to a
// fake target.
func ktFlow() (*flowControl, *ktFakeTarget) {
	cfg := config.Default()
	cfg.UI.ConsumePause.Enabled = true
	f := newFlowControl(&cfg, prometheus.NewRegistry(), workertest.Quiet(), nil)
	target := &ktFakeTarget{parts: map[int32]bool{}}
	f.attach(target)
	return f, target
}

// ktFlowStep applies one event to f: pause, resume, deadline, bp_on,
// bp_off, or full0, drained0, stall0, forget0 on partition 0.
func ktFlowStep(t *testing.T, f *flowControl, do string) {
	t.Helper()
	switch do {
	case "pause":
		if _, err := f.Pause(600); err != nil {
			t.Fatal(err)
		}
	case "resume":
		if _, err := f.Resume(); err != nil {
			t.Fatal(err)
		}
	case "deadline":
		f.mu.Lock()
		gen := f.gen
		f.mu.Unlock()
		f.deadline(gen)
	case "bp_on", "bp_off":
		f.setBackpressure(do == "bp_on")
	case "exec_down", "exec_up":
		f.setExecutorHold(do == "exec_down")
	case "full0", "drained0":
		f.setSaturated(0, do == "full0")
	case "stall0":
		f.stall(0)
	case "forget0":
		f.forget([]int32{0})
	default:
		t.Fatalf("unknown step %q", do)
	}
}
