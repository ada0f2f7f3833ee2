package recorder

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// maxMetaBytes bounds a .meta.json read from the shared folder (a merge
// result's sources list is the longest legitimate one).
const maxMetaBytes = 4 << 20

// histSegs is history/<cluster>, this worker's history folder.
func (r *Recorder) histSegs() []string { return []string{"history", r.cfg.Cluster} }

// openShared opens a folder below the shared root without following a
// symlink at any level (see dir); create makes missing folders 0700; guard
// refuses the worker's own storage.dir (ErrNotFound).
func (r *Recorder) openShared(create, guard bool, segs ...string) (*dir, error) {
	if r.sharedRoot == "" {
		return nil, ErrNoSharedDir
	}
	var avoid os.FileInfo
	if guard {
		avoid = r.ownDirInfo
	}
	return openDir(r.sharedRoot, segs, create, avoid)
}

// openSharedFile opens the file at segs below the shared root for reading
// (see dir.openFile).
func (r *Recorder) openSharedFile(segs []string, guard bool) (*os.File, os.FileInfo, error) {
	d, err := r.openShared(false, guard, segs[:len(segs)-1]...)
	if err != nil {
		return nil, nil, err
	}
	defer d.close()
	return d.openFile(segs[len(segs)-1])
}

// listDir lists one folder of the shared root (see listIn). A missing
// folder is empty; a symlinked one gives ErrUnsafePath.
func (r *Recorder) listDir(segs []string, withMeta bool) ([]histFile, error) {
	d, err := r.openShared(false, false, segs...)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	defer d.close()
	return listIn(d, segs, withMeta)
}

// listIn lists the files of d whose path matches a shape: regular, one
// link, not hidden. withMeta reads each .meta.json (else the name tells).
func listIn(d *dir, segs []string, withMeta bool) ([]histFile, error) {
	names, err := d.names()
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", d.rel, err)
	}
	var out []histFile
	for _, name := range names {
		rel := d.rel + "/" + name
		_, sh, ok := parseShape(rel)
		if !ok {
			continue
		}
		fi, err := d.stat(name)
		if err != nil || !safeRegular(fi) {
			continue
		}
		cluster := ""
		if len(segs) == 2 && segs[0] == "history" {
			cluster = segs[1]
		}
		f := histFile{path: filepath.Join(d.path, name), segs: append(append([]string(nil), segs...), name),
			rel: rel, shape: sh, size: fi.Size(), modTime: fi.ModTime(), meta: metaFromName(name, sh, cluster), part: -1}
		if sh == shapeArchive {
			if ws, part, ok := parseArchiveName(name, cluster); ok && cluster != "" {
				f.window, f.part = ws, part
			}
		}
		if withMeta {
			if data, err := d.readSmall(name+".meta.json", maxMetaBytes); err == nil {
				var m fileMeta
				if json.Unmarshal(data, &m) == nil {
					m.Kind = f.meta.Kind // the shape decides the kind
					f.meta = m
				}
			}
		}
		out = append(out, f)
	}
	return out, nil
}

// scratch returns a private folder (0700) for files built before they are
// published into the shared folder (SQLite writes them by path):
// storage.dir/recorder, or in memory-only mode a temp folder Close removes.
func (r *Recorder) scratch() (*dir, error) {
	r.scratchMu.Lock()
	defer r.scratchMu.Unlock()
	if r.scratchDir == "" {
		if r.liveDir != "" {
			r.scratchDir = r.liveDir
		} else {
			tmp, err := os.MkdirTemp("", ".svc-recorder-"+r.cfg.Worker+"-")
			if err != nil {
				return nil, fmt.Errorf("create scratch folder: %w", err)
			}
			r.scratchDir, r.scratchTemp = tmp, true
		}
	}
	d, err := openDir(r.scratchDir, nil, false, nil)
	if err != nil {
		return nil, err
	}
	d.rel = "scratch"
	return d, nil
}

func (r *Recorder) removeScratch() {
	r.scratchMu.Lock()
	defer r.scratchMu.Unlock()
	if r.scratchTemp {
		os.RemoveAll(r.scratchDir)
		r.scratchDir, r.scratchTemp = "", false
	}
}
