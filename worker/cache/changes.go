package cache

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Bounds of one page of the peer route. PageBytes of keys and values cut
// a page (after its first row); encoded, base64 included, it stays well
// under MaxPageBody, the most a puller reads of one answer.
const (
	DefaultPageRows = 500
	MaxPageRows     = 1000
	PageBytes       = 2 << 20
	MaxPageBody     = 8 << 20
	MaxCursorBytes  = 64
)

// ErrBadCursor: a since= cursor that is not one this route hands out.
var ErrBadCursor = errors.New("cursor must be empty or <epoch>-<ts_ms> as returned in next")

// cursor is a position in this worker's own changes: the file's epoch and
// the timestamp of the last row served ("<epoch>-<ts_ms>", opaque to pullers).
type cursor struct {
	epoch string
	ts    int64
}

func (c cursor) String() string { return c.epoch + "-" + strconv.FormatInt(c.ts, 10) }

// parseCursor reads a since= value; "" is the start.
func parseCursor(s string) (cursor, error) {
	if s == "" {
		return cursor{}, nil
	}
	if len(s) > MaxCursorBytes {
		return cursor{}, ErrBadCursor
	}
	e, t, ok := strings.Cut(s, "-")
	ts, err := strconv.ParseInt(t, 10, 64)
	if !ok || !epochPattern.MatchString(e) || err != nil || ts < 0 || t != strconv.FormatInt(ts, 10) {
		return cursor{}, ErrBadCursor
	}
	return cursor{epoch: e, ts: ts}, nil
}

// Page is one answer of the peer route.
type Page struct {
	Rows []Row
	Next string // the cursor to pass as since= next time
	More bool   // the page was cut: ask again at once
}

// Changes returns the cluster and global rows this worker originated in
// scopes after since, oldest first, at most limit rows and about
// PageBytes. A cursor of an earlier cache file starts from the beginning.
func (s *Store) Changes(ctx context.Context, scopes []string, since string, limit int) (Page, error) {
	c, err := parseCursor(since)
	if err != nil {
		return Page{}, err
	}
	if c.epoch != s.epoch {
		c = cursor{epoch: s.epoch}
	}
	want := [2]string{"-", "-"} // cluster, global; "-" matches no row
	for _, sc := range scopes {
		switch sc {
		case ScopeCluster:
			want[0] = sc
		case ScopeGlobal:
			want[1] = sc
		default:
			return Page{}, fmt.Errorf("scope %q: %w", sc, errServedScope)
		}
	}
	limit = min(max(limit, 1), MaxPageRows)
	rs, err := s.db.QueryContext(ctx, `SELECT scope, key, value, ts_ms FROM rows
		WHERE origin = ? AND ts_ms > ? AND scope IN (?, ?) ORDER BY ts_ms LIMIT ?`,
		s.cfg.Worker, c.ts, want[0], want[1], limit+1)
	if err != nil {
		return Page{}, fmt.Errorf("read cache changes: %w", err)
	}
	defer rs.Close()
	p := Page{Rows: []Row{}}
	var bytes int64
	for rs.Next() {
		r := Row{Origin: s.cfg.Worker}
		if err := rs.Scan(&r.Scope, &r.Key, &r.Value, &r.TSms); err != nil {
			return Page{}, fmt.Errorf("read cache changes: %w", err)
		}
		if len(p.Rows) == limit || (len(p.Rows) > 0 && bytes+r.size() > PageBytes) {
			p.More = true
			break
		}
		p.Rows = append(p.Rows, r)
		bytes += r.size()
		c.ts = r.TSms
	}
	if err := rs.Err(); err != nil {
		return Page{}, fmt.Errorf("read cache changes: %w", err)
	}
	p.Next = c.String()
	return p, nil
}

// errServedScope: the peer route serves cluster and global rows only.
var errServedScope = errors.New("only cluster and global rows are served to peers")

// IsBadRequest reports errors of Changes caused by the request.
func IsBadRequest(err error) bool {
	return errors.Is(err, ErrBadCursor) || errors.Is(err, errServedScope)
}

// Applied counts what a batch of peer rows did.
type Applied struct {
	Stored, Superseded, Full int
}

// Apply merges rows pulled from a peer by last write wins, in one
// transaction. The caller checked origin and scope; a row over the
// store's bounds is skipped and counted.
func (s *Store) Apply(ctx context.Context, rows []Row) (Applied, error) {
	var a Applied
	s.mu.Lock()
	defer s.mu.Unlock()
	rowsN, bytesN := s.rows.Load(), s.bytes.Load()
	err := s.tx(ctx, func(tx *sql.Tx) error {
		for i := range rows {
			r := &rows[i]
			if err := CheckRow(r.Scope, r.Key, r.Value); err != nil || r.Origin == "" {
				return fmt.Errorf("apply cache row: %w", ErrBadKey)
			}
			held, ok, err := getRow(ctx, tx, r.Scope, r.Key)
			if err != nil {
				return err
			}
			if ok && !r.wins(held.TSms, held.Origin) {
				a.Superseded++
				continue
			}
			addRows, addBytes, fit := s.fits(r, held, ok, rowsN, bytesN)
			if !fit {
				a.Full++
				continue
			}
			if err := upsert(ctx, tx, r); err != nil {
				return err
			}
			rowsN, bytesN = rowsN+addRows, bytesN+addBytes
			a.Stored++
		}
		return nil
	})
	if err != nil {
		s.metrics.writes.WithLabelValues(sourcePeer, "error").Add(float64(len(rows)))
		return Applied{}, err
	}
	// Writes hold mu: nothing else moved the counters.
	s.rows.Store(rowsN)
	s.bytes.Store(bytesN)
	if a.Stored > 0 {
		s.version.Add(1)
	}
	s.metrics.writes.WithLabelValues(sourcePeer, "stored").Add(float64(a.Stored))
	s.metrics.writes.WithLabelValues(sourcePeer, "superseded").Add(float64(a.Superseded))
	s.metrics.writes.WithLabelValues(sourcePeer, "refused_full").Add(float64(a.Full))
	return a, nil
}

// ListOptions filter the debug listing.
type ListOptions struct {
	Scope  string // "" for every scope
	Prefix string // keys starting with it
	Limit  int    // 1-MaxPageRows
}

// List returns rows newest first, for operators.
func (s *Store) List(ctx context.Context, o ListOptions) ([]Row, error) {
	q := `SELECT scope, key, value, ts_ms, origin FROM rows WHERE substr(key, 1, ?) = ?`
	args := []any{len([]rune(o.Prefix)), o.Prefix}
	if o.Scope != "" {
		q += ` AND scope = ?`
		args = append(args, o.Scope)
	}
	q += ` ORDER BY ts_ms DESC, scope, key LIMIT ?`
	args = append(args, min(max(o.Limit, 1), MaxPageRows))
	rs, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list cache: %w", err)
	}
	defer rs.Close()
	out := []Row{}
	for rs.Next() {
		var r Row
		if err := rs.Scan(&r.Scope, &r.Key, &r.Value, &r.TSms, &r.Origin); err != nil {
			return nil, fmt.Errorf("list cache: %w", err)
		}
		out = append(out, r)
	}
	return out, rs.Err()
}
