package kafkaread

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestScanRanges: a scan sees each partition's watermarks, reads exactly
// the ranges its plan chose (clipped to the watermarks, in offset order
// per partition), starts at the log start when records were deleted, and
// names an unknown partition or a missing alias like the other reads.
func TestScanRanges(t *testing.T) {
	t.Parallel()
	c, r := windowTopic(t) // 3 partitions of 10 records
	adm := kadm.NewClient(newProducer(t, c.ListenAddrs()))
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: topicIn, Partition: 2, At: 4})
	if _, err := adm.DeleteRecords(t.Context(), del); err != nil {
		t.Fatal(err)
	}
	scan := func(part *int32, plan map[int32]Range) (map[int32]Marks, map[int32][]int64, error) {
		var marks map[int32]Marks
		got := map[int32][]int64{}
		err := r.ScanRanges(t.Context(), AliasSource, part, ReadUncommitted, func(m map[int32]Marks) map[int32]Range {
			marks = m
			return plan
		}, func(rec *kgo.Record) error {
			got[rec.Partition] = append(got[rec.Partition], rec.Offset)
			return nil
		})
		return marks, got, err
	}
	marks, got, err := scan(nil, map[int32]Range{0: {From: 7, To: 10}, 1: {From: -5, To: 2}, 2: {From: 0, To: 6}, 9: {From: 0, To: 5}})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[int32]Marks{0: {0, 10}, 1: {0, 10}, 2: {4, 10}}; fmt.Sprint(marks) != fmt.Sprint(want) {
		t.Errorf("marks = %v, want %v", marks, want)
	}
	if want := map[int32][]int64{0: {7, 8, 9}, 1: {0, 1}, 2: {4, 5}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("scanned %v, want %v", got, want)
	}
	if _, got, err := scan(ptr(int32(1)), map[int32]Range{0: {0, 10}, 1: {From: 8, To: 99}}); err != nil || !slices.Equal(got[1], []int64{8, 9}) || len(got) != 1 {
		t.Errorf("partition 1 alone = %v, %v; want offsets 8 and 9 of partition 1 only", got, err)
	}
	if _, got, err := scan(nil, nil); err != nil || len(got) != 0 {
		t.Errorf("an empty plan = %v, %v; want nothing read", got, err)
	}
	if _, _, err := scan(ptr(int32(5)), nil); !errors.Is(err, ErrUnknownPartition) {
		t.Errorf("unknown partition = %v, want ErrUnknownPartition", err)
	}
	stop := errors.New("enough")
	err = r.ScanRanges(t.Context(), AliasSource, nil, ReadUncommitted, func(map[int32]Marks) map[int32]Range { return map[int32]Range{0: {0, 10}} },
		func(*kgo.Record) error { return stop })
	if !errors.Is(err, stop) {
		t.Errorf("visit error = %v, want it returned", err)
	}
	if err := r.ScanRanges(t.Context(), AliasDLQ, nil, ReadUncommitted, nil, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("scan of a DLQ without a topic = %v, want not found", err)
	}
}
