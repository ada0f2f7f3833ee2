package kafkaread

import (
	"fmt"
	"net/url"
	"strconv"
)

// ParseMessageQuery reads the required `partition` and `offset` parameters
// of GET /api/v1/debug/kafka/{alias}/message. Errors wrap ErrBadQuery.
func ParseMessageQuery(v url.Values) (partition int32, offset int64, err error) {
	p, err := intParam(v, "partition", true, 32)
	if err != nil {
		return 0, 0, err
	}
	o, err := intParam(v, "offset", true, 64)
	if err != nil {
		return 0, 0, err
	}
	if p == nil || o == nil {
		return 0, 0, fmt.Errorf("parse query: partition and offset are required: %w", ErrBadQuery)
	}
	return int32(*p), *o, nil
}

// ParseStreamQuery reads `from_ts` (required), `to_ts`, `limit` and
// `partition` of GET /api/v1/debug/kafka/{alias}/messages. Negative from_ts
// or limit and to_ts before from_ts are rejected; Errors wrap ErrBadQuery.
func ParseStreamQuery(v url.Values) (StreamQuery, error) {
	var q StreamQuery
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
		return q, fmt.Errorf("parse query: from_ts %d is negative: %w", q.FromTS, ErrBadQuery)
	case q.ToTS != nil && *q.ToTS < q.FromTS:
		return q, fmt.Errorf("parse query: to_ts %d is before from_ts %d: %w", *q.ToTS, q.FromTS, ErrBadQuery)
	case q.Limit < 0:
		return q, fmt.Errorf("parse query: limit %d is negative: %w", q.Limit, ErrBadQuery)
	}
	return q, nil
}

// intParam parses parameter name as a base-10 integer of the given bit size;
// nil when absent and not required.
func intParam(v url.Values, name string, required bool, bits int) (*int64, error) {
	raw, ok := v[name]
	if !ok || len(raw) == 0 || raw[0] == "" {
		if required {
			return nil, fmt.Errorf("parse query: %s is required: %w", name, ErrBadQuery)
		}
		return nil, nil
	}
	if len(raw) > 1 {
		return nil, fmt.Errorf("parse query: %s is given %d times: %w", name, len(raw), ErrBadQuery)
	}
	n, err := strconv.ParseInt(raw[0], 10, bits)
	if err != nil {
		return nil, fmt.Errorf("parse query: %s must be an integer: %w", name, ErrBadQuery)
	}
	return &n, nil
}
