package recorder

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"svc/worker/event"
)

// TestCorruptSealedFileQuarantined: one sealed file of random bytes among
// good ones. Traces skip it with one warning, not one per trace; the
// archive pass moves it (with its .meta.json) to history/c1/quarantine/,
// says so once (recorder_quarantined), and archives the window's good files
// in the same pass, without failing; later passes and traces are silent
// about it, and it is neither listed nor served.
func TestCorruptSealedFileQuarantined(t *testing.T) {
	t.Parallel()
	clk := newClock()
	shared := t.TempDir()
	c1 := filepath.Join(shared, "history", "c1")
	var froms []int64
	for i := range 4 {
		from := int64(t0 + i*1000)
		froms = append(froms, from)
		writeHist(t, shared, "sealed", 0, from, from+500, 1<<10)
	}
	bad := "w-" + strconv.FormatInt(froms[1], 10) + "-" + strconv.FormatInt(froms[1]+500, 10) + ".db"
	junk := make([]byte, mustStat(t, filepath.Join(c1, bad)).Size())
	rand.Read(junk)
	if err := os.WriteFile(filepath.Join(c1, bad), junk, 0o600); err != nil {
		t.Fatal(err)
	}
	clk.add(3 * time.Hour) // every file is older than archive.after
	logs := &logRecords{}
	cfg := baseConfig(t, "", shared, "holder", clk)
	cfg.ArchiveEnabled, cfg.Logger = true, slog.New(logs)
	r := mustOpen(t, cfg)

	for range 3 {
		traced(t, r, froms[1])
	}
	if n := len(logs.named("recorder_trace_file_failed")); n != 1 {
		t.Errorf("three traces logged recorder_trace_file_failed %d times, want once for the unchanged bad file", n)
	}
	if err := r.archivePass(t.Context()); err != nil {
		t.Fatalf("archivePass() = %v, want the good files archived without an error", err)
	}
	for _, from := range []int64{froms[0], froms[2], froms[3]} {
		if !traced(t, r, from) {
			t.Errorf("task t%d of a good file is not traced after the pass", from)
		}
	}
	if s := r.Stats(); s.ArchivedFiles != 3 || s.ArchiveErrors != 0 {
		t.Errorf("Stats() = %d files archived, %d archive errors; want the 3 good files, no error", s.ArchivedFiles, s.ArchiveErrors)
	}
	qdir := filepath.Join(c1, "quarantine")
	fi := mustStat(t, filepath.Join(qdir, bad))
	if fi.Mode().Perm() != 0o600 || mustStat(t, qdir).Mode().Perm() != 0o700 {
		t.Errorf("quarantine modes: file %v, folder %v; want 0600 and 0700", fi.Mode().Perm(), mustStat(t, qdir).Mode().Perm())
	}
	mustStat(t, filepath.Join(qdir, bad+".meta.json"))
	if fileExists(filepath.Join(c1, bad)) {
		t.Errorf("the bad file is still in the history folder")
	}
	q := logs.named("recorder_quarantined")
	if len(q) != 1 || q[0]["level"].String() != "WARN" || q[0]["file"].String() != "history/c1/quarantine/"+bad ||
		q[0]["reason"].String() == "" || q[0]["saved_rows"].Int64() != 0 {
		t.Fatalf("recorder_quarantined logged %v, want once (WARN) naming the quarantined file, the reason and 0 rows saved", q)
	}
	for range 2 {
		if err := r.archivePass(t.Context()); err != nil {
			t.Errorf("a later archivePass() = %v", err)
		}
		traced(t, r, froms[1])
	}
	if n, m := len(logs.named("recorder_quarantined")), len(logs.named("recorder_trace_file_failed")); n != 1 || m != 1 {
		t.Errorf("after more passes and traces: recorder_quarantined %d, recorder_trace_file_failed %d; want 1 and 1", n, m)
	}
	for _, d := range mustDatabases(t, r) {
		if filepath.Base(d.Path) == bad {
			t.Errorf("Databases() lists the quarantined file: %+v", d)
		}
	}
	if _, err := r.ResolveDownload("history/c1/quarantine/" + bad); !errors.Is(err, ErrNotFound) {
		t.Errorf("ResolveDownload(quarantined) error = %v, want ErrNotFound", err)
	}
}

// TestCrashedRunDamagedWALQuarantined: a worker process killed with
// SIGKILL after storing 2,000 task rows leaves its live file's rows in the
// write-ahead log; damaged frames there make SQLite replay only what comes
// before them (here: nothing, then about half). The next start copies the
// file and its log to recorder/quarantine/ before recovering what it can,
// and says so (recorder_quarantined: where, why, how many rows were saved
// and where they went) instead of deleting the file without a word. A
// directory where a live file should be, and a file that is not a
// database, are moved there too, instead of being skipped at every start.
func TestCrashedRunDamagedWALQuarantined(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		at   float64 // where the damaged frame is, as a share of the frames
	}{{"first frame", 0}, {"middle frame", 0.5}} {
		t.Run(tc.name, func(t *testing.T) {
			dir, shared := t.TempDir(), t.TempDir()
			cmd := startChild(t, "TestWALChild", "RECORDER_WAL_CHILD_DIR="+dir, "RECORDER_WAL_CHILD_SHARED="+shared)
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			lives, _ := filepath.Glob(filepath.Join(dir, "recorder", "walchild-*.db"))
			if len(lives) != 1 {
				t.Fatalf("live files left = %v, want one", lives)
			}
			wal := lives[0] + "-wal"
			data, err := os.ReadFile(wal)
			if err != nil {
				t.Fatal(err)
			}
			pageSize := int(binary.BigEndian.Uint32(data[8:12]))
			frames := (len(data) - 32) / (24 + pageSize)
			off := 32 + int(float64(frames)*tc.at)*(24+pageSize) + 24 + pageSize/2
			copy(data[off:], bytes.Repeat([]byte{0xA5}, 64))
			if err := os.WriteFile(wal, data, 0o600); err != nil {
				t.Fatal(err)
			}
			os.Mkdir(filepath.Join(dir, "recorder", "walchild-1.db"), 0o700) // not a file
			junk := make([]byte, 8192)
			rand.Read(junk)
			os.WriteFile(filepath.Join(dir, "recorder", "walchild-2.db"), junk, 0o600) // not a database

			logs := &logRecords{}
			clk := newClock()
			clk.ms.Store(time.Now().UnixMilli())
			cfg := baseConfig(t, dir, shared, "walchild", clk)
			cfg.Logger = slog.New(logs)
			r := mustOpen(t, cfg)
			q := logs.named("recorder_quarantined")
			if len(q) != 3 {
				t.Fatalf("recorder_quarantined logged %v, want the damaged live file, the folder and the junk file", q)
			}
			var saved int64
			var files []string
			for _, l := range q {
				t.Logf("recorder_quarantined %v", l)
				files = append(files, l["file"].String())
				if l["level"].String() != "WARN" || l["reason"].String() == "" {
					t.Errorf("recorder_quarantined = %v, want a WARN with a reason", l)
				}
				if l["file"].String() == "recorder/quarantine/"+filepath.Base(lives[0]) {
					saved = l["saved_rows"].Int64()
					if !strings.Contains(l["reason"].String(), "write-ahead log") {
						t.Errorf("reason %q does not name the write-ahead log", l["reason"])
					}
				}
			}
			want := []string{"recorder/quarantine/" + filepath.Base(lives[0]), "recorder/quarantine/walchild-1.db", "recorder/quarantine/walchild-2.db"}
			slices.Sort(files)
			slices.Sort(want)
			if !slices.Equal(files, want) {
				t.Errorf("quarantined %v, want %v", files, want)
			}
			qwal, err := os.ReadFile(filepath.Join(dir, "recorder", "quarantine", filepath.Base(wal)))
			if err != nil || !bytes.Equal(qwal, data) {
				t.Errorf("quarantined write-ahead log: %d bytes, %v; want the damaged log as it was (%d bytes)", len(qwal), err, len(data))
			}
			if fi := mustStat(t, filepath.Join(dir, "recorder", "quarantine")); fi.Mode().Perm() != 0o700 {
				t.Errorf("quarantine folder mode %v, want 0700", fi.Mode().Perm())
			}
			if fi := mustStat(t, filepath.Join(dir, "recorder", "quarantine", filepath.Base(wal))); fi.Mode().Perm() != 0o600 {
				t.Errorf("quarantined file mode %v, want 0600", fi.Mode().Perm())
			}
			// What SQLite could replay is in history, and the log says how much.
			var recovered int64
			sealed, _ := filepath.Glob(filepath.Join(shared, "history", "c1", "walchild-*.db"))
			for _, p := range sealed {
				db, err := openReadOnly(t.Context(), p)
				if err != nil {
					t.Fatal(err)
				}
				var n int64
				if err := scan(db, `SELECT count(*) FROM tasks`, []any{&n}); err != nil {
					t.Fatal(err)
				}
				db.Close()
				recovered += n
			}
			if recovered != saved || (tc.at > 0) != (saved > 0) || saved >= 2000 {
				t.Errorf("saved_rows %d, %d task rows sealed; want them equal, some only when the damage is past the first frame", saved, recovered)
			}
			_ = r
		})
	}
}

// TestWALChild is the worker process of TestCrashedRunDamagedWALQuarantined:
// it stores 2,000 task rows, prints CHILD_READY and waits to be killed.
func TestWALChild(t *testing.T) {
	dir := os.Getenv("RECORDER_WAL_CHILD_DIR")
	if dir == "" {
		t.Skip("helper process for TestCrashedRunDamagedWALQuarantined")
	}
	cfg := Config{Dir: dir, SharedDir: os.Getenv("RECORDER_WAL_CHILD_SHARED"), Worker: "walchild", Cluster: "c1"}
	r, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	go r.Run(context.Background())
	for i := range 2000 {
		r.Task(event.TaskRow{TaskID: "task-" + strconv.Itoa(i), Source: "kafka", Status: "failed", Attempts: 1, Error: "boom"})
		if i%100 == 99 {
			waitWritten(t, r, 0, uint64(i+1)) // many transactions, many commits
		}
	}
	fmt.Println("CHILD_READY")
	time.Sleep(time.Minute) // killed long before
}
