package fastjson

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzTaskHeader: AppendTaskHeader writes exactly what json.Marshal
// writes, for any header (HTML characters, invalid UTF-8, U+2028, maps
// sorted, nil maps and keys as null), after whatever dst held.
func FuzzTaskHeader(f *testing.F) {
	f.Add("t-1", 1, "kafka", "source", int32(3), int64(1)<<40, true, "k<1>&\"\\", "utf-8", "label", "1 <&>", "ENV", "\u2028\x01")
	f.Add("t-\xff", 2, "http", "", int32(-1), int64(-1), true, "/wA=", "base64", "", "", "", "")
	f.Add("", 0, "", "", int32(0), int64(0), false, "", "", "b", "2", "A", "\x00\x7f")
	f.Fuzz(func(t *testing.T, id string, attempt int, source, alias string, partition int32, offset int64, hasKey bool, key, enc, lk, lv, ek, ev string) {
		h := TaskHeader{Type: "task", TaskID: id, Attempt: attempt, Source: source, TopicAlias: alias, Partition: partition, Offset: offset,
			Labels: map[string]string{lk: lv, "z" + lk: ev}}
		if hasKey {
			h.Key, h.KeyEncoding = &key, &enc
		}
		if ek != "" {
			h.Env = map[string]string{ek: ev, lk: lv}
		} else if lk != "" {
			h.Env = map[string]string{}
		}
		want, err := json.Marshal(&h)
		if err != nil {
			t.Fatal(err)
		}
		got := AppendTaskHeader([]byte("prefix"), &h)
		if !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Fatalf("\n got %q\nwant prefix%q", got, want)
		}
	})
}
