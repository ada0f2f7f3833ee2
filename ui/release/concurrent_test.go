package release

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/ui"
)

// TestFetchChildProcess is the child half of TestConcurrentFetchFromTwo
// Processes: it fetches one release and prints the directory.
func TestFetchChildProcess(t *testing.T) {
	if os.Getenv("SVC_UI_FETCH_CHILD") != "1" {
		t.Skip("run by TestConcurrentFetchFromTwoProcesses")
	}
	dir, err := Fetch(context.Background(), FetchOptions{
		Repo: os.Getenv("SVC_UI_REPO"), Tag: ui.EmbeddedTag, CacheDir: os.Getenv("SVC_UI_CACHE"),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "fetch:", err)
		os.Exit(3)
	}
	fmt.Println("DIR=" + dir)
}

// Two processes fetch the same tag into one cache at the same moment: the
// mirror holds both downloads until both have started, so both unpack and
// race to publish. One wins, the other reuses its copy, nothing is corrupt.
func TestConcurrentFetchFromTwoProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two child processes")
	}
	t.Parallel()
	m := newMirror(t)
	m.release(ui.EmbeddedTag, packedEmbedded(t))
	archivePath := "/releases/" + ui.EmbeddedTag + "/" + ArchiveName(ui.EmbeddedTag)
	var mu sync.Mutex
	arrived := 0
	both := make(chan struct{})
	m.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != archivePath {
			return false
		}
		mu.Lock()
		arrived++
		if arrived == 2 {
			close(both)
		}
		mu.Unlock()
		select {
		case <-both:
		case <-time.After(30 * time.Second): // a stuck child must not hang the test
		}
		return false
	})

	cache := filepath.Join(t.TempDir(), "shared-cache")
	children := make([]*exec.Cmd, 2)
	outs := make([]*bytes.Buffer, 2)
	for i := range children {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestFetchChildProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), "SVC_UI_FETCH_CHILD=1", "SVC_UI_REPO="+m.repo(), "SVC_UI_CACHE="+cache)
		outs[i] = &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = outs[i], outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		children[i] = cmd
	}
	dirs := make([]string, 2)
	for i, cmd := range children {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, outs[i])
		}
		for _, line := range strings.Split(outs[i].String(), "\n") {
			if d, ok := strings.CutPrefix(line, "DIR="); ok {
				dirs[i] = d
			}
		}
	}
	want := filepath.Join(cache, ui.EmbeddedTag)
	if dirs[0] != want || dirs[1] != want {
		t.Fatalf("children fetched into %q and %q, want both %q", dirs[0], dirs[1], want)
	}
	if n := m.hitCount(archivePath); n != 2 {
		t.Errorf("archive downloaded %d times, want 2 (both children raced)", n)
	}
	assertSameTree(t, ui.Embedded(), want, ui.EmbeddedTag)
	entries, _ := os.ReadDir(cache)
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("cache holds %v, want only %s (no temporary leftovers)", names, ui.EmbeddedTag)
	}
}

// The same race inside one process, many times over, for -race.
func TestConcurrentStageEmbedded(t *testing.T) {
	t.Parallel()
	cache := t.TempDir()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			dir, err := StageEmbedded(cache)
			if err == nil && dir != filepath.Join(cache, ui.EmbeddedTag) {
				err = fmt.Errorf("staged into %s", dir)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("StageEmbedded: %v", err)
		}
	}
	assertSameTree(t, ui.Embedded(), filepath.Join(cache, ui.EmbeddedTag), ui.EmbeddedTag)
	if entries, _ := os.ReadDir(cache); len(entries) != 1 {
		t.Errorf("cache holds %d entries, want 1", len(entries))
	}
}

// A publisher that finds the tag published while it unpacked keeps the
// winner's copy and removes its own.
func TestInstallLosingTheRaceReusesTheWinner(t *testing.T) {
	t.Parallel()
	cache := t.TempDir()
	var archive bytes.Buffer
	if err := writeArchive(&archive, ui.Embedded(), ui.EmbeddedTag); err != nil {
		t.Fatal(err)
	}
	var winner string
	dir, err := install(cache, ui.EmbeddedTag, func(tmp string) error {
		var err error
		if winner, err = StageEmbedded(cache); err != nil {
			return err
		}
		os.WriteFile(filepath.Join(winner, "assets", "winner"), nil, 0o600)
		return unpackArchive(&archive, tmp)
	})
	if err != nil || dir != winner {
		t.Fatalf("install after losing = %s, %v; want the winner %s", dir, err, winner)
	}
	if _, err := os.Stat(filepath.Join(dir, "assets", "winner")); err != nil {
		t.Errorf("the winner's copy was replaced")
	}
	if entries, _ := os.ReadDir(cache); len(entries) != 1 {
		t.Errorf("cache holds %d entries, want only the tag (the loser's copy removed)", len(entries))
	}
}
