package httpd

import (
	"fmt"
	"net/url"
	"strconv"

	"svc/kafkaread"
)

// parseMessageQuery reads the required `partition` and `offset` parameters
// of GET /api/v1/debug/kafka/{alias}/message. Errors wrap kafkaread.ErrBadQuery.
func parseMessageQuery(v url.Values) (partition int32, offset int64, err error) {
	p, err := intParam(v, "partition", true, 32)
	if err != nil {
		return 0, 0, err
	}
	o, err := intParam(v, "offset", true, 64)
	if err != nil {
		return 0, 0, err
	}
	if p == nil || o == nil {
		return 0, 0, fmt.Errorf("parse query: partition and offset are required: %w", kafkaread.ErrBadQuery)
	}
	return int32(*p), *o, nil
}

// parseStreamQuery reads `from_ts` (required), `to_ts`, `limit` and
// `partition` of GET /api/v1/debug/kafka/{alias}/messages. Negative from_ts
// or limit and to_ts before from_ts are rejected; Errors wrap kafkaread.ErrBadQuery.
func parseStreamQuery(v url.Values) (kafkaread.StreamQuery, error) {
	var q kafkaread.StreamQuery
	from, err := intParam(v, "from_ts", true, 64)
	if err != nil {
		return q, err
	}
	q.FromTS = *from
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
		p := int32(*part)
		q.Partition = &p
	}
	switch {
	case q.FromTS < 0:
		return q, fmt.Errorf("parse query: from_ts %d is negative: %w", q.FromTS, kafkaread.ErrBadQuery)
	case q.ToTS != nil && *q.ToTS < q.FromTS:
		return q, fmt.Errorf("parse query: to_ts %d is before from_ts %d: %w", *q.ToTS, q.FromTS, kafkaread.ErrBadQuery)
	case q.Limit < 0:
		return q, fmt.Errorf("parse query: limit %d is negative: %w", q.Limit, kafkaread.ErrBadQuery)
	}
	return q, nil
}

// intParam parses parameter name as a base-10 integer of the given bit size;
// nil when absent and not required.
func intParam(v url.Values, name string, required bool, bits int) (*int64, error) {
	raw, ok := v[name]
	if !ok || len(raw) == 0 || raw[0] == "" {
		if required {
			return nil, fmt.Errorf("parse query: %s is required: %w", name, kafkaread.ErrBadQuery)
		}
		return nil, nil
	}
	if len(raw) > 1 {
		return nil, fmt.Errorf("parse query: %s is given %d times: %w", name, len(raw), kafkaread.ErrBadQuery)
	}
	n, err := strconv.ParseInt(raw[0], 10, bits)
	if err != nil {
		return nil, fmt.Errorf("parse query: %s must be an integer: %w", name, kafkaread.ErrBadQuery)
	}
	return &n, nil
}
