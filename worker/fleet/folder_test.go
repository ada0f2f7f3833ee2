package fleet

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"svc/worker/workertest/wait"
)

// Files that are not cards do not count toward the card bound: valid
// cards are found among thousands of junk files (scaled: 5,000 junk files
// against a bound of 64 cards; 800 under -short, still far over the bound,
// as each file costs ~0.7 ms to create on a loaded disk).
func TestJunkFilesDoNotHideCards(t *testing.T) {
	t.Parallel()
	n := 5000
	if testing.Short() {
		n = 800
	}
	root := t.TempDir()
	dir := filepath.Join(root, FolderName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	junk := func(from, to int) {
		for i := from; i < to; i++ {
			name := fmt.Sprintf("junk-%05d", i)
			if i%3 == 0 {
				name = fmt.Sprintf("_bad name %d.json", i) // .json, not a card name
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	junk(0, n/2) // cards in the middle of creation order, whatever order the folder lists
	var want []string
	for i := range 10 {
		name := fmt.Sprintf("c%02d", i)
		forge(t, root, forged(name, name, 1, time.Now().UnixMilli()))
		want = append(want, name+"=running")
	}
	junk(n/2, n)
	a := run(t, root, "a", func(c *Config) { c.limits.cards = 64 })
	waitStates(t, a.Registry, "a=running* "+strings.Join(want, " "))
}

// However many names the folder holds, one listing reads at most the scan
// bound of them, says it stopped there, and the registry logs that once.
func TestCardFolderListingIsBounded(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, FolderName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for i := range 1500 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("junk-%04d", i)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		forge(t, root, forged(fmt.Sprintf("c%d", i), "i", 1, time.Now().UnixMilli()))
		os.WriteFile(filepath.Join(dir, fmt.Sprintf(".c%d.json.tmp-%d", i, i)), nil, 0o600)
	}
	f, err := openFolder(root)
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	for _, c := range []struct {
		lim       limits
		n         int
		truncated bool
	}{
		{limits{cards: 100, scan: 10_000}, 10, false},
		{limits{cards: 100, scan: 1510}, 10, false}, // exactly every name
		{limits{cards: 3, scan: 10_000}, 6, true},   // 3 cards, 3 temp files
		{limits{cards: 100, scan: 1000}, -1, true},
	} {
		es, truncated, err := f.list(c.lim)
		if err != nil || truncated != c.truncated || (c.n >= 0 && len(es) != c.n) || len(es) > 10 {
			t.Errorf("list(%+v) = %d entries, truncated %v, %v; want %d, %v", c.lim, len(es), truncated, err, c.n, c.truncated)
		}
	}

	a := run(t, root, "a", func(c *Config) { c.limits = limits{cards: 100, scan: 500} })
	wait.For(t, wait.Long, "the truncation log", func() (bool, string) {
		return len(a.logs.Named("fleet_card_folder_truncated")) == 1, a.logs.String()
	})
	for range 3 {
		a.Workers()
	}
	time.Sleep(300 * time.Millisecond) // sweeps list the folder too
	if n := len(a.logs.Named("fleet_card_folder_truncated")); n != 1 || !strings.Contains(a.logs.String(), `"level":"WARN"`) {
		t.Errorf("%d truncation logs, want 1 WARN:\n%s", n, a.logs.String())
	}
}
