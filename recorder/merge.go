package recorder

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// MergeResult describes a merge result file.
type MergeResult struct {
	Path      string `json:"path"` // merged/merged-<ts>-<token>.db, relative to shared.dir
	Events    int64  `json:"events"`
	SizeBytes int64  `json:"size_bytes"`
}

// Merge copies the events, task rows, labels, config snapshots and state
// timelines of the given files into a new merged/merged-<ts_ms>-<token>.db
// (0600; merged/ created 0700) with a .meta.json beside it. Paths are
// relative to shared.dir and must have the shape history/<cluster>/<name>.db
// or merged/<name>.db: anything else, archives (.db.gz) included, and an
// empty list give ErrBadShape; a path that does not resolve to a servable
// file (see ResolveDownload) gives ErrNotFound. Repeated paths are merged
// once.
func (r *Recorder) Merge(ctx context.Context, rels []string) (MergeResult, error) {
	var res MergeResult
	if len(rels) == 0 {
		return res, fmt.Errorf("merge: no paths: %w", ErrBadShape)
	}
	var segsList [][]string
	for _, rel := range rels {
		segs, sh, ok := parseShape(rel)
		if !ok || sh == shapeArchive {
			return res, fmt.Errorf("merge %q: %w", rel, ErrBadShape)
		}
		segsList = append(segsList, segs)
	}
	if r.sharedRoot == "" {
		return res, fmt.Errorf("merge: %w", ErrNoSharedDir)
	}
	seen := map[string]bool{}
	var srcs, names []string
	for i, rel := range rels {
		if seen[rel] {
			continue
		}
		seen[rel] = true
		abs, err := r.resolveExisting(segsList[i])
		if err != nil {
			return res, fmt.Errorf("merge %q: %w", rel, err)
		}
		srcs, names = append(srcs, abs), append(names, rel)
	}
	dir := filepath.Join(r.sharedRoot, "merged")
	if err := mkdirPrivate(dir); err != nil {
		return res, fmt.Errorf("merge: %w", err)
	}
	now := r.cfg.Now().UnixMilli()
	dst := filepath.Join(dir, fmt.Sprintf("merged-%d-%s.db", now, randToken(8)))
	tmp := tempName(dst)
	defer removeDB(tmp)
	meta, err := r.buildMerged(ctx, tmp, srcs, names)
	if err != nil {
		return res, fmt.Errorf("merge: %w", err)
	}
	if err := publish(tmp, dst, meta); err != nil {
		return res, fmt.Errorf("merge: %w", err)
	}
	fi, err := os.Stat(dst)
	if err != nil {
		return res, fmt.Errorf("merge: %w", err)
	}
	r.log.Info("recorder_merged", "path", relSlash(r.sharedRoot, dst), "sources", len(srcs), "events", meta.Events)
	return MergeResult{Path: relSlash(r.sharedRoot, dst), Events: meta.Events, SizeBytes: fi.Size()}, nil
}

// buildMerged fills the new file path from srcs and returns its meta.
func (r *Recorder) buildMerged(ctx context.Context, path string, srcs, names []string) (fileMeta, error) {
	meta := fileMeta{Kind: "merged", Worker: r.cfg.Worker, Cluster: r.cfg.Cluster, Format: FormatVersion, Sources: names}
	db, err := openBuildDB(ctx, path)
	if err != nil {
		return meta, err
	}
	defer db.Close()
	for i, src := range srcs {
		c, err := copyFrom(ctx, db, src, names[i])
		if err != nil {
			return meta, err
		}
		if c.fromMs > 0 && (meta.FromMs == 0 || c.fromMs < meta.FromMs) {
			meta.FromMs = c.fromMs
		}
		meta.ToMs = max(meta.ToMs, c.toMs)
	}
	if meta.Events, meta.Tasks, err = countRows(ctx, db); err != nil {
		return meta, fmt.Errorf("count rows: %w", err)
	}
	err = setMeta(ctx, db, "format", strconv.Itoa(FormatVersion), "kind", "merged", "worker", r.cfg.Worker,
		"cluster", r.cfg.Cluster, "from_ms", strconv.FormatInt(meta.FromMs, 10), "to_ms", strconv.FormatInt(meta.ToMs, 10))
	if err != nil {
		return meta, err
	}
	return meta, db.Close()
}
