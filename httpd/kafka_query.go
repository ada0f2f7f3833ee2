package httpd

import (
	"fmt"
	"net/url"
	"strconv"

	"svc/kafkaread"
	"svc/kafkaread/triage"
)

// parseMessageQuery reads the query of GET .../{alias}/message. Errors
// here and below match kafkaread.ErrBadQuery.
func parseMessageQuery(v url.Values) (partition int32, offset int64, iso kafkaread.Isolation, err error) {
	p, err := intParam(v, "partition", true, 32)
	if err != nil {
		return 0, 0, 0, err
	}
	o, err := intParam(v, "offset", true, 64)
	if err != nil {
		return 0, 0, 0, err
	}
	if iso, err = isolationParam(v); err != nil {
		return 0, 0, 0, err
	}
	return int32(*p), *o, iso, nil
}

// parseStreamQuery reads the query of GET .../{alias}/messages.
func parseStreamQuery(v url.Values) (kafkaread.StreamQuery, error) {
	var q kafkaread.StreamQuery
	from, err := intParam(v, "from_ts", true, 64)
	if err != nil {
		return q, err
	}
	q.FromTS = *from
	if q.Isolation, err = isolationParam(v); err != nil {
		return q, err
	}
	if q.ToTS, err = intParam(v, "to_ts", false, 64); err != nil {
		return q, err
	}
	limit, err := intParam(v, "limit", false, 64)
	if err != nil {
		return q, err
	}
	if limit != nil {
		q.Limit = int(*limit)
	}
	part, err := intParam(v, "partition", false, 32)
	if err != nil {
		return q, err
	}
	if part != nil {
		q.Partition = new(int32(*part))
	}
	switch {
	case q.FromTS < 0:
		return q, badQuery("from_ts %d is negative", q.FromTS)
	case q.ToTS != nil && *q.ToTS < q.FromTS:
		return q, badQuery("to_ts %d is before from_ts %d", *q.ToTS, q.FromTS)
	case limit != nil && *limit < 1:
		return q, badQuery("limit must be at least 1 (got %d); omit it for the cap of %d", *limit, kafkaread.MaxStreamRecords)
	}
	return q, nil
}

// intParam parses parameter name as a base-10 integer of the given bit size;
// nil when absent and not required.
func intParam(v url.Values, name string, required bool, bits int) (*int64, error) {
	raw, ok := v[name]
	if !ok || len(raw) == 0 || raw[0] == "" {
		if required {
			return nil, badQuery("%s is required", name)
		}
		return nil, nil
	}
	if len(raw) > 1 {
		return nil, badQuery("%s is given %d times", name, len(raw))
	}
	n, err := strconv.ParseInt(raw[0], 10, bits)
	if err != nil {
		return nil, badQuery("%s must be an integer", name)
	}
	return &n, nil
}

// isolationParam reads the optional `isolation` parameter (default, also
// when empty, read_uncommitted).
func isolationParam(v url.Values) (kafkaread.Isolation, error) {
	raw, ok := v["isolation"]
	if !ok || len(raw) == 0 || raw[0] == "" {
		return kafkaread.ReadUncommitted, nil
	}
	if len(raw) > 1 {
		return 0, badQuery("isolation is given %d times", len(raw))
	}
	iso, ok := kafkaread.ParseIsolation(raw[0])
	if !ok {
		return 0, badQuery("isolation must be read_uncommitted (the default) or read_committed, not %q", raw[0])
	}
	return iso, nil
}

// queryError is a bad query parameter; its text is the whole detail.
type queryError string

func (e queryError) Error() string        { return string(e) }
func (e queryError) Is(target error) bool { return target == kafkaread.ErrBadQuery }

func badQuery(format string, args ...any) error { return queryError(fmt.Sprintf(format, args...)) }

// parseTriageQuery reads the query of GET /api/v1/debug/dlq/records.
func parseTriageQuery(v url.Values) (triage.Query, error) {
	var q triage.Query
	for name := range v {
		switch name {
		case "limit", "scan", "partition", "before", "after", "key", "task_id", "reason", "isolation":
			if len(v[name]) > 1 {
				return q, badQuery("%s is given %d times", name, len(v[name]))
			}
		case "token":
		default:
			return q, badQuery("unknown parameter %s (known: limit, scan, partition, before, after, key, task_id, reason, isolation)", name)
		}
	}
	var err error
	if q.Isolation, err = isolationParam(v); err != nil {
		return q, err
	}
	for _, n := range []struct {
		name string
		dst  *int
		max  int
	}{{"limit", &q.Limit, triage.MaxLimit}, {"scan", &q.Scan, triage.MaxScan}} {
		x, err := intParam(v, n.name, false, 64)
		if err != nil {
			return q, err
		}
		if x != nil {
			if *x < 1 || *x > int64(n.max) {
				return q, badQuery("%s must be 1-%d (got %d)", n.name, n.max, *x)
			}
			*n.dst = int(*x)
		}
	}
	part, err := intParam(v, "partition", false, 32)
	if err != nil {
		return q, err
	}
	if part != nil {
		if *part < 0 {
			return q, badQuery("partition must not be negative")
		}
		q.Partition = new(int32(*part))
	}
	if v.Has("before") && v.Has("after") {
		return q, badQuery("give before or after, not both")
	}
	for name, dst := range map[string]*triage.Cursor{"before": &q.Before, "after": &q.After} {
		if s := v.Get(name); v.Has(name) {
			if *dst, err = triage.ParseCursor(s); err != nil {
				return q, err
			}
		}
	}
	if v.Has("key") {
		k := v.Get("key")
		q.Key = &k
	}
	q.TaskID, q.Reason = v.Get("task_id"), v.Get("reason")
	return q, nil
}
