package recorder

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

// SnapshotLive writes a consistent copy of the live file to w (VACUUM INTO
// a hidden 0600 temp file, streamed, deleted) while writes continue. It
// stops with ctx's error when ctx ends; memory-only mode gives
// ErrNoLiveFile.
func (r *Recorder) SnapshotLive(ctx context.Context, w io.Writer) error {
	if r.memory {
		return ErrNoLiveFile
	}
	tmp := filepath.Join(r.liveDir, ".snapshot-"+r.cfg.Worker+"-"+randToken(8)+".db.tmp")
	defer removeDB(tmp)
	// VACUUM INTO accepts an existing empty file and keeps its mode.
	if err := createPrivateFile(tmp); err != nil {
		return fmt.Errorf("snapshot live: %w", err)
	}
	live := false
	err := r.withLive(ctx, func(db *sqlite.Conn) error {
		live = true
		return sqlitex.ExecuteTransient(db, `VACUUM INTO ?`, &sqlitex.ExecOptions{Args: []any{tmp}})
	})
	if err != nil {
		return fmt.Errorf("snapshot live: %w", err)
	}
	if !live {
		return ErrNoLiveFile
	}
	f, err := os.Open(tmp)
	if err != nil {
		return fmt.Errorf("snapshot live: %w", err)
	}
	defer f.Close()
	// The client may stop reading: the copy ends with ctx, not with the file.
	if _, err := io.Copy(w, ctxReader{ctx, f}); err != nil {
		return fmt.Errorf("snapshot live: stream: %w", err)
	}
	return nil
}
