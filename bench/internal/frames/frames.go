// Package frames is the benchmarks' own minimal client of the persistent
// executor protocol (version 2, docs/executor.md): it starts a child, waits
// for its ready frame and sends it one task frame at a time. It does not use
// svc's worker/executor package on purpose: the bare floors built on it
// (bench/kfloor, bench/minimal -persistent) must not get faster when svc's
// pool does.
//
// It does what a plain, honest client needs and nothing more: length
// prefixed frames, a JSON task header, a parsed and checked result header
// (type, task id, attempt, status). No timeouts, no restarts, no stderr
// capture (a child's stderr goes to /dev/null).
package frames

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"unicode/utf8"
)

// Child is one persistent executor process. Its methods are not safe for
// concurrent use: one task at a time, as the protocol says.
type Child struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	w    *bufio.Writer
	r    *bufio.Reader
	hdr  []byte // reused task header
	buf  []byte // reused result frame
	seq  int64
	name string
}

// Task is what one task frame carries besides the payload.
type Task struct {
	Source    string // "kafka" or "http"
	Partition int32
	Offset    int64
	Key       []byte // nil: no key
}

// Start starts bin with args, in its own process group and killed if this
// process dies, with a minimal environment, and waits for its ready frame.
func Start(name, bin string, args ...string) (*Child, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "SVC_EXECUTOR_MODE=persistent"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &Child{cmd: cmd, in: in, w: bufio.NewWriterSize(in, 64<<10), r: bufio.NewReaderSize(out, 64<<10), name: name}
	h, _, err := c.readFrame()
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("%s: no ready frame: %w", name, err)
	}
	var ready struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(h, &ready) != nil || ready.Type != "ready" {
		c.Close()
		return nil, fmt.Errorf("%s: first frame is not ready: %.100q", name, h)
	}
	return c, nil
}

// Pid is the child's process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Do sends one task and waits for its result. The returned body is valid
// until the next call (copy it to keep it). A status other than "ok" is
// returned as an error with the result's error text.
func (c *Child) Do(t Task, payload []byte) ([]byte, error) {
	c.seq++
	id := c.name + "-" + strconv.FormatInt(c.seq, 10)
	h := c.hdr[:0]
	h = append(h, `{"type":"task","task_id":"`...)
	h = append(h, id...)
	h = append(h, `","attempt":1,"source":"`...)
	h = append(h, t.Source...)
	h = append(h, `","topic_alias":"`...)
	if t.Source == "kafka" {
		h = append(h, "source"...)
	}
	h = append(h, `","partition":`...)
	h = strconv.AppendInt(h, int64(t.Partition), 10)
	h = append(h, `,"offset":`...)
	h = strconv.AppendInt(h, t.Offset, 10)
	switch {
	case t.Key == nil:
		h = append(h, `,"key":null,"key_encoding":null`...)
	case utf8.Valid(t.Key) && bytes.IndexByte(t.Key, 0) < 0:
		h = append(h, `,"key":`...)
		h = appendJSONString(h, t.Key)
		h = append(h, `,"key_encoding":"utf-8"`...)
	default:
		h = append(h, `,"key":"`...)
		h = base64.StdEncoding.AppendEncode(h, t.Key)
		h = append(h, `","key_encoding":"base64"`...)
	}
	h = append(h, `,"labels":{},"env":{}}`+"\n"...)
	c.hdr = h
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(h)+len(payload)))
	c.w.Write(n[:])
	c.w.Write(h)
	c.w.Write(payload)
	if err := c.w.Flush(); err != nil {
		return nil, fmt.Errorf("%s: write task: %w", c.name, err)
	}
	rh, body, err := c.readFrame()
	if err != nil {
		return nil, fmt.Errorf("%s: read result: %w", c.name, err)
	}
	var res struct {
		Type    string `json:"type"`
		TaskID  string `json:"task_id"`
		Attempt int    `json:"attempt"`
		Status  string `json:"status"`
		Error   string `json:"error"`
	}
	if err := json.Unmarshal(rh, &res); err != nil || res.Type != "result" {
		return nil, fmt.Errorf("%s: malformed result header %.100q", c.name, rh)
	}
	if res.TaskID != "" && (res.TaskID != id || res.Attempt != 1) {
		return nil, fmt.Errorf("%s: result names task %q attempt %d, sent %q attempt 1", c.name, res.TaskID, res.Attempt, id)
	}
	if res.Status != "ok" {
		return nil, fmt.Errorf("%s: status %s: %s", c.name, res.Status, res.Error)
	}
	return body, nil
}

// readFrame reads one frame into the reused buffer.
func (c *Child) readFrame() (header, body []byte, err error) {
	var n [4]byte
	if _, err := io.ReadFull(c.r, n[:]); err != nil {
		return nil, nil, err
	}
	size := int(binary.BigEndian.Uint32(n[:]))
	if size > 64<<20 {
		return nil, nil, fmt.Errorf("frame of %d bytes", size)
	}
	if cap(c.buf) < size {
		c.buf = make([]byte, size)
	}
	buf := c.buf[:size]
	if _, err := io.ReadFull(c.r, buf); err != nil {
		return nil, nil, err
	}
	i := bytes.IndexByte(buf, '\n')
	if i < 0 {
		return nil, nil, errors.New("frame without a header line")
	}
	return buf[:i], buf[i+1:], nil
}

// Close closes the child's stdin (it should exit) and waits for it.
func (c *Child) Close() error {
	c.in.Close()
	return c.cmd.Wait()
}

// appendJSONString appends s (valid UTF-8) as a JSON string.
func appendJSONString(dst, s []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for _, b := range s {
		switch {
		case b == '"' || b == '\\':
			dst = append(dst, '\\', b)
		case b < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xf])
		default:
			dst = append(dst, b)
		}
	}
	return append(dst, '"')
}
