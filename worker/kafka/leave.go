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

// leaveStatic removes this worker's static member from the group by its
// instance id (KIP-345) after its consumer closed (else it would rejoin),
// with sources.kafka.leave_group_on_shutdown: a closing static member
// sends no LeaveGroup itself.
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

// removeInstance removes the static member of instance id, with a client
// of its own.
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
