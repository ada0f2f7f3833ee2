// Package triage pages through the dead-letter topic for an operator:
// newest first, filtered by key, task id and reason, with the reasons
// counted and cursors both ways. Each request reads at most Query.Scan
// records through kafkaread.Reader.ScanRanges.
package triage

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"svc/kafkaread"
	"svc/worker/payload"
)

// Bounds of one request.
const (
	DefaultLimit   = 50
	MaxLimit       = 200
	DefaultScan    = 1000
	MaxScan        = kafkaread.MaxStreamRecords // 10000
	MaxReasons     = 100                        // distinct reasons counted; the rest in Page.OtherReasons
	PreviewBytes   = 512                        // how much of a value (and of a key) a page shows
	maxReasonBytes = 1024                       // how much of a reason is kept
)

// The headers worker/sink puts on a DLQ record, and redrive's count.
const (
	HeaderTaskID          = "svc-task-id"
	HeaderReason          = "svc-dlq-reason"
	HeaderAttempts        = "svc-dlq-attempts"
	HeaderSourcePartition = "svc-dlq-source-partition"
	HeaderSourceOffset    = "svc-dlq-source-offset"
	HeaderWorker          = "svc-dlq-worker"
	HeaderTruncated       = "svc-dlq-truncated"
	HeaderRedriveCount    = "svc-redrive-count"
)

// Query selects a page. Before and After are cursors of an earlier page
// (Page.Older, Page.Newer); at most one is set, none means the newest.
type Query struct {
	Limit     int    // records on the page, 1-MaxLimit (0: DefaultLimit)
	Scan      int    // records read at most, 1-MaxScan (0: DefaultScan)
	Partition *int32 // only this DLQ partition
	Before    Cursor // records older than the cursor, newest first
	After     Cursor // records newer than the cursor (the page just above it)
	Key       *string
	TaskID    string // exact svc-task-id
	Reason    string // case-insensitive substring of svc-dlq-reason
	Isolation kafkaread.Isolation
}

// Cursor is an offset in each DLQ partition: before it means below, after
// it at or above. Its text form is "p:o,p:o" in partition order.
type Cursor map[int32]int64

// String is the cursor's text form.
func (c Cursor) String() string {
	var b strings.Builder
	for i, p := range slices.Sorted(maps.Keys(c)) {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d:%d", p, c[p])
	}
	return b.String()
}

// ParseCursor reads a cursor's text form. Errors match kafkaread.ErrBadQuery.
func ParseCursor(s string) (Cursor, error) {
	c := Cursor{}
	for _, part := range strings.Split(s, ",") {
		ps, os, ok := strings.Cut(part, ":")
		p, err1 := strconv.ParseInt(ps, 10, 32)
		o, err2 := strconv.ParseInt(os, 10, 64)
		if !ok || err1 != nil || err2 != nil || p < 0 || o < 0 {
			return nil, fmt.Errorf("cursor %q: want partition:offset pairs separated by commas (as a page's older or newer): %w", s, kafkaread.ErrBadQuery)
		}
		if _, dup := c[int32(p)]; dup {
			return nil, fmt.Errorf("cursor %q names partition %d twice: %w", s, p, kafkaread.ErrBadQuery)
		}
		c[int32(p)] = o
	}
	return c, nil
}

// Entry is one DLQ record as a page shows it: its place, svc-* headers and
// the start of its key and value.
type Entry struct {
	Partition        int32   `json:"partition"`
	Offset           int64   `json:"offset"`
	TimestampMs      *int64  `json:"timestamp_ms"`
	Key              *string `json:"key"`
	KeyEncoding      string  `json:"key_encoding"`
	KeyTruncated     bool    `json:"key_truncated,omitempty"`
	TaskID           string  `json:"task_id"`
	Reason           string  `json:"reason"`
	Attempts         *int    `json:"attempts"`
	SourcePartition  *int32  `json:"source_partition"`
	SourceOffset     *int64  `json:"source_offset"`
	Worker           string  `json:"worker"`
	TruncatedFrom    *int64  `json:"truncated_from"` // svc-dlq-truncated: the value's size before the cut
	RedriveCount     int     `json:"redrive_count"`  // svc-redrive-count, 0 for a first failure
	Payload          string  `json:"payload"`        // the first PreviewBytes of the value
	PayloadEncoding  string  `json:"payload_encoding"`
	PayloadSizeBytes int     `json:"payload_size_bytes"`
	PayloadTruncated bool    `json:"payload_truncated"`
}

// ReasonCount is how many matching records of the scanned ones carry a reason.
type ReasonCount struct {
	Reason string `json:"reason"`
	Count  int    `json:"count"`
}

// PartitionMarks are a partition's watermarks when the page was read.
type PartitionMarks struct {
	Partition int32 `json:"partition"`
	Low       int64 `json:"low"`
	High      int64 `json:"high"`
}

// Page is one answer.
type Page struct {
	Records []Entry `json:"records"` // newest first
	// Reasons counts the matched records by reason, most frequent first.
	Scanned      int           `json:"scanned"`
	ScanLimit    int           `json:"scan_limit"`
	Matched      int           `json:"matched"`
	Reasons      []ReasonCount `json:"reasons"`
	OtherReasons int           `json:"other_reasons"`
	// Older and Newer are the cursors of the next page each way; nil when
	// nothing is left that way.
	Older *string `json:"older"`
	Newer *string `json:"newer"`
	// Partitions are the watermarks read; Total the offsets they span.
	Partitions []PartitionMarks    `json:"partitions"`
	Total      int64               `json:"total"`
	Isolation  kafkaread.Isolation `json:"isolation"`
}

// Scanner is what a page is read with; kafkaread.Reader implements it.
type Scanner interface {
	ScanRanges(ctx context.Context, alias string, partition *int32, iso kafkaread.Isolation, plan func(map[int32]kafkaread.Marks) map[int32]kafkaread.Range, visit func(*kgo.Record) error) error
}

// Read reads one page of the "dlq" alias. Errors are the read API's.
func Read(ctx context.Context, sc Scanner, q Query) (Page, error) {
	if err := q.check(); err != nil {
		return Page{}, err
	}
	older := q.After == nil // the direction of the scan: newest first from the end or Before
	var marks map[int32]kafkaread.Marks
	ranges := map[int32]kafkaread.Range{}
	plan := func(m map[int32]kafkaread.Marks) map[int32]kafkaread.Range {
		marks = m
		win := map[int32]kafkaread.Range{} // the offsets the page may read
		avail := map[int32]int64{}
		for p, mk := range m {
			w := kafkaread.Range{From: mk.Low, To: mk.High}
			if at, ok := q.Before[p]; ok {
				w.To = min(at, mk.High)
			} else if at, ok := q.After[p]; ok {
				w.From = max(at, mk.Low)
			} else if q.Before != nil || q.After != nil {
				continue // a partition the cursor does not name
			}
			win[p], avail[p] = w, w.To-w.From
		}
		for p, n := range share(avail, int64(q.Scan)) {
			if w := win[p]; older {
				ranges[p] = kafkaread.Range{From: w.To - n, To: w.To}
			} else {
				ranges[p] = kafkaread.Range{From: w.From, To: w.From + n}
			}
		}
		return ranges
	}
	parts := map[int32]*partScan{}
	reasons := map[string]int{}
	page := Page{ScanLimit: q.Scan, Records: []Entry{}, Reasons: []ReasonCount{}, Partitions: []PartitionMarks{}, Isolation: q.Isolation}
	err := sc.ScanRanges(ctx, kafkaread.AliasDLQ, q.Partition, q.Isolation, plan, func(rec *kgo.Record) error {
		page.Scanned++
		if !q.matches(rec) {
			return nil
		}
		page.Matched++
		e := entry(rec)
		if _, ok := reasons[e.Reason]; ok || len(reasons) < MaxReasons {
			reasons[e.Reason]++
		} else {
			page.OtherReasons++
		}
		ps := parts[rec.Partition]
		if ps == nil {
			ps = &partScan{}
			parts[rec.Partition] = ps
		}
		ps.matched++
		switch {
		case len(ps.kept) < q.Limit:
			ps.kept = append(ps.kept, e)
		case older: // keep the newest Limit: drop the oldest kept
			copy(ps.kept, ps.kept[1:])
			ps.kept[len(ps.kept)-1] = e
		}
		return nil
	})
	if err != nil {
		return Page{}, err
	}
	page.Records, page.Older, page.Newer = merge(q, older, marks, ranges, parts)
	if page.Records == nil {
		page.Records = []Entry{} // no match: "records":[], like "reasons"
	}
	for p, mk := range marks {
		page.Partitions = append(page.Partitions, PartitionMarks{Partition: p, Low: mk.Low, High: mk.High})
		page.Total += mk.High - mk.Low
	}
	sort.Slice(page.Partitions, func(i, j int) bool { return page.Partitions[i].Partition < page.Partitions[j].Partition })
	for r, n := range reasons {
		page.Reasons = append(page.Reasons, ReasonCount{Reason: r, Count: n})
	}
	sort.Slice(page.Reasons, func(i, j int) bool {
		a, b := page.Reasons[i], page.Reasons[j]
		return a.Count > b.Count || a.Count == b.Count && a.Reason < b.Reason
	})
	return page, nil
}

// partScan is what a scan kept of one partition: the matching entries in
// offset order (at most Limit) and how many matched in all.
type partScan struct {
	kept    []Entry
	matched int
}

// merge builds the page from each partition's kept entries (newest first
// across partitions, Limit records) and the next pages' cursors, which
// never skip a matching record: a partition whose kept entries did not all
// make the page continues from the last one shown, else past the scan.
func merge(q Query, older bool, marks map[int32]kafkaread.Marks, ranges map[int32]kafkaread.Range, parts map[int32]*partScan) (out []Entry, olderCur, newerCur *string) {
	lists := map[int32][]Entry{}
	for p, ps := range parts {
		l := slices.Clone(ps.kept)
		if older {
			slices.Reverse(l) // newest first
		}
		lists[p] = l
	}
	taken := map[int32][]Entry{}
	for len(out) < q.Limit {
		best := int32(-1)
		for p, l := range lists {
			if len(l) == 0 {
				continue
			}
			if best < 0 || later(l[0], lists[best][0]) == older {
				best = p
			}
		}
		if best < 0 {
			break
		}
		out = append(out, lists[best][0])
		taken[best] = append(taken[best], lists[best][0])
		lists[best] = lists[best][1:]
	}
	if !older {
		slices.Reverse(out) // shown newest first
	}
	oc, nc := Cursor{}, Cursor{}
	for p, mk := range marks {
		start, ok := mk.High, true // where this page started in p
		switch {
		case q.Before != nil:
			start, ok = q.Before[p]
		case q.After != nil:
			start, ok = q.After[p]
		}
		if !ok {
			continue
		}
		rg, scanned := ranges[p]
		t := taken[p]
		matched := 0
		if ps := parts[p]; ps != nil {
			matched = ps.matched
		}
		oc[p], nc[p] = start, start // the offsets shown, or the page's start
		if n := len(t); n > 0 {     // t is in offset order, one way or the other
			oc[p], nc[p] = min(t[0].Offset, t[n-1].Offset), max(t[0].Offset, t[n-1].Offset)+1
		}
		all := scanned && len(t) == matched // nothing left unshown in the scanned range
		switch {
		case older && all:
			oc[p] = rg.From
		case all:
			nc[p] = rg.To
		}
		switch {
		case older && len(t) == 0:
			nc[p] = min(start, mk.High)
		case len(t) == 0:
			oc[p] = max(start, mk.Low)
		}
	}
	olderLeft, newerLeft := false, false
	for p, mk := range marks {
		if o, ok := oc[p]; ok && o > mk.Low {
			olderLeft = true
		}
		if n, ok := nc[p]; ok && n < mk.High {
			newerLeft = true
		}
	}
	if olderLeft {
		s := oc.String()
		olderCur = &s
	}
	if newerLeft {
		s := nc.String()
		newerCur = &s
	}
	return out, olderCur, newerCur
}

// later orders entries by timestamp, then partition, then offset.
func later(a, b Entry) bool {
	return cmp.Or(cmp.Compare(tsOf(a), tsOf(b)), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset)) > 0
}

// tsOf is e's timestamp, 0 without one.
func tsOf(e Entry) int64 {
	if e.TimestampMs == nil {
		return 0
	}
	return *e.TimestampMs
}

// share splits n records to read evenly among the partitions, what one
// cannot use going to the others.
func share(avail map[int32]int64, n int64) map[int32]int64 {
	out := map[int32]int64{}
	left := map[int32]int64{}
	for p, a := range avail {
		if a > 0 {
			left[p] = a
		}
	}
	for n > 0 && len(left) > 0 {
		each := max(n/int64(len(left)), 1)
		for _, p := range slices.Sorted(maps.Keys(left)) {
			if n == 0 {
				break
			}
			give := min(each, left[p], n)
			out[p] += give
			left[p] -= give
			n -= give
			if left[p] == 0 {
				delete(left, p)
			}
		}
	}
	return out
}

// check validates q and fills in its defaults.
func (q *Query) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf(format+": %w", append(args, kafkaread.ErrBadQuery)...)
	}
	switch {
	case q.Limit == 0:
		q.Limit = DefaultLimit
	case q.Limit < 1 || q.Limit > MaxLimit:
		return bad("limit must be 1-%d (got %d)", MaxLimit, q.Limit)
	}
	switch {
	case q.Scan == 0:
		q.Scan = DefaultScan
	case q.Scan < 1 || q.Scan > MaxScan:
		return bad("scan must be 1-%d (got %d)", MaxScan, q.Scan)
	}
	if q.Before != nil && q.After != nil {
		return bad("give before or after, not both")
	}
	if q.Partition != nil && *q.Partition < 0 {
		return bad("partition must not be negative")
	}
	if q.Isolation != kafkaread.ReadUncommitted && q.Isolation != kafkaread.ReadCommitted {
		return bad("isolation %d is unknown", q.Isolation)
	}
	return nil
}

// matches applies the filters.
func (q *Query) matches(rec *kgo.Record) bool {
	if q.Key != nil {
		if rec.Key == nil {
			return false
		}
		if k, _ := payload.Encode(rec.Key); k != *q.Key {
			return false
		}
	}
	if q.TaskID != "" && header(rec, HeaderTaskID) != q.TaskID {
		return false
	}
	if q.Reason != "" && !strings.Contains(strings.ToLower(header(rec, HeaderReason)), strings.ToLower(q.Reason)) {
		return false
	}
	return true
}

// header is the last value of a header (the DLQ's own come after the
// message's), "" when absent.
func header(rec *kgo.Record, key string) string {
	v := ""
	for _, h := range rec.Headers {
		if h.Key == key {
			v = string(h.Value)
		}
	}
	return v
}

// entry copies what a page shows of rec (never a view into the fetch).
func entry(rec *kgo.Record) Entry {
	e := Entry{Partition: rec.Partition, Offset: rec.Offset, PayloadSizeBytes: len(rec.Value),
		TaskID: header(rec, HeaderTaskID), Reason: header(rec, HeaderReason), Worker: header(rec, HeaderWorker)}
	if len(e.Reason) > maxReasonBytes {
		e.Reason = e.Reason[:maxReasonBytes]
	}
	if ms := rec.Timestamp.UnixMilli(); ms > 0 {
		e.TimestampMs = &ms
	}
	if rec.Key != nil {
		k, cut := preview(rec.Key)
		s, enc := payload.Encode(k)
		e.Key, e.KeyEncoding, e.KeyTruncated = &s, enc, cut
	} else {
		e.KeyEncoding = payload.UTF8
	}
	v, cut := preview(rec.Value)
	e.Payload, e.PayloadEncoding = payload.Encode(v)
	e.PayloadTruncated = cut
	if n, err := strconv.Atoi(header(rec, HeaderAttempts)); err == nil {
		e.Attempts = &n
	}
	if p, err := strconv.ParseInt(header(rec, HeaderSourcePartition), 10, 32); err == nil {
		p32 := int32(p)
		e.SourcePartition = &p32
	}
	if o, err := strconv.ParseInt(header(rec, HeaderSourceOffset), 10, 64); err == nil {
		e.SourceOffset = &o
	}
	if n, err := strconv.ParseInt(header(rec, HeaderTruncated), 10, 64); err == nil {
		e.TruncatedFrom = &n
	}
	if n, err := strconv.Atoi(header(rec, HeaderRedriveCount)); err == nil {
		e.RedriveCount = n
	}
	return e
}

// preview is the first PreviewBytes of b, cut at a character boundary
// when b is UTF-8 text.
func preview(b []byte) ([]byte, bool) {
	if len(b) <= PreviewBytes {
		return b, false
	}
	n := PreviewBytes
	if utf8.Valid(b) {
		for n > 0 && !utf8.RuneStart(b[n]) {
			n--
		}
	}
	return b[:n], true
}
