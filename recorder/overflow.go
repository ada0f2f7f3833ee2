package recorder

import "context"

// Items that find the write queue full (a seal of a large live file, a slow
// disk) wait in an overflow list bounded in bytes; only past that bound are
// they dropped and counted. While the list holds anything new items join
// it, and the writer takes it only once the queue is empty, so items are
// written in ID order.

// overflowMaxBytes bounds the overflow list's memory (about 12 s of writer
// pause at 4k tasks/s).
const overflowMaxBytes = 32 << 20

// itemOverhead is an item's estimated in-memory size beside its variable fields.
const itemOverhead = 256

// overflow is the list behind a full queue, guarded by Recorder.inMu.
type overflow struct {
	items []item
	bytes int
}

// size estimates the memory it holds.
func (it item) size() int {
	n := itemOverhead
	if e := it.ev; e != nil {
		n += len(e.Type) + len(e.Kind) + len(e.TaskID) + len(e.Worker) + len(e.Payload) + mapSize(e.Labels)
	}
	if t := it.task; t != nil {
		n += len(t.TaskID) + len(t.Worker) + len(t.Source) + len(t.Alias) + len(t.Key) + len(t.Status) + len(t.Error) +
			mapSize(t.Labels) + mapSize(t.Env)
	}
	return n
}

func mapSize(m map[string]string) int {
	n := 0
	for k, v := range m {
		n += len(k) + len(v) + 32
	}
	return n
}

// enqueueLocked offers it to the writer: the queue, else the overflow
// list; false means it was dropped. r.inMu is held.
func (r *Recorder) enqueueLocked(it item) bool {
	if r.stopped {
		return false
	}
	if len(r.over.items) == 0 && len(r.queue) < r.cfg.BufferSize {
		r.queue = append(r.queue, it)
		r.queued.Store(int64(len(r.queue)))
		if len(r.queue) == 1 {
			r.wakeWriter()
		}
		return true
	}
	sz := it.size()
	if r.over.bytes+sz > overflowMaxBytes {
		return false
	}
	r.stats.overflowed.Add(1)
	r.over.items = append(r.over.items, it)
	r.over.bytes += sz
	r.overN.Store(int64(len(r.over.items)))
	return true
}

// takeOverflow hands the writer the overflow list once the queue is empty;
// nil when there is nothing to take.
func (r *Recorder) takeOverflow() []item {
	if r.overN.Load() == 0 || r.queued.Load() > 0 {
		return nil
	}
	r.inMu.Lock()
	defer r.inMu.Unlock()
	if len(r.queue) > 0 { // cannot grow while the list holds items; checked again all the same
		return nil
	}
	items := r.over.items
	r.over = overflow{}
	r.overN.Store(0)
	return items
}

// writeOverflow writes the overflow list, if the queue is empty, in
// batches of at most maxBatch.
func (r *Recorder) writeOverflow(ctx context.Context) {
	for items := r.takeOverflow(); len(items) > 0; items = r.takeOverflow() {
		// Taken items still count as queued until written (Stats.Queued).
		r.overWriting.Store(int64(len(items)))
		for len(items) > 0 {
			n := min(len(items), maxBatch)
			r.writeItems(ctx, items[:n])
			items = items[n:]
			r.overWriting.Store(int64(len(items)))
		}
	}
}
