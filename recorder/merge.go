package recorder

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"

	"zombiezen.com/go/sqlite"
)

// MergeResult describes a merge result file.
type MergeResult struct {
	Path      string `json:"path"` // merged/merged-<ts>-<token>.db, relative to shared.dir
	Events    int64  `json:"events"`
	SizeBytes int64  `json:"size_bytes"`
}

// MaxMergePaths bounds the paths of one Merge call.
const MaxMergePaths = 4096

// Merge copies the rows of the given files (relative to shared.dir, of
// shape history/<cluster>/<name>.db or merged/<name>.db; repeats merged
// once) into a new merged/merged-<ts_ms>-<token>.db with its .meta.json.
// Other shapes, an empty list or more than MaxMergePaths give ErrBadShape;
// a path that is not servable (see ResolveDownload) gives ErrNotFound. The
// result is built privately and published through the open merged/ folder
// (a symlinked merged/ gives ErrUnsafePath).
func (r *Recorder) Merge(ctx context.Context, rels []string) (MergeResult, error) {
	var res MergeResult
	if len(rels) == 0 {
		return res, fmt.Errorf("merge: no paths: %w", ErrBadShape)
	}
	if len(rels) > MaxMergePaths {
		return res, fmt.Errorf("merge: %d paths, at most %d: %w", len(rels), MaxMergePaths, ErrBadShape)
	}
	for _, rel := range rels {
		if _, sh, ok := parseShape(rel); !ok || sh == shapeArchive {
			return res, fmt.Errorf("merge %q: %w", rel, ErrBadShape)
		}
	}
	if r.sharedRoot == "" {
		return res, fmt.Errorf("merge: %w", ErrNoSharedDir)
	}
	var names []string
	seen := map[string]bool{}
	for _, rel := range rels {
		if seen[rel] {
			continue
		}
		seen[rel] = true
		f, _, err := r.openServable(rel)
		if err != nil {
			return res, fmt.Errorf("merge %q: %w", rel, err)
		}
		f.Close()
		names = append(names, rel)
	}
	merged, err := r.openShared(true, false, "merged")
	if err != nil {
		return res, fmt.Errorf("merge: %w", err)
	}
	defer merged.close()
	scratch, err := r.scratch()
	if err != nil {
		return res, fmt.Errorf("merge: %w", err)
	}
	defer scratch.close()
	work := ".merge-" + r.cfg.Worker + "-" + randToken(8) + ".db.tmp"
	defer removeDB(filepath.Join(scratch.path, work))
	meta, err := r.buildMerged(ctx, filepath.Join(scratch.path, work), names)
	if err != nil {
		return res, fmt.Errorf("merge: %w", err)
	}
	name := fmt.Sprintf("merged-%d-%s.db", r.cfg.Now().UnixMilli(), randToken(8))
	tmp := tempBase(name)
	if err := moveAt(scratch, work, merged, tmp); err != nil {
		return res, fmt.Errorf("merge: %w", err)
	}
	if err := publishAt(merged, tmp, name, meta); err != nil {
		merged.remove(tmp)
		return res, fmt.Errorf("merge: %w", err)
	}
	fi, err := merged.stat(name)
	if err != nil {
		return res, fmt.Errorf("merge: %w", err)
	}
	rel := "merged/" + name
	r.log.Info("recorder_merged", "path", rel, "sources", len(names), "events", meta.Events)
	return MergeResult{Path: rel, Events: meta.Events, SizeBytes: fi.Size()}, nil
}

// buildMerged fills the new file path from the shared files rels, each
// opened again through the safe walk, and returns its meta.
func (r *Recorder) buildMerged(ctx context.Context, path string, rels []string) (fileMeta, error) {
	meta := fileMeta{Kind: "merged", Worker: r.cfg.Worker, Cluster: r.cfg.Cluster, Format: FormatVersion, Sources: rels}
	db, err := openBuildDB(ctx, path)
	if err != nil {
		return meta, err
	}
	defer db.Close()
	for _, rel := range rels {
		c, err := r.copyShared(db, rel)
		if err != nil {
			return meta, err
		}
		if c.fromMs > 0 && (meta.FromMs == 0 || c.fromMs < meta.FromMs) {
			meta.FromMs = c.fromMs
		}
		meta.ToMs = max(meta.ToMs, c.toMs)
	}
	if meta.Events, meta.Tasks, err = countRows(db); err != nil {
		return meta, fmt.Errorf("count rows: %w", err)
	}
	err = setMeta(db, "format", strconv.Itoa(FormatVersion), "kind", "merged", "worker", r.cfg.Worker,
		"cluster", r.cfg.Cluster, "from_ms", strconv.FormatInt(meta.FromMs, 10), "to_ms", strconv.FormatInt(meta.ToMs, 10))
	if err != nil {
		return meta, err
	}
	return meta, db.Close()
}

// copyShared copies the servable file rel into db (see copyFrom).
func (r *Recorder) copyShared(db *sqlite.Conn, rel string) (copied, error) {
	f, _, err := r.openServable(rel)
	if err != nil {
		return copied{}, fmt.Errorf("copy %q: %w", rel, err)
	}
	defer f.Close()
	uri, done, err := r.vfs.uri(f)
	if err != nil {
		return copied{}, err
	}
	defer done()
	return copyFrom(db, uri, rel)
}
