package recorder

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"svc/worker/event"
)

// TestFileModes checks the spec's modes (files 0600, folders 0700) with the
// umask at 0, so a mode that relied on the umask would show up, and checks
// that no file in either folder stores an absolute path.
func TestFileModes(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)

	clk := newClock()
	base := t.TempDir()
	dir := filepath.Join(base, "storage", "svc") // missing: Open creates it
	shared := filepath.Join(base, "shared")
	cfg := baseConfig(t, dir, shared, "w1", clk)
	cfg.ArchiveEnabled = true
	r := mustOpen(t, cfg)
	stop := startRun(t, r)
	r.Event(event.Event{Type: event.TypeTaskReceived, TaskID: "t"})
	r.Task(event.TaskRow{TaskID: "t", Status: "ok", Labels: map[string]string{"a": "b"}})
	waitWritten(t, r, 1, 1)

	livePath := r.live.path
	checkMode(t, dir, 0o700)
	checkMode(t, filepath.Join(dir, "recorder"), 0o700)
	checkMode(t, livePath, 0o600)
	checkMode(t, livePath+"-wal", 0o600)
	checkMode(t, filepath.Join(dir, "w1.watchdog"), 0o600)

	clk.add(time.Minute)
	seal(t, r)
	sealed, _ := filepath.Glob(filepath.Join(shared, "history", "c1", "w1-*.db"))
	if len(sealed) != 1 {
		t.Fatalf("sealed files = %v, want 1", sealed)
	}
	checkMode(t, filepath.Join(shared, "history"), 0o700)
	checkMode(t, filepath.Join(shared, "history", "c1"), 0o700)
	checkMode(t, sealed[0], 0o600)
	checkMode(t, sealed[0]+".meta.json", 0o600)
	res, err := r.Merge(t.Context(), []string{"history/c1/" + filepath.Base(sealed[0])})
	if err != nil {
		t.Fatalf("Merge() error = %v", err)
	}
	checkMode(t, filepath.Join(shared, "merged"), 0o700)
	checkMode(t, filepath.Join(shared, filepath.FromSlash(res.Path)), 0o600)
	checkMode(t, filepath.Join(shared, filepath.FromSlash(res.Path))+".meta.json", 0o600)

	clk.add(2 * time.Hour)
	if err := r.archivePass(t.Context()); err != nil {
		t.Fatalf("archivePass() error = %v", err)
	}
	archives, _ := filepath.Glob(filepath.Join(shared, "history", "c1", "c1-*.db.gz"))
	if len(archives) != 1 {
		t.Fatalf("archives = %v, want 1", archives)
	}
	checkMode(t, archives[0], 0o600)
	checkMode(t, archives[0]+".meta.json", 0o600)
	// A trace inflates the archive into the private cache.
	if _, err := r.Trace(t.Context(), "t"); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run() = %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "w1.watchdog")); !os.IsNotExist(err) {
		t.Errorf("watchdog file survives a clean shutdown: %v", err)
	}

	// Every file and folder, and no absolute path inside any file (the
	// archive is checked decompressed).
	for _, root := range []string{dir, shared} {
		filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			want := fs.FileMode(0o600)
			if d.IsDir() {
				want = 0o700
			}
			checkMode(t, path, want)
			if d.IsDir() {
				return nil
			}
			data, _ := os.ReadFile(path)
			if strings.HasSuffix(path, ".gz") {
				var buf bytes.Buffer
				f, _ := os.Open(path)
				_, err := inflateTo(t.Context(), &buf, f, MaxInflatedArchiveBytes)
				f.Close()
				if err != nil {
					t.Errorf("inflate %s: %v", path, err)
				}
				data = buf.Bytes()
			}
			if bytes.Contains(data, []byte(base)) {
				t.Errorf("%s contains the absolute path %s", path, base)
			}
			return nil
		})
	}
}

func checkMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	if got := mustStat(t, path).Mode().Perm(); got != want {
		t.Errorf("mode of %s = %o, want %o", path, got, want)
	}
}

// TestMoveAcrossFileSystems covers the copy fallback used when storage.dir
// and shared.dir are different mounts.
func TestMoveAcrossFileSystems(t *testing.T) {
	other, err := os.MkdirTemp("/dev/shm", "recorder-test-")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	defer os.RemoveAll(other)
	srcDir := t.TempDir()
	os.WriteFile(filepath.Join(srcDir, "a.db"), []byte("payload"), 0o644)
	var a, b syscall.Stat_t
	syscall.Stat(srcDir, &a)
	syscall.Stat(other, &b)
	if a.Dev == b.Dev {
		t.Skip("/dev/shm is on the same file system as the temp folder")
	}
	from, err := openDir(srcDir, nil, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer from.close()
	to, err := openDir(other, nil, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer to.close()
	if err := moveAt(from, "a.db", to, "b.db"); err != nil {
		t.Fatalf("moveAt() error = %v", err)
	}
	dst := filepath.Join(other, "b.db")
	if data, _ := os.ReadFile(dst); string(data) != "payload" {
		t.Errorf("moved content = %q", data)
	}
	checkMode(t, dst, 0o600)
	if _, err := os.Stat(filepath.Join(srcDir, "a.db")); !os.IsNotExist(err) {
		t.Errorf("source still exists after move")
	}
}
