package kafka

import (
	"testing"
)

// TestKafkaFlowControlPartitions drives flow control through the rows that
// involve single partitions: a partition paused for its own queue stays
// paused after a consume resume until the queue drains; a stall is never
// lifted by anything but forget (revoke or restart); a queue draining
// during a consume pause resumes nothing; forget lifts a partition's own
// pauses so it does not come back paused.
func TestKafkaFlowControlPartitions(t *testing.T) {
	t.Parallel()
	type step struct {
		do     string // pause, resume, bp_on, bp_off, exec_down, exec_up, full0, drained0, stall0, forget0
		p0, p1 bool   // fetched afterwards
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"a full queue pauses its partition only", []step{{"full0", false, true}, {"drained0", true, true}}},
		{"consume resume leaves a full partition paused", []step{
			{"full0", false, true}, {"pause", false, false}, {"resume", false, true}, {"drained0", true, true}}},
		{"a queue draining during a consume pause resumes nothing", []step{
			{"pause", false, false}, {"full0", false, false}, {"drained0", false, false}, {"resume", true, true}}},
		{"backpressure and a full partition", []step{
			{"full0", false, true}, {"bp_on", false, false}, {"bp_off", false, true}, {"drained0", true, true}}},
		{"a stall outlasts its queue, pauses and backpressure", []step{
			{"full0", false, true}, {"stall0", false, true}, {"drained0", false, true}, {"pause", false, false},
			{"resume", false, true}, {"bp_on", false, false}, {"bp_off", false, true}}},
		{"forget lifts a stall and a full queue", []step{
			{"full0", false, true}, {"stall0", false, true}, {"forget0", true, true}}},
		{"forget under a consume pause", []step{
			{"stall0", false, true}, {"pause", false, false}, {"forget0", false, false}, {"resume", true, true}}},
		{"the executor hold pauses the topic", []step{{"exec_down", false, false}, {"exec_up", true, true}}},
		{"consume resume and backpressure release under the executor hold", []step{
			{"exec_down", false, false}, {"pause", false, false}, {"bp_on", false, false}, {"resume", false, false},
			{"bp_off", false, false}, {"exec_up", true, true}}},
		{"the executor back during a consume pause", []step{
			{"pause", false, false}, {"exec_down", false, false}, {"exec_up", false, false}, {"resume", true, true}}},
		{"a stall outlasts the executor hold", []step{
			{"stall0", false, true}, {"exec_down", false, false}, {"exec_up", false, true}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, target := ktFlow()
			for i, s := range tc.steps {
				ktFlowStep(t, f, s.do)
				if got0, got1 := target.fetched(0), target.fetched(1); got0 != s.p0 || got1 != s.p1 {
					t.Fatalf("step %d (%s): partition 0 fetched %v, partition 1 fetched %v; want %v, %v", i, s.do, got0, got1, s.p0, s.p1)
				}
			}
			if len(target.partMoves) > 0 {
				t.Errorf("partition moves repeat: %v", target.partMoves)
			}
			if _, err := f.Resume(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
