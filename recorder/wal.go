package recorder

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// walDamage reads the write-ahead log at path, as a dead process left it,
// and describes the damage that will make SQLite drop committed data: it
// replays frames only up to the first with a wrong checksum or salt, so
// later frames of the same generation are lost, as is a whole log whose
// header fails its checksum. "" when there is none (no log, or only an
// unfinished transaction's or an older generation's frames unreplayed).
// Format: https://www.sqlite.org/fileformat2.html#walformat.
func walDamage(path string) (string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	var hdr [32]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return "", nil // no complete header: no frame was ever written
	}
	magic := binary.BigEndian.Uint32(hdr[0:])
	pageSize := int64(binary.BigEndian.Uint32(hdr[8:]))
	if magic&^1 != 0x377f0682 || pageSize < 512 || pageSize > 65536 || pageSize&(pageSize-1) != 0 {
		return fmt.Sprintf("write-ahead log header unreadable (%d bytes): none of it can be replayed", fi.Size()), nil
	}
	frames := (fi.Size() - 32) / (24 + pageSize)
	bigEnd := magic&1 == 1
	s1, s2 := walChecksum(bigEnd, 0, 0, hdr[:24])
	if s1 != binary.BigEndian.Uint32(hdr[24:]) || s2 != binary.BigEndian.Uint32(hdr[28:]) {
		if frames == 0 {
			return "", nil
		}
		return fmt.Sprintf("write-ahead log header fails its checksum: none of its %d frames can be replayed", frames), nil
	}
	salt1, salt2 := binary.BigEndian.Uint32(hdr[16:]), binary.BigEndian.Uint32(hdr[20:])
	buf := make([]byte, 24+pageSize)
	firstBad, lost, lostCommits := int64(-1), 0, 0
	for i := int64(0); i < frames; i++ {
		if _, err := io.ReadFull(f, buf); err != nil {
			return "", err
		}
		same := binary.BigEndian.Uint32(buf[8:]) == salt1 && binary.BigEndian.Uint32(buf[12:]) == salt2
		if firstBad < 0 {
			a, b := walChecksum(bigEnd, s1, s2, buf[:8])
			a, b = walChecksum(bigEnd, a, b, buf[24:])
			if same && binary.BigEndian.Uint32(buf[0:]) != 0 &&
				a == binary.BigEndian.Uint32(buf[16:]) && b == binary.BigEndian.Uint32(buf[20:]) {
				s1, s2 = a, b
				continue
			}
			firstBad = i
		}
		if same {
			lost++
			if binary.BigEndian.Uint32(buf[4:]) != 0 {
				lostCommits++
			}
		}
	}
	if lost == 0 {
		return "", nil
	}
	return fmt.Sprintf("write-ahead log damaged at frame %d of %d: %d frames from there on (%d transaction ends) cannot be replayed",
		firstBad+1, frames, lost, lostCommits), nil
}

// walChecksum continues SQLite's write-ahead log checksum (s1, s2) over b,
// whose length is a multiple of 8, reading 32-bit words big-endian when
// bigEnd, else little-endian.
func walChecksum(bigEnd bool, s1, s2 uint32, b []byte) (uint32, uint32) {
	word := binary.LittleEndian.Uint32
	if bigEnd {
		word = binary.BigEndian.Uint32
	}
	for i := 0; i+8 <= len(b); i += 8 {
		s1 += word(b[i:]) + s2
		s2 += word(b[i+4:]) + s1
	}
	return s1, s2
}
