package httpd

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"time"

	"svc/worker/fleet"
	"svc/worker/kafka"
)

// kafkaGroupTimeout bounds the broker reads of one group view.
const kafkaGroupTimeout = 10 * time.Second

// kafkaGrouper is the Kafka source's group view, taken from the consume
// pause (UIDeps.Pause), which is the source.
type kafkaGrouper interface {
	GroupState(ctx context.Context) (kafka.GroupState, error)
	HeadOfLine() (map[int32]*kafka.HeadOfLine, error)
}

// WorkerURL names a worker and its UI.
type WorkerURL struct {
	Worker string `json:"worker"`
	URL    string `json:"url"`
}

// GroupAnswer is GET /api/v1/debug/kafka/group: the group view and, with
// scope fleet, which owners of other partitions answered for their head of
// line and which did not.
type GroupAnswer struct {
	kafka.GroupState
	Scope             string         `json:"scope"`
	HeadOfLinePeers   []WorkerURL    `json:"head_of_line_peers"`
	HeadOfLineMissing []TraceMissing `json:"head_of_line_missing"`
}

// PartitionHead is one partition of GET /api/v1/debug/kafka/head-of-line.
type PartitionHead struct {
	Partition  int32             `json:"partition"`
	HeadOfLine *kafka.HeadOfLine `json:"head_of_line"`
}

// HeadOfLineAnswer is GET /api/v1/debug/kafka/head-of-line.
type HeadOfLineAnswer struct {
	Worker     string          `json:"worker"`
	Partitions []PartitionHead `json:"partitions"`
}

// kafkaGroup answers GET /api/v1/debug/kafka/group: offsets read from the
// brokers now; scope fleet also asks the other partitions' owners for their
// head of line.
func (s *UIServer) kafkaGroup(w http.ResponseWriter, r *http.Request) {
	scope, ok := oneOf(w, r, "scope",
		"scope must be local (this worker's partitions' head of line) or fleet (also the other owners')", scopeLocal, "fleet")
	if !ok {
		return
	}
	g, ok := s.pause.(kafkaGrouper)
	if !ok {
		writeError(w, http.StatusServiceUnavailable, "consumer_not_running", kafka.ErrConsumerNotRunning.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), kafkaGroupTimeout)
	defer cancel()
	st, err := g.GroupState(ctx)
	switch {
	case errors.Is(err, kafka.ErrConsumerNotRunning):
		writeError(w, http.StatusServiceUnavailable, "consumer_not_running", err.Error())
	case errors.Is(err, kafka.ErrGroupRead):
		writeError(w, http.StatusBadGateway, "broker_unavailable", err.Error())
	case err != nil:
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
	default:
		out := GroupAnswer{GroupState: st, Scope: scope, HeadOfLinePeers: []WorkerURL{}, HeadOfLineMissing: []TraceMissing{}}
		if scope == "fleet" && s.fleet != nil {
			s.peersHeadOfLine(r.Context(), &out)
		}
		writeJSON(w, http.StatusOK, out)
	}
}

// peersHeadOfLine fills the head of line of the partitions other live
// members own, from their owners' answers.
func (s *UIServer) peersHeadOfLine(ctx context.Context, out *GroupAnswer) {
	owners := map[string]bool{}
	for _, p := range out.GroupPartitions {
		if !p.Mine && !p.Unowned && p.Owner != nil && p.Owner.Worker != "" && p.Owner.Worker != s.cfg.Worker.Name {
			owners[p.Owner.Worker] = true
		}
	}
	if len(owners) == 0 {
		return
	}
	ask, missing := s.livePeers(func(w fleet.Worker) bool { return owners[w.Name] }, unreachable)
	got, failed := askPeers[HeadOfLineAnswer](ctx, s, ask, "/api/v1/debug/kafka/head-of-line", nil)
	out.HeadOfLineMissing = append(append(out.HeadOfLineMissing, missing...), failed...)
	for _, m := range out.HeadOfLineMissing {
		delete(owners, m.Worker)
	}
	for _, wk := range ask {
		delete(owners, wk.Name)
		a, ok := got[wk.Name]
		if !ok {
			continue
		}
		out.HeadOfLinePeers = append(out.HeadOfLinePeers, WorkerURL{wk.Name, wk.URL})
		for _, ph := range a.Partitions {
			for i := range out.GroupPartitions {
				p := &out.GroupPartitions[i]
				if p.Partition == ph.Partition && !p.Mine && p.Owner != nil && p.Owner.Worker == wk.Name {
					p.HeadOfLine = ph.HeadOfLine
				}
			}
		}
	}
	for name := range owners {
		out.HeadOfLineMissing = append(out.HeadOfLineMissing, TraceMissing{Worker: name, Reason: "not in the workers list (no card in shared.dir, not a static peer)"})
	}
	sort.Slice(out.HeadOfLineMissing, func(i, j int) bool { return out.HeadOfLineMissing[i].Worker < out.HeadOfLineMissing[j].Worker })
}

// kafkaHeadOfLine answers what holds back each partition this worker owns,
// from memory (what another worker's group view of scope fleet asks).
func (s *UIServer) kafkaHeadOfLine(w http.ResponseWriter, r *http.Request) {
	g, ok := s.pause.(kafkaGrouper)
	var heads map[int32]*kafka.HeadOfLine
	err := kafka.ErrConsumerNotRunning
	if ok {
		heads, err = g.HeadOfLine()
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "consumer_not_running", err.Error())
		return
	}
	out := HeadOfLineAnswer{Worker: s.cfg.Worker.Name, Partitions: make([]PartitionHead, 0, len(heads))}
	for p, h := range heads {
		out.Partitions = append(out.Partitions, PartitionHead{p, h})
	}
	sort.Slice(out.Partitions, func(i, j int) bool { return out.Partitions[i].Partition < out.Partitions[j].Partition })
	writeJSON(w, http.StatusOK, out)
}
