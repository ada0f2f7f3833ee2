// Command lpecho is the executor of the Benthos comparison in
// bench/speed.sh: a long-lived echo speaking Benthos's subprocess codec
// length_prefixed_uint32_be (a 4-byte big-endian length, then that many
// bytes) both ways, written like testdata/executors/echo-go (Go, buffered
// reader and writer, one flush per answer) so that each system's child does
// the same work in its own protocol; only svc's JSON task and result
// headers are not there, being part of svc's protocol.
package main

import (
	"bufio"
	"encoding/binary"
	"io"
	"os"
)

func main() {
	in := bufio.NewReaderSize(os.Stdin, 64<<10)
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	var n [4]byte
	var buf []byte
	for {
		if _, err := io.ReadFull(in, n[:]); err != nil {
			return // EOF: done
		}
		size := binary.BigEndian.Uint32(n[:])
		if uint32(cap(buf)) < size {
			buf = make([]byte, size)
		}
		buf = buf[:size]
		if _, err := io.ReadFull(in, buf); err != nil {
			os.Exit(1)
		}
		out.Write(n[:])
		out.Write(buf)
		if err := out.Flush(); err != nil {
			os.Exit(1)
		}
	}
}
