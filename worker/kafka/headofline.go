package kafka

import (
	"encoding/base64"
	"sort"
	"unicode/utf8"
)

// Head of line: a slow message holds the later messages of its key (per-key
// lanes) and the committed offset waits for the partition's oldest
// unfinished message. The group view names the keys holding others back
// and the one holding the commit (docs/api.md, head_of_line).

// maxHeldKeys bounds the keys listed per partition; maxHeldKeyBytes the
// key shown.
const (
	maxHeldKeys     = 5
	maxHeldKeyBytes = 256
)

// HeldKey is a key whose lane holds later messages back, or whose message
// is the partition's oldest unfinished one (HoldsCommit). Attempt is the
// executor attempt of its first task in the pool (nil: none is).
type HeldKey struct {
	Key          string   `json:"key"`
	KeyEncoding  string   `json:"key_encoding"`
	KeyTruncated bool     `json:"key_truncated,omitempty"`
	Offset       int64    `json:"offset"`
	TaskIDs      []string `json:"task_ids"`
	Attempt      *int     `json:"attempt"`
	AttemptEnded bool     `json:"attempt_ended"`
	State        string   `json:"state"` // running or waiting
	SinceMS      *int64   `json:"since_ms"`
	Behind       int      `json:"behind"`
	HoldsCommit  bool     `json:"holds_commit"`
}

// HeadOfLine is what holds one partition of this worker back: the keys
// holding the commit first, then those with the most behind, at most 5.
type HeadOfLine struct {
	OldestUnfinishedOffset *int64    `json:"oldest_unfinished_offset"`
	Running                int       `json:"running"`
	Waiting                int       `json:"waiting"`
	Keys                   []HeldKey `json:"keys"`
	KeysHolding            int       `json:"keys_holding"`
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
// maxHeldKeyBytes of it (less a rune the cut split).
func showKey(k string) (string, string, bool) {
	cut := len(k) > maxHeldKeyBytes
	if cut {
		k = k[:maxHeldKeyBytes]
	}
	text := k
	for i := 0; cut && i < 3 && !utf8.ValidString(text); i++ {
		text = text[:len(text)-1]
	}
	if utf8.ValidString(text) {
		return text, "utf-8", cut
	}
	return base64.StdEncoding.EncodeToString([]byte(k)), "base64", cut
}

// HeadOfLine is, by partition, what holds this worker's partitions back,
// from memory: another worker's group view asks for it. Error:
// ErrConsumerNotRunning.
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
