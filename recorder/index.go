package recorder

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"slices"

	"zombiezen.com/go/sqlite"
)

// An archive part's .idx holds 24-bit fingerprints of the task ids and
// labels the part holds, in buckets (about 3.3 bytes a key, wrong about
// once in a million), so a trace skips parts that cannot hold its key
// without inflating them. Layout: docs/storage-format.md, section 4a.
const (
	idxMagic     = "SVCIDX1\n"
	idxHeader    = 32
	idxPerBucket = 16      // keys a bucket holds on average
	idxMaxBucket = 1 << 16 // keys read from one bucket at most; more: "maybe"
	idxMaxKeys   = 1<<32 - 1
)

// Key kinds of an index: a task id, a label name, a label name and value.
func taskKey(id string) []byte { return append([]byte{'t'}, id...) }
func labelNameKey(name string) []byte {
	return append([]byte{'n'}, name...)
}
func labelKey(name, value string) []byte {
	k := binary.AppendUvarint([]byte{'v'}, uint64(len(name)))
	return append(append(k, name...), value...)
}

// keyHash is FNV-1a 64 of key, finished with the SplitMix64 mixer.
func keyHash(key []byte) uint64 {
	h := fnv.New64a()
	h.Write(key)
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// idxBucket and idxPrint split a key's hash into its bucket among b and
// its fingerprint.
func idxBucket(h uint64, b uint32) uint32 { return uint32((h >> 32) * uint64(b) >> 32) }
func idxPrint(h uint64) uint32            { return uint32(h) & 0xffffff }

// indexKeys collects the hashes of every key of the database db: its task
// ids, label names and label pairs.
func indexKeys(db *sqlite.Conn) ([]uint64, error) {
	var hashes []uint64
	queries := []struct {
		sql string
		key func(a, b string) []byte
	}{
		{`SELECT task_id, '' FROM events WHERE task_id != '' UNION SELECT task_id, '' FROM tasks`, func(a, _ string) []byte { return taskKey(a) }},
		{`SELECT DISTINCT name, '' FROM task_labels`, func(a, _ string) []byte { return labelNameKey(a) }},
		{`SELECT DISTINCT name, value FROM task_labels`, labelKey},
	}
	for _, q := range queries {
		err := query(db, q.sql, func(st *sqlite.Stmt) error {
			hashes = append(hashes, keyHash(q.key(st.ColumnText(0), st.ColumnText(1))))
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("index keys: %w", err)
		}
	}
	return hashes, nil
}

// buildIndex lays out the .idx of an archive of size bytes whose gzip
// trailer is trailer, holding the keys whose hashes are given.
func buildIndex(hashes []uint64, size int64, trailer [8]byte) ([]byte, error) {
	if len(hashes) > idxMaxKeys {
		return nil, fmt.Errorf("index: %d keys, at most %d", len(hashes), idxMaxKeys)
	}
	b := uint32(max(1, (len(hashes)+idxPerBucket-1)/idxPerBucket))
	type entry struct{ bucket, print uint32 }
	entries := make([]entry, 0, len(hashes))
	for _, h := range hashes {
		entries = append(entries, entry{idxBucket(h, b), idxPrint(h)})
	}
	slices.SortFunc(entries, func(x, y entry) int { return cmp.Or(cmp.Compare(x.bucket, y.bucket), cmp.Compare(x.print, y.print)) })
	entries = slices.Compact(entries)
	n := uint32(len(entries))
	out := make([]byte, 0, idxHeader+4*(int(b)+1)+3*int(n))
	out = append(out, idxMagic...)
	out = binary.LittleEndian.AppendUint64(out, uint64(size))
	out = append(out, trailer[:]...)
	out = binary.LittleEndian.AppendUint32(out, n)
	out = binary.LittleEndian.AppendUint32(out, b)
	next := 0
	for bucket := uint32(0); bucket <= b; bucket++ {
		for next < len(entries) && entries[next].bucket < bucket {
			next++
		}
		out = binary.LittleEndian.AppendUint32(out, uint32(next))
	}
	for _, e := range entries {
		out = append(out, byte(e.print), byte(e.print>>8), byte(e.print>>16))
	}
	return out, nil
}

// gzipTrailer reads the last 8 bytes of a gzip file: CRC-32 and ISIZE.
func gzipTrailer(f *os.File, size int64) ([8]byte, error) {
	var t [8]byte
	if size < 18 { // a gzip header and trailer at least
		return t, errors.New("gzip trailer: file too short")
	}
	_, err := f.ReadAt(t[:], size-8)
	return t, err
}

// writeIndex writes name.idx into hist for the archive compressed at the
// temp name hist/gz, holding the keys whose hashes are given.
func writeIndex(hist *dir, gz, name string, hashes []uint64) error {
	f, fi, err := hist.openFile(gz)
	if err != nil {
		return fmt.Errorf("index %s: %w", name, err)
	}
	trailer, err := gzipTrailer(f, fi.Size())
	f.Close()
	if err != nil {
		return fmt.Errorf("index %s: %w", name, err)
	}
	data, err := buildIndex(hashes, fi.Size(), trailer)
	if err != nil {
		return err
	}
	return hist.writeAtomic(name+".idx", data)
}

// mayHold reports whether the archive f of hist may hold one of keys: false
// only when its .idx describes exactly this archive (size and gzip
// trailer) and holds none of them.
func mayHold(hist *dir, f histFile, keys ...[]byte) bool {
	name := f.segs[len(f.segs)-1]
	idx, ifi, err := hist.openFile(name + ".idx")
	if err != nil {
		return true
	}
	defer idx.Close()
	var head [idxHeader]byte
	if _, err := idx.ReadAt(head[:], 0); err != nil || string(head[:8]) != idxMagic {
		return true
	}
	size := int64(binary.LittleEndian.Uint64(head[8:16]))
	n, b := binary.LittleEndian.Uint32(head[24:28]), binary.LittleEndian.Uint32(head[28:32])
	if b == 0 || ifi.Size() != idxHeader+4*(int64(b)+1)+3*int64(n) || size != f.size {
		return true
	}
	arch, afi, err := hist.openFile(name)
	if err != nil {
		return true
	}
	trailer, err := gzipTrailer(arch, afi.Size())
	arch.Close()
	if err != nil || afi.Size() != size || string(trailer[:]) != string(head[16:24]) {
		return true
	}
	prints := int64(idxHeader + 4*(int64(b)+1))
	for _, key := range keys {
		h := keyHash(key)
		bucket := idxBucket(h, b)
		var bounds [8]byte
		if _, err := idx.ReadAt(bounds[:], idxHeader+4*int64(bucket)); err != nil {
			return true
		}
		from, to := binary.LittleEndian.Uint32(bounds[:4]), binary.LittleEndian.Uint32(bounds[4:])
		if from > to || to > n || to-from > idxMaxBucket {
			return true
		}
		buf := make([]byte, 3*int(to-from))
		if len(buf) > 0 {
			if _, err := idx.ReadAt(buf, prints+3*int64(from)); err != nil {
				return true
			}
		}
		want := idxPrint(h)
		for i := 0; i+3 <= len(buf); i += 3 {
			if uint32(buf[i])|uint32(buf[i+1])<<8|uint32(buf[i+2])<<16 == want {
				return true
			}
		}
	}
	return false
}
