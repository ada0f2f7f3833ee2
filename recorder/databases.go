package recorder

import (
	"cmp"
	"context"
	"errors"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// LivePathPrefix starts the Path of the live file in Databases
// ("live/<worker>"): a marker no download accepts (see SnapshotLive).
const LivePathPrefix = "live/"

// Database describes one recorder file for /api/v1/debug/databases.
type Database struct {
	Path      string `json:"path"` // relative to shared.dir, slash form; "live/<worker>" for the live file
	Kind      string `json:"kind"` // live, sealed, archive, merged
	Worker    string `json:"worker"`
	Cluster   string `json:"cluster"`
	FromMs    int64  `json:"from_ms"`
	ToMs      int64  `json:"to_ms"` // now for the live file; 0 when unknown
	SizeBytes int64  `json:"size_bytes"`
}

// fileMeta is the .meta.json beside every sealed file, archive and merge
// result (docs/storage-format.md, section 4).
type fileMeta struct {
	Kind          string   `json:"kind"`
	Worker        string   `json:"worker"`
	Cluster       string   `json:"cluster"`
	FromMs        int64    `json:"from_ms"`
	ToMs          int64    `json:"to_ms"`
	Events        int64    `json:"events"`
	Tasks         int64    `json:"tasks"`
	Format        int      `json:"format"`
	Sources       []string `json:"sources,omitempty"`
	InflatedBytes int64    `json:"inflated_bytes,omitempty"` // archives: size decompressed
}

// histFile is one file found in the shared folder.
type histFile struct {
	path    string   // absolute, for cache keys and messages; never opened by path
	segs    []string // rel split into segments, for openSharedFile
	rel     string   // relative to the shared root, slash form
	shape   shape
	size    int64
	modTime time.Time
	meta    fileMeta
	// window and part are an archive's window_start_ms and part number
	// from its name; part is -1 for other files.
	window int64
	part   int
}

// Databases lists the live file (unless memory-only), this cluster's sealed
// files and archives, and every merge result, newest first after the live
// file, and measures the shared folder again for History.
func (r *Recorder) Databases(ctx context.Context) ([]Database, error) {
	var out []Database
	r.liveMu.RLock()
	if lf := r.live; lf != nil {
		out = append(out, Database{Path: LivePathPrefix + r.cfg.Worker, Kind: "live", Worker: r.cfg.Worker,
			Cluster: r.cfg.Cluster, FromMs: lf.fromMs, ToMs: r.cfg.Now().UnixMilli(), SizeBytes: fileBytes(lf.path, lf.path+"-wal")})
	}
	r.liveMu.RUnlock()
	files, err := r.listShared(ctx, true, true)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		out = append(out, Database{Path: f.rel, Kind: f.meta.Kind, Worker: f.meta.Worker, Cluster: f.meta.Cluster,
			FromMs: f.meta.FromMs, ToMs: f.meta.ToMs, SizeBytes: f.size})
	}
	r.measure()
	return out, nil
}

// listShared returns this cluster's sealed files and archives and, when
// merged is set, the merge results; newest first. withMeta reads each
// .meta.json (else the name tells). A symlinked folder is left out with a
// warning.
func (r *Recorder) listShared(ctx context.Context, merged, withMeta bool) ([]histFile, error) {
	if r.sharedRoot == "" {
		return nil, nil
	}
	folders := [][]string{r.histSegs()}
	if merged {
		folders = append(folders, []string{"merged"})
	}
	var files []histFile
	for _, segs := range folders {
		got, err := r.listDir(segs, withMeta)
		if errors.Is(err, ErrUnsafePath) {
			r.warnEvery("recorder_unsafe_folder", path.Join(segs...), "folder", path.Join(segs...), "error", err)
			continue
		}
		if err != nil {
			return nil, err
		}
		files = append(files, got...)
	}
	for i := range files {
		if files[i].shape != shapeMerged && files[i].meta.Cluster == "" {
			files[i].meta.Cluster = r.cfg.Cluster
		}
	}
	slices.SortFunc(files, func(a, b histFile) int {
		return cmp.Or(cmp.Compare(b.meta.FromMs, a.meta.FromMs), strings.Compare(a.rel, b.rel))
	})
	return files, ctx.Err()
}

// archiveName is the name of part n of window ws: <cluster>-<ws>.db.gz for
// the first, <cluster>-<ws>-<n>.db.gz for the next ones.
func archiveName(cluster string, ws int64, n int) string {
	if n == 0 {
		return cluster + "-" + strconv.FormatInt(ws, 10) + ".db.gz"
	}
	return cluster + "-" + strconv.FormatInt(ws, 10) + "-" + strconv.Itoa(n) + ".db.gz"
}

// parseArchiveName reads the window start and part number of an archive
// name of cluster's folder (part n >= 1 without a leading zero).
func parseArchiveName(name, cluster string) (ws int64, part int, ok bool) {
	rest, ok := strings.CutPrefix(name, cluster+"-")
	if !ok {
		return 0, 0, false
	}
	if rest, ok = strings.CutSuffix(rest, ".db.gz"); !ok {
		return 0, 0, false
	}
	w, p, hasPart := strings.Cut(rest, "-")
	if !allDigits(w) || hasPart && (!allDigits(p) || p[0] == '0') {
		return 0, 0, false
	}
	ws, err := strconv.ParseInt(w, 10, 64)
	if err == nil && hasPart {
		part, err = strconv.Atoi(p)
	}
	return ws, part, err == nil
}

// metaFromName reads what a file name tells (docs/storage-format.md,
// section 2); cluster is the folder's, "" when unknown.
func metaFromName(name string, sh shape, cluster string) fileMeta {
	switch sh {
	case shapeSealed:
		m := fileMeta{Kind: "sealed"}
		parts := strings.Split(strings.TrimSuffix(name, ".db"), "-")
		if n := len(parts); n >= 3 && allDigits(parts[n-1]) && allDigits(parts[n-2]) {
			m.Worker = strings.Join(parts[:n-2], "-")
			m.FromMs, _ = strconv.ParseInt(parts[n-2], 10, 64)
			m.ToMs, _ = strconv.ParseInt(parts[n-1], 10, 64)
		}
		return m
	case shapeArchive:
		m := fileMeta{Kind: "archive"}
		if ws, _, ok := parseArchiveName(name, cluster); ok && cluster != "" {
			m.Cluster, m.FromMs = cluster, ws
			return m
		}
		base := strings.TrimSuffix(name, ".db.gz")
		if i := strings.LastIndexByte(base, '-'); i > 0 && allDigits(base[i+1:]) {
			m.Cluster = base[:i]
			m.FromMs, _ = strconv.ParseInt(base[i+1:], 10, 64)
		}
		return m
	default:
		m := fileMeta{Kind: "merged"}
		parts := strings.Split(strings.TrimSuffix(name, ".db"), "-")
		if len(parts) == 3 && parts[0] == "merged" && allDigits(parts[1]) {
			m.FromMs, _ = strconv.ParseInt(parts[1], 10, 64)
		}
		return m
	}
}
