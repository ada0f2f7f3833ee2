package kafka

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/worker/kconn"
)

// leaveTimeout bounds the leave of a static member at shutdown.
const leaveTimeout = 10 * time.Second

// leaveStatic removes this worker's static member from the group after
// its consumer closed. A closing static member sends no LeaveGroup (Kafka
// keeps its partitions for its session, so that a restart of the same
// name gets them back without a rebalance); with
// sources.kafka.leave_group_on_shutdown the worker removes it by its
// instance id (KIP-345) so the others take its partitions at once. A
// dynamic member left the group when its client closed. The consumer is
// closed first: a member removed while its client still runs would rejoin.
func (s *Source) leaveStatic() {
	if !s.cfg.StartupAlignEnabled || !s.cfg.LeaveGroupOnShutdown {
		return
	}
	err := s.removeInstance(s.wcfg.Worker.Name)
	if err != nil {
		s.log.Warn("kafka_group_leave_failed", "error", err.Error(), "instance_id", s.wcfg.Worker.Name,
			"detail", "the group keeps this worker's partitions until its session times out")
		return
	}
	s.log.Info("kafka_group_left", "instance_id", s.wcfg.Worker.Name)
}

// removeInstance asks the group's coordinator to remove the static member
// of instance id, with a client of its own (the consumer's is closed).
func (s *Source) removeInstance(id string) error {
	copts, err := kconn.Opts(s.wcfg.SourceConn())
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.ClientID("svc-" + s.wcfg.Worker.Name)}, copts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
	defer cancel()
	res, err := kadm.NewClient(cl).LeaveGroup(ctx, kadm.LeaveGroup(s.cfg.Group).InstanceIDs(id).Reason("svc worker shut down cleanly"))
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		return fmt.Errorf("leave group as instance %s: %w", id, err)
	}
	return nil
}
