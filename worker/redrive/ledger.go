package redrive

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// ErrBusy is a redrive call refused because another call of this worker
// is redriving the same DLQ partition (or all of them) right now.
var ErrBusy = errors.New("a redrive of this DLQ partition is already running on this worker")

// LedgerMax bounds the DLQ records a worker remembers as redriven: past
// it, the older half is forgotten (10 full calls' worth).
const LedgerMax = 100_000

// ledger remembers the DLQ records (partition, offset) this worker
// redrove, so that calling twice does not redrive twice: in
// <storage.dir>/redrive/<dlq topic>.log (0600 in a 0700 folder, one
// "partition offset" line per record), or in memory without storage.dir.
// Other workers of the fleet do not see it.
type ledger struct {
	mu    sync.Mutex
	seen  map[[2]int64]struct{}
	order [][2]int64
	path  string // "" in memory
	f     *os.File
}

// openLedger loads the ledger of topic under dir ("" for memory only).
func openLedger(dir, topic string) (*ledger, error) {
	l := &ledger{seen: map[[2]int64]struct{}{}}
	if dir == "" {
		return l, nil
	}
	d := filepath.Join(dir, "redrive")
	if err := os.MkdirAll(d, 0o700); err != nil {
		return nil, fmt.Errorf("redrive ledger: %w", err)
	}
	l.path = filepath.Join(d, topic+".log")
	if f, err := os.Open(l.path); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var at [2]int64
			if _, err := fmt.Sscanf(sc.Text(), "%d %d", &at[0], &at[1]); err == nil {
				l.add(at)
			}
		}
		f.Close()
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("redrive ledger: %w", err)
	}
	if err := l.rewrite(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *ledger) add(at [2]int64) {
	if _, ok := l.seen[at]; ok {
		return
	}
	l.seen[at] = struct{}{}
	l.order = append(l.order, at)
	if len(l.order) > LedgerMax {
		drop := l.order[:len(l.order)-LedgerMax/2]
		for _, d := range drop {
			delete(l.seen, d)
		}
		l.order = append([][2]int64(nil), l.order[len(drop):]...)
	}
}

// rewrite writes the ledger anew (at open and after forgetting) and keeps
// the file open for appends.
func (l *ledger) rewrite() error {
	if l.path == "" {
		return nil
	}
	var buf bytes.Buffer
	for _, at := range l.order {
		fmt.Fprintf(&buf, "%d %d\n", at[0], at[1])
	}
	tmp := l.path + ".tmp"
	err := os.WriteFile(tmp, buf.Bytes(), 0o600)
	if err == nil {
		err = os.Rename(tmp, l.path)
	}
	if err == nil {
		if l.f != nil {
			l.f.Close()
		}
		l.f, err = os.OpenFile(l.path, os.O_APPEND|os.O_WRONLY, 0o600)
	}
	if err != nil {
		return fmt.Errorf("redrive ledger: %w", err)
	}
	return nil
}

// has reports whether the record was redriven before.
func (l *ledger) has(at [2]int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.seen[at]
	return ok
}

// mark remembers a redriven record; a write failure is returned (the
// record was redriven all the same: the caller logs it).
func (l *ledger) mark(at [2]int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.order)
	l.add(at)
	if l.f == nil {
		return nil
	}
	if len(l.order) < n { // forgot the older half
		return l.rewrite()
	}
	_, err := fmt.Fprintf(l.f, "%d %d\n", at[0], at[1])
	return err
}

func (l *ledger) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
}

// locks lets one redrive call at a time work on a DLQ partition; a call
// without a partition (a time window over every partition) takes them all.
type locks struct {
	mu    sync.Mutex
	parts map[int32]bool
	all   bool
}

func (k *locks) acquire(p *int32) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.all || (p == nil && len(k.parts) > 0) || (p != nil && k.parts[*p]) {
		return false
	}
	if p == nil {
		k.all = true
	} else {
		if k.parts == nil {
			k.parts = map[int32]bool{}
		}
		k.parts[*p] = true
	}
	return true
}

func (k *locks) release(p *int32) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if p == nil {
		k.all = false
	} else {
		delete(k.parts, *p)
	}
}
