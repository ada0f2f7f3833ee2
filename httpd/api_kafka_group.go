package httpd

import (
	"context"
	"errors"
	"net/http"
	"time"

	"svc/worker/kafka"
)

// kafkaGroupTimeout bounds the broker reads of one group view.
const kafkaGroupTimeout = 10 * time.Second

// kafkaGrouper is the Kafka source's group view. The source is already
// wired in as the consume pause (UIDeps.Pause), so the view is taken from
// it rather than from a dependency of its own.
type kafkaGrouper interface {
	GroupState(ctx context.Context) (kafka.GroupState, error)
}

// kafkaGroup answers GET /api/v1/debug/kafka/group: the consumer group and
// every partition assigned to this worker, with offsets read from the
// brokers now; 503 when the consumer is not running, 502 when the brokers
// do not answer within 10 s.
func (s *UIServer) kafkaGroup(w http.ResponseWriter, r *http.Request) {
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
		writeJSON(w, http.StatusOK, st)
	}
}
