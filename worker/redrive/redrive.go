// Package redrive sends dead-lettered messages back to the source topic:
// it reads a range of the DLQ, and either probes each record through the
// live handler (a dry run) or re-produces its original message to the
// source topic, marked with svc-redrive-* headers.
package redrive

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"svc/kafkaread"
	"svc/worker"
	"svc/worker/config"
	"svc/worker/kconn"
	"svc/worker/model"
)

// MaxRecords caps the records of one redrive call.
const MaxRecords = 10000

// MaxSelected caps the records one call may name one by one
// (Request.Records).
const MaxSelected = 1000

// Headers a redriven record carries. Count is how many times the message
// was redriven, this time included; Source is the DLQ record it came from.
const (
	HeaderSource = "svc-redrive-source" // "<dlq partition>:<dlq offset>"
	HeaderTS     = "svc-redrive-ts"     // epoch ms
	HeaderCount  = "svc-redrive-count"
	HeaderWorker = "svc-redrive-worker"
	// HeaderLabel makes the task that consumes a redriven record carry the
	// label redrive=<Summary.Run>, so GET /api/v1/debug/trace-by-label
	// finds the tasks of one run across the fleet.
	HeaderLabel = "svc-label-" + LabelName
	LabelName   = "redrive"
)

// Outcomes of one record.
const (
	WouldSucceed = "would_succeed" // dry run: every task of the probe was ok
	WouldFail    = "would_fail"    // dry run: a task failed again
	Redriven     = "redriven"      // produced to the source topic
	Duplicate    = "duplicate"     // redriven before (by this worker) or already handled by this call
	Failed       = "failed"        // the probe or the produce itself failed
	Truncated    = "truncated"     // the DLQ holds the message cut to fit (svc-dlq-truncated): never redriven
)

// headerTruncated marks a DLQ record whose value was cut to fit the DLQ
// topic (sink.HeaderDLQTruncated; the sink package is not imported here).
const headerTruncated = "svc-dlq-truncated"

// Request is one redrive call: an offset range of one DLQ partition
// (FromOffset set), a time window like GET .../messages, or DLQ records
// named one by one (Records set: the other selectors are unused).
type Request struct {
	Records              []At
	Partition            *int32
	FromOffset, ToOffset *int64
	FromTS               int64
	ToTS                 *int64
	Limit                int // at most MaxRecords; 0 means MaxRecords
	DryRun               bool
	// Again redrives records this worker redrove before (without it they
	// are skipped as Duplicate).
	Again bool
}

// At names one DLQ record.
type At struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

// Line is the outcome of one DLQ record.
type Line struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Outcome   string `json:"outcome"`
	Error     string `json:"error,omitempty"`
	// Tasks are the dry run's probe results.
	Tasks []TaskOutcome `json:"tasks,omitempty"`
	// To is where a redriven record landed: "<partition>:<offset>".
	To string `json:"to,omitempty"`
}

// TaskOutcome is one task of a dry-run probe.
type TaskOutcome struct {
	TaskID string `json:"task_id"`
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

// Summary counts a call's outcomes.
type Summary struct {
	DryRun       bool `json:"dry_run"`
	Records      int  `json:"records"`
	WouldSucceed int  `json:"would_succeed"`
	WouldFail    int  `json:"would_fail"`
	Redriven     int  `json:"redriven"`
	Duplicates   int  `json:"duplicates"`
	Truncated    int  `json:"truncated"`
	Failed       int  `json:"failed"`
	// Run names a real run: every record it redrove carries the label
	// redrive=<Run>. Empty for a dry run.
	Run string `json:"run,omitempty"`
}

// Reader reads the DLQ; kafkaread.Reader implements it.
type Reader interface {
	StreamRaw(ctx context.Context, alias string, q kafkaread.StreamQuery, emit func(*kgo.Record) error) error
}

// Prober runs a message through the live handler; worker.App implements it.
type Prober interface {
	Probe(ctx context.Context, req worker.ProbeRequest) ([]model.TaskResult, error)
}

// Redriver runs redrive calls; safe for concurrent use.
type Redriver struct {
	reader  Reader
	prober  Prober
	cl      *kgo.Client
	topic   string
	worker  string
	timeout time.Duration
	log     *slog.Logger
	ledger  *ledger
	locks   locks
}

// New builds the redriver of a worker whose Kafka source is on: it reads
// the "dlq" alias and produces to sources.kafka.topic with the consumer's
// connection. What it redrove is remembered under storage.dir (ledger).
func New(cfg *config.Config, reader Reader, prober Prober, log *slog.Logger) (*Redriver, error) {
	if !cfg.Sources.Kafka.Enabled {
		return nil, errors.New("redrive: the Kafka source is off")
	}
	led, err := openLedger(cfg.Storage.Dir, cfg.DLQTopic())
	if err != nil {
		return nil, err
	}
	opts, err := kconn.Opts(cfg.SourceConn())
	if err != nil {
		return nil, fmt.Errorf("redrive: %w", err)
	}
	opts = append([]kgo.Opt{kgo.ClientID("svc-redrive")}, opts...)
	opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		led.close()
		return nil, fmt.Errorf("redrive: %w", err)
	}
	return &Redriver{reader: reader, prober: prober, cl: cl, topic: cfg.Sources.Kafka.Topic,
		worker: cfg.Worker.Name, timeout: cfg.DLQ.SendTimeout.D(), log: log, ledger: led}, nil
}

// Close closes the producer and the ledger.
func (r *Redriver) Close() {
	r.cl.Close()
	r.ledger.close()
}

// Run redrives (or dry-runs) the records req selects, calling emit with
// each record's outcome in DLQ order, and returns the counts. Errors before
// the first record are the read API's; a failure after it ends the call
// with what was done so far. One call at a time works on a DLQ partition
// (else ErrBusy). A real run skips, as Duplicate, the records this worker
// redrove before unless req.Again.
func (r *Redriver) Run(ctx context.Context, req Request, emit func(Line) error) (Summary, error) {
	lock := req.Partition
	if len(req.Records) > 0 {
		lock = onePartition(req.Records)
	}
	if !r.locks.acquire(lock) {
		return Summary{}, ErrBusy
	}
	defer r.locks.release(lock)
	sum := Summary{DryRun: req.DryRun}
	if !req.DryRun {
		sum.Run = r.worker + "@" + time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	}
	limit := req.Limit
	if limit <= 0 || limit > MaxRecords {
		limit = MaxRecords
	}
	seen := map[[2]int64]bool{}
	one := func(rec *kgo.Record) error {
		sum.Records++
		line := Line{Partition: rec.Partition, Offset: rec.Offset}
		at := [2]int64{int64(rec.Partition), rec.Offset}
		switch {
		case truncated(rec) != "":
			// A redrive or a probe would run the cut bytes as the message.
			line.Outcome, line.Error = Truncated, "the DLQ holds this message cut to fit its topic (original value "+truncated(rec)+" bytes): not redriven"
			sum.Truncated++
		case seen[at], !req.DryRun && !req.Again && r.ledger.has(at):
			line.Outcome = Duplicate
			sum.Duplicates++
		case req.DryRun:
			r.probe(ctx, rec, &line, &sum)
		default:
			r.produce(ctx, rec, sum.Run, &line, &sum)
			if line.Outcome == Redriven {
				if err := r.ledger.mark(at); err != nil {
					r.log.Warn("redrive_ledger_write_failed", "error", err.Error(),
						"detail", "the record was redriven; a later call may redrive it again")
				}
			}
		}
		seen[at] = true
		return emit(line)
	}
	var err error
	if len(req.Records) > 0 {
		err = r.selected(ctx, req.Records, one, func(l Line) error {
			sum.Records++
			sum.Failed++
			return emit(l)
		})
	} else {
		q := kafkaread.StreamQuery{FromTS: req.FromTS, ToTS: req.ToTS, Partition: req.Partition,
			FromOffset: req.FromOffset, ToOffset: req.ToOffset, Limit: limit, Isolation: dlqIsolation}
		err = r.reader.StreamRaw(ctx, kafkaread.AliasDLQ, q, one)
	}
	if err == nil && !req.DryRun && sum.Redriven > 0 {
		r.log.Info("dlq_redriven", "records", sum.Records, "redriven", sum.Redriven, "failed", sum.Failed)
	}
	return sum, err
}

// dlqIsolation is how redrive reads the DLQ: read_committed, so the DLQ
// records of an exactly-once worker's aborted transactions are never
// redriven.
const dlqIsolation = kafkaread.ReadCommitted

// selected reads the named DLQ records, in partition and offset order,
// calling one for each; a record the DLQ does not hold gets a Failed line
// through missing. Each partition's records are read in runs of at most
// MaxRecords offsets, so a call reads at most MaxRecords records per
// named record however far apart they are.
func (r *Redriver) selected(ctx context.Context, at []At, one func(*kgo.Record) error, missing func(Line) error) error {
	byPart := map[int32][]int64{}
	for _, a := range at {
		byPart[a.Partition] = append(byPart[a.Partition], a.Offset)
	}
	for _, p := range slices.Sorted(maps.Keys(byPart)) {
		offs := byPart[p]
		slices.Sort(offs)
		offs = slices.Compact(offs)
		for len(offs) > 0 {
			n := 1
			for n < len(offs) && offs[n]-offs[0] < MaxRecords {
				n++
			}
			run := offs[:n]
			offs = offs[n:]
			want := map[int64]bool{}
			for _, o := range run {
				want[o] = true
			}
			from, to := run[0], run[len(run)-1]
			q := kafkaread.StreamQuery{Partition: &p, FromOffset: &from, ToOffset: &to, Limit: int(to-from) + 1, Isolation: dlqIsolation}
			err := r.reader.StreamRaw(ctx, kafkaread.AliasDLQ, q, func(rec *kgo.Record) error {
				if !want[rec.Offset] {
					return nil
				}
				delete(want, rec.Offset)
				return one(rec)
			})
			if err != nil {
				return err
			}
			for _, o := range slices.Sorted(maps.Keys(want)) {
				if err := missing(Line{Partition: p, Offset: o, Outcome: Failed,
					Error: "the DLQ does not hold this record (deleted, compacted or beyond its end)"}); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// onePartition is the partition all records name, nil when they name
// several (the call then locks every partition).
func onePartition(at []At) *int32 {
	p := at[0].Partition
	for _, a := range at[1:] {
		if a.Partition != p {
			return nil
		}
	}
	return &p
}

// probe runs the record's original message through the live handler.
func (r *Redriver) probe(ctx context.Context, rec *kgo.Record, line *Line, sum *Summary) {
	pr := worker.ProbeRequest{Key: rec.Key, Value: rec.Value}
	for _, h := range original(rec.Headers) {
		pr.Headers = append(pr.Headers, model.Header{Key: h.Key, Value: h.Value})
	}
	results, err := r.prober.Probe(ctx, pr)
	if err != nil {
		line.Outcome, line.Error = Failed, err.Error()
		sum.Failed++
		return
	}
	line.Outcome = WouldSucceed
	for _, res := range results {
		t := TaskOutcome{TaskID: res.Task.ID, Status: res.Status}
		if res.Err != nil {
			t.Error = res.Err.Error()
		}
		if res.Status != model.StatusOK {
			line.Outcome = WouldFail
		}
		line.Tasks = append(line.Tasks, t)
	}
	if line.Outcome == WouldFail {
		sum.WouldFail++
	} else {
		sum.WouldSucceed++
	}
}

// produce sends the record's original message to the source topic.
func (r *Redriver) produce(ctx context.Context, rec *kgo.Record, run string, line *Line, sum *Summary) {
	out := &kgo.Record{Topic: r.topic, Key: rec.Key, Value: rec.Value, Headers: original(rec.Headers)}
	count := 1
	for _, h := range rec.Headers {
		if h.Key == HeaderCount {
			if n, err := strconv.Atoi(string(h.Value)); err == nil && n > 0 && n < 1<<30 {
				count = n + 1
			}
		}
	}
	out.Headers = append(out.Headers,
		kgo.RecordHeader{Key: HeaderSource, Value: []byte(fmt.Sprintf("%d:%d", rec.Partition, rec.Offset))},
		kgo.RecordHeader{Key: HeaderTS, Value: []byte(strconv.FormatInt(time.Now().UnixMilli(), 10))},
		kgo.RecordHeader{Key: HeaderCount, Value: []byte(strconv.Itoa(count))},
		kgo.RecordHeader{Key: HeaderWorker, Value: []byte(r.worker)},
		kgo.RecordHeader{Key: HeaderLabel, Value: []byte(run)},
	)
	pctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	got, err := r.cl.ProduceSync(pctx, out).First()
	if err != nil {
		line.Outcome, line.Error = Failed, "produce to the source topic: "+err.Error()
		sum.Failed++
		return
	}
	line.Outcome, line.To = Redriven, fmt.Sprintf("%d:%d", got.Partition, got.Offset)
	sum.Redriven++
}

// truncated is the original value size a DLQ record was cut from, "" for
// a whole record.
func truncated(rec *kgo.Record) string {
	for _, h := range rec.Headers {
		if h.Key == headerTruncated {
			return string(h.Value)
		}
	}
	return ""
}

// original returns the headers the message had before it was
// dead-lettered (and redriven, if it was).
func original(hs []kgo.RecordHeader) []kgo.RecordHeader {
	var out []kgo.RecordHeader
	for _, h := range hs {
		if strings.HasPrefix(h.Key, "svc-dlq-") || strings.HasPrefix(h.Key, "svc-redrive-") || h.Key == "svc-task-id" ||
			strings.EqualFold(h.Key, HeaderLabel) {
			continue
		}
		out = append(out, h)
	}
	return out
}
