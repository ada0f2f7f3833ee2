package main

import (
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// delayConn delays the bytes of a TCP connection each way, as a link with
// that much latency would, without limiting its bandwidth: what one side
// sends arrives delay ± jitter (uniform) later, in order (a chunk never
// overtakes the one before it). The broker's side of the worker's
// connections is wrapped in it (startBrokerWith): the kernel here has no
// sch_netem to add latency, and nftables cannot delay packets.
type delayConn struct {
	net.Conn
	delay, jitter time.Duration

	in      chan delayChunk // read from the peer, released when due
	pending []byte
	inErr   error

	outMu   sync.Mutex
	out     chan delayChunk // written by the broker, sent when due
	lastOut time.Time
	outErr  error
	done    chan struct{}
	close   sync.Once
}

type delayChunk struct {
	b   []byte
	due time.Time
	err error
}

// delayed wraps c with the given one-way delay and jitter.
func delayed(c net.Conn, delay, jitter time.Duration) net.Conn {
	d := &delayConn{Conn: c, delay: delay, jitter: jitter, in: make(chan delayChunk, 4096), out: make(chan delayChunk, 4096), done: make(chan struct{})}
	go d.reader()
	go d.writer()
	return d
}

// due is when bytes handed over now arrive, never before last.
func (d *delayConn) due(last time.Time) time.Time {
	j := time.Duration(0)
	if d.jitter > 0 {
		j = time.Duration(rand.Int64N(int64(2*d.jitter))) - d.jitter
	}
	return maxTime(time.Now().Add(d.delay+j), last)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// reader reads the peer's bytes as they come and queues them with the
// time they are due.
func (d *delayConn) reader() {
	var last time.Time
	for {
		b := make([]byte, 64<<10)
		n, err := d.Conn.Read(b)
		last = d.due(last)
		select {
		case d.in <- delayChunk{b: b[:n], due: last, err: err}:
		case <-d.done:
			return
		}
		if err != nil {
			return
		}
	}
}

func (d *delayConn) Read(p []byte) (int, error) {
	for len(d.pending) == 0 {
		if d.inErr != nil {
			return 0, d.inErr
		}
		var c delayChunk
		select {
		case c = <-d.in:
		case <-d.done:
			return 0, net.ErrClosed
		}
		time.Sleep(time.Until(c.due))
		d.pending, d.inErr = c.b, c.err
	}
	n := copy(p, d.pending)
	d.pending = d.pending[n:]
	return n, nil
}

// Write queues p to be sent when due; it fails only once the connection
// failed or closed.
func (d *delayConn) Write(p []byte) (int, error) {
	d.outMu.Lock()
	err := d.outErr
	d.lastOut = d.due(d.lastOut)
	c := delayChunk{b: append([]byte(nil), p...), due: d.lastOut}
	d.outMu.Unlock()
	if err != nil {
		return 0, err
	}
	select {
	case d.out <- c:
		return len(p), nil
	case <-d.done:
		return 0, net.ErrClosed
	}
}

func (d *delayConn) writer() {
	for {
		var c delayChunk
		select {
		case c = <-d.out:
		case <-d.done:
			return
		}
		time.Sleep(time.Until(c.due))
		if _, err := d.Conn.Write(c.b); err != nil {
			d.outMu.Lock()
			d.outErr = err
			d.outMu.Unlock()
			return
		}
	}
}

func (d *delayConn) Close() error {
	d.close.Do(func() { close(d.done) })
	return d.Conn.Close()
}
