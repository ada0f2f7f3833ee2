package kafka

import (
	"encoding/base64"
	"sort"
	"unicode/utf8"
)

// Head of line: messages of one key run one after the other (per-key
// lanes, queue.go), so a slow message holds the later messages of its key,
// and the partition's committed offset waits for its oldest unfinished
// message. The group view names, for each partition this worker owns, the
// keys holding others back and the one holding the commit.

// maxHeldKeys bounds the keys listed per partition; maxHeldKeyBytes the
// key shown.
const (
	maxHeldKeys     = 5
	maxHeldKeyBytes = 256
)

// HeldKey is a key whose lane holds later messages back, or whose message
// is the partition's oldest unfinished one (HoldsCommit).
type HeldKey struct {
	Key string `json:"key"`
	// KeyEncoding is "utf-8", or "base64" for a key that is not UTF-8;
	// KeyTruncated says the key was longer than 256 bytes.
	KeyEncoding  string `json:"key_encoding"`
	KeyTruncated bool   `json:"key_truncated,omitempty"`
	Offset       int64  `json:"offset"`
	// TaskIDs are the tasks of the message at the head of the lane (the
	// Live panel opens them).
	TaskIDs []string `json:"task_ids"`
	// Attempt is the executor attempt of its first task still in the
	// executor pool (the running-tasks registry, joined by task id): 0
	// while it waits for an executor slot, null when none of its tasks is
	// in the pool (waiting for a free slot, or its results are delivered).
	// AttemptEnded: that attempt ended and the next has not started.
	Attempt      *int `json:"attempt"`
	AttemptEnded bool `json:"attempt_ended"`
	// State is "running" (its tasks run or its results are delivered) or
	// "waiting" (for a free slot); SinceMS is when it started running.
	State   string `json:"state"`
	SinceMS *int64 `json:"since_ms"`
	// Behind counts the later messages of its key waiting for it.
	Behind int `json:"behind"`
	// HoldsCommit: it is the partition's oldest unfinished message, so the
	// committed offset cannot move past it until it finishes.
	HoldsCommit bool `json:"holds_commit"`
}

// HeadOfLine is what holds one partition of this worker back.
type HeadOfLine struct {
	// OldestUnfinishedOffset is the offset the next commit waits for
	// (null when nothing polled is unfinished).
	OldestUnfinishedOffset *int64 `json:"oldest_unfinished_offset"`
	Running                int    `json:"running"`
	Waiting                int    `json:"waiting"`
	// Keys lists the holding keys: the commit's first, then the most
	// messages behind; at most 5 (KeysHolding counts them all).
	Keys        []HeldKey `json:"keys"`
	KeysHolding int       `json:"keys_holding"`
}

// headOfLine is, by partition, what holds this worker's partitions back.
func (s *Source) headOfLine() map[int32]*HeadOfLine {
	attempts := s.app.Running().Attempts()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int32]*HeadOfLine, len(s.parts))
	for id, p := range s.parts {
		h := &HeadOfLine{Running: p.running, Waiting: p.waiting, Keys: []HeldKey{}}
		oldest := int64(-1)
		for _, po := range p.pending[p.head:] {
			if !po.done {
				oldest = po.offset
				h.OldestUnfinishedOffset = &oldest
				break
			}
		}
		var keys []HeldKey
		for k, lane := range p.lanes {
			if len(lane) == 0 {
				continue
			}
			w := lane[0]
			holds := w.msg.Offset == oldest
			if len(lane) < 2 && !holds {
				continue
			}
			hk := HeldKey{Offset: w.msg.Offset, Behind: len(lane) - 1, HoldsCommit: holds, State: "waiting", TaskIDs: make([]string, 0, len(w.tasks))}
			hk.Key, hk.KeyEncoding, hk.KeyTruncated = showKey(k)
			for i := range w.tasks {
				id := w.tasks[i].ID
				hk.TaskIDs = append(hk.TaskIDs, id)
				if a, ok := attempts[id]; ok && hk.Attempt == nil {
					hk.Attempt, hk.AttemptEnded = &a.N, a.Ended
				}
			}
			if w.started {
				ms := w.startedAt.UnixMilli()
				hk.State, hk.SinceMS = "running", &ms
			}
			keys = append(keys, hk)
		}
		sort.Slice(keys, func(i, j int) bool {
			a, b := keys[i], keys[j]
			if a.HoldsCommit != b.HoldsCommit {
				return a.HoldsCommit
			}
			if a.Behind != b.Behind {
				return a.Behind > b.Behind
			}
			return a.Offset < b.Offset
		})
		h.KeysHolding = len(keys)
		if len(keys) > maxHeldKeys {
			keys = keys[:maxHeldKeys]
		}
		h.Keys = append(h.Keys, keys...)
		out[id] = h
	}
	return out
}

// showKey is a key as the API shows it: UTF-8 text or base64, at most
// maxHeldKeyBytes of it.
func showKey(k string) (string, string, bool) {
	cut := len(k) > maxHeldKeyBytes
	if cut {
		k = k[:maxHeldKeyBytes]
	}
	if utf8.ValidString(k) || cut && utf8.ValidString(trimRune(k)) {
		if !utf8.ValidString(k) {
			k = trimRune(k)
		}
		return k, "utf-8", cut
	}
	return base64.StdEncoding.EncodeToString([]byte(k)), "base64", cut
}

// trimRune drops a rune cut in half at the end of s (at most 3 bytes).
func trimRune(s string) string {
	for i := 0; i < 3 && len(s) > 0 && !utf8.ValidString(s); i++ {
		s = s[:len(s)-1]
	}
	return s
}

// HeadOfLine is, by partition, what holds this worker's partitions back,
// read from memory (no broker read): what another worker's group view
// asks for the partitions this worker owns. ErrConsumerNotRunning when
// the consumer is not running.
func (s *Source) HeadOfLine() (map[int32]*HeadOfLine, error) {
	if !s.live.Load() {
		return nil, ErrConsumerNotRunning
	}
	return s.headOfLine(), nil
}

// fillHeadOfLine sets the head of line of this worker's partitions.
func (s *Source) fillHeadOfLine(rows []GroupPartition) {
	hol := s.headOfLine()
	for i := range rows {
		if rows[i].Mine {
			rows[i].HeadOfLine = hol[rows[i].Partition]
		}
	}
}
