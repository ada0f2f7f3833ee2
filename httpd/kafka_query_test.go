package httpd

import (
	"errors"
	"net/url"
	"reflect"
	"testing"

	"svc/kafkaread"
)

func TestParseStreamQuery(t *testing.T) {
	t.Parallel()
	tests := []struct {
		query   string
		want    kafkaread.StreamQuery
		wantErr bool
	}{
		{"from_ts=5", kafkaread.StreamQuery{FromTS: 5}, false},
		{"from_ts=5&to_ts=9&limit=20000&partition=2", kafkaread.StreamQuery{FromTS: 5, ToTS: ptr(int64(9)), Limit: 20000, Partition: ptr(int32(2))}, false},
		{"", kafkaread.StreamQuery{}, true},
		{"from_ts=", kafkaread.StreamQuery{}, true},
		{"from_ts=abc", kafkaread.StreamQuery{}, true},
		{"from_ts=-1", kafkaread.StreamQuery{}, true},
		{"from_ts=5&to_ts=4", kafkaread.StreamQuery{}, true},
		{"from_ts=5&limit=-3", kafkaread.StreamQuery{}, true},
		{"from_ts=5&partition=99999999999", kafkaread.StreamQuery{}, true},
		{"from_ts=5&from_ts=6", kafkaread.StreamQuery{}, true},
		{"from_ts=5&isolation=read_committed", kafkaread.StreamQuery{FromTS: 5, Isolation: kafkaread.ReadCommitted}, false},
		{"from_ts=5&isolation=read_uncommitted", kafkaread.StreamQuery{FromTS: 5}, false},
		{"from_ts=5&isolation=", kafkaread.StreamQuery{FromTS: 5}, false},
		{"from_ts=5&isolation=READ_COMMITTED", kafkaread.StreamQuery{}, true},
		{"from_ts=5&isolation=read_committed&isolation=read_committed", kafkaread.StreamQuery{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			v, _ := url.ParseQuery(tt.query)
			got, err := parseStreamQuery(v)
			if tt.wantErr {
				if !errors.Is(err, kafkaread.ErrBadQuery) {
					t.Errorf("parseStreamQuery(%q) = %+v, %v, want kafkaread.ErrBadQuery", tt.query, got, err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("parseStreamQuery(%q) = %+v, %v, want %+v", tt.query, got, err, tt.want)
			}
		})
	}
}

func TestParseMessageQuery(t *testing.T) {
	t.Parallel()
	tests := []struct {
		query     string
		partition int32
		offset    int64
		iso       kafkaread.Isolation
		wantErr   bool
	}{
		{"partition=1&offset=42", 1, 42, kafkaread.ReadUncommitted, false},
		{"partition=1&offset=42&isolation=read_committed", 1, 42, kafkaread.ReadCommitted, false},
		{"partition=1&offset=42&isolation=read_uncommitted", 1, 42, kafkaread.ReadUncommitted, false},
		{"partition=1", 0, 0, kafkaread.ReadUncommitted, true},
		{"offset=1", 0, 0, kafkaread.ReadUncommitted, true},
		{"partition=x&offset=1", 0, 0, kafkaread.ReadUncommitted, true},
		{"partition=1&offset=42&isolation=committed", 0, 0, kafkaread.ReadUncommitted, true},
	}
	for _, tt := range tests {
		v, _ := url.ParseQuery(tt.query)
		p, o, iso, err := parseMessageQuery(v)
		if tt.wantErr != (err != nil) || p != tt.partition || o != tt.offset || iso != tt.iso || (err != nil && !errors.Is(err, kafkaread.ErrBadQuery)) {
			t.Errorf("parseMessageQuery(%q) = %d, %d, %v, %v, want %d, %d, %v, error %v", tt.query, p, o, iso, err, tt.partition, tt.offset, tt.iso, tt.wantErr)
		}
	}
}

// FuzzparseStreamQuery checks that no query string panics and every
// accepted query satisfies the invariants Stream relies on.
func FuzzParseStreamQuery(f *testing.F) {
	f.Add("from_ts=1&to_ts=2&limit=3&partition=0")
	f.Add("from_ts=-9223372036854775808")
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := parseStreamQuery(v)
		if err != nil {
			return
		}
		if q.FromTS < 0 || q.Limit < 0 || (q.ToTS != nil && *q.ToTS < q.FromTS) {
			t.Errorf("parseStreamQuery(%q) accepted %+v", raw, q)
		}
	})
}
func ptr[T any](v T) *T { return &v }
