package kafka

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type sourceMetrics struct {
	polled     prometheus.Counter
	commits    *prometheus.CounterVec
	stalled    prometheus.Gauge
	inflight   prometheus.Gauge
	delivering prometheus.Gauge
	waiting    prometheus.Gauge
	rebalance  *prometheus.CounterVec
	// Exactly-once transactions (txn.go).
	staged      prometheus.Gauge
	txns        *prometheus.CounterVec
	txnDuration prometheus.Histogram
}

func newSourceMetrics(reg prometheus.Registerer) *sourceMetrics {
	m := &sourceMetrics{
		polled: prometheus.NewCounter(prometheus.CounterOpts{Name: "svc_kafka_records_polled_total", Help: "Records polled from the source topic."}),
		commits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_kafka_commits_total", Help: "Offset commits of the consumer group, by result.",
		}, []string{"result"}),
		stalled: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "svc_kafka_partitions_stalled", Help: "Partitions stall-paused after a failed DLQ send (until restart or revoke).",
		}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "svc_kafka_messages_in_flight", Help: "Polled messages started and not finished: running their tasks (at most pipeline.max_in_flight) or delivering their results.",
		}),
		delivering: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "svc_kafka_messages_delivering", Help: "Polled messages whose tasks ended and whose results are being delivered to sinks or the DLQ; at most 4 × pipeline.max_in_flight (or 64 MiB of results) before no further message starts.",
		}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "svc_kafka_messages_waiting", Help: "Polled messages waiting for an earlier message of their key or for a free slot.",
		}),
		rebalance: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_kafka_rebalance_events_total", Help: "Partition assignment changes, by kind.",
		}, []string{"kind"}),
	}
	m.staged = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "svc_kafka_messages_staged", Help: "Exactly-once: finished messages whose results wait for the transaction that commits them with their offsets; at most 16 × pipeline.max_in_flight (or 64 MiB of results) before no further message starts.",
	})
	m.txns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "svc_kafka_transactions_total", Help: "Exactly-once transactions of the Kafka source (results, DLQ records and offsets), by result: committed, aborted (read again from the committed offsets), fenced (another worker took this worker's transactional id).",
	}, []string{"result"})
	m.txnDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "svc_kafka_transaction_duration_seconds", Help: "Time to produce a transaction's records, commit its offsets and end it (exactly-once).",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	})
	for _, r := range []string{"committed", "aborted", "fenced"} {
		m.txns.WithLabelValues(r)
	}
	m.commits.WithLabelValues("ok")
	m.commits.WithLabelValues("error")
	for _, k := range []string{"assigned", "revoked", "lost"} {
		m.rebalance.WithLabelValues(k)
	}
	reg.MustRegister(m.polled, m.commits, m.stalled, m.inflight, m.delivering, m.waiting, m.rebalance, m.staged, m.txns, m.txnDuration)
	return m
}

// flag is a gauge's value for b.
func flag(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// partitionCollector exports one series per assigned partition, read at
// scrape time, so a revoked partition's series disappear with it. The lag
// series carry the topic and the group, to sum over a fleet per group.
type partitionCollector struct {
	s                                     *Source
	lag, committed, hwm, running, waiting *prometheus.Desc
	paused, stalled                       *prometheus.Desc
	orphaned                              *prometheus.Desc
	lagSeconds                            *prometheus.Desc
	topic, group                          string
}

func newPartitionCollector(s *Source) *partitionCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, []string{"partition"}, nil)
	}
	return &partitionCollector{
		s: s, topic: s.topic, group: s.cfg.Group,
		lag: prometheus.NewDesc("svc_consumer_lag",
			"Messages of an assigned partition not yet committed by the group: high watermark - committed offset (the log start offset when nothing is committed).",
			[]string{"topic", "group", "partition"}, nil),
		committed: d("svc_partition_committed_offset", "The group's committed offset of an assigned partition (the next offset to process); absent until one exists."),
		hwm:       d("svc_partition_high_watermark", "High watermark of an assigned partition (the offset the next produced message gets)."),
		running:   d("svc_partition_messages_in_flight", "Messages of an assigned partition running now."),
		waiting:   d("svc_partition_messages_waiting", "Polled messages of an assigned partition waiting for an earlier message of their key or a free slot."),
		paused:    d("svc_partition_paused", "1 while fetching of an assigned partition is paused (consume pause, backpressure, executor hold or stall)."),
		stalled:   d("svc_partition_stalled", "1 while an assigned partition is stall-paused after a failed DLQ send."),
		orphaned: prometheus.NewDesc("svc_consumer_lag_orphaned",
			"Lag of a source partition no live member consumes: held by a dead member until its session times out, or by nobody during a rebalance (held_by). Exported by one worker of the group only (the live member with the smallest member id).",
			[]string{"topic", "group", "partition", "held_by"}, nil),
		lagSeconds: prometheus.NewDesc("svc_consumer_lag_seconds",
			"Age of the oldest message of an assigned partition not yet committed by the group: now - timestamp of the record at the committed offset (0 without lag). The record is read at most every 10 s, when the committed offset moved; absent until read.",
			[]string{"topic", "group", "partition"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *partitionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.lag, c.committed, c.hwm, c.running, c.waiting, c.paused, c.stalled, c.orphaned, c.lagSeconds} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *partitionCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, p int32) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, strconv.Itoa(int(p)))
	}
	now := time.Now()
	for _, r := range c.s.partitionRows() {
		gauge(c.running, float64(r.InFlight), r.Partition)
		gauge(c.waiting, float64(r.Waiting), r.Partition)
		gauge(c.paused, flag(r.Paused), r.Partition)
		gauge(c.stalled, flag(r.Stalled), r.Partition)
		if r.HighWatermark != nil {
			gauge(c.hwm, float64(*r.HighWatermark), r.Partition)
		}
		if r.CommittedOffset != nil {
			gauge(c.committed, float64(*r.CommittedOffset), r.Partition)
		}
		if r.Lag != nil {
			ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(*r.Lag), c.topic, c.group, strconv.Itoa(int(r.Partition)))
		}
		if r.Lag != nil && r.HighWatermark != nil {
			if secs := c.s.offsets.clock.ageSeconds(now, r.Partition, *r.HighWatermark, *r.Lag); secs != nil {
				ch <- prometheus.MustNewConstMetric(c.lagSeconds, prometheus.GaugeValue, *secs, c.topic, c.group, strconv.Itoa(int(r.Partition)))
			}
		}
	}
	if orphaned, reporter := c.s.orphans(); reporter {
		for _, o := range orphaned {
			if o.Lag != nil {
				ch <- prometheus.MustNewConstMetric(c.orphaned, prometheus.GaugeValue, float64(*o.Lag), c.topic, c.group, strconv.Itoa(int(o.Partition)), o.HeldBy)
			}
		}
	}
}
