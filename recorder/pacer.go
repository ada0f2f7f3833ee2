package recorder

import (
	"context"
	"io"
	"time"
)

// pacer keeps a long CPU-bound job (an archive pass) to a share of one
// core: rest sleeps as long as the work since the previous rest took,
// scaled by (1 - share) / share (wall time stands for CPU time). A nil
// pacer never rests.
type pacer struct {
	share float64
	since time.Time
}

func newPacer(share float64) *pacer { return &pacer{share: share, since: time.Now()} }

// rest sleeps for the work done since the last rest, or until ctx ends.
func (p *pacer) rest(ctx context.Context) {
	if p == nil || p.share >= 1 {
		return
	}
	d := time.Duration(float64(time.Since(p.since)) * (1 - p.share) / p.share)
	t := time.NewTimer(d)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	p.since = time.Now()
}

// paceChunk is how much a pacedReader reads between rests.
const paceChunk = 4 << 20

// pacedReader rests its pacer every paceChunk bytes read, and stops
// reading when ctx ends.
type pacedReader struct {
	r    io.Reader
	p    *pacer
	ctx  context.Context
	read int
}

func (r *pacedReader) Read(b []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := r.r.Read(b)
	if r.read += n; r.read >= paceChunk {
		r.read = 0
		r.p.rest(r.ctx)
	}
	return n, err
}
