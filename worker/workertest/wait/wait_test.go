package wait

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fatalTB records For's failure instead of failing the real test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls For on a fatalTB in a goroutine of its own, as Fatalf ends
// the goroutine it is called from, and returns the failure message.
func run(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) string {
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		For(f, timeout, what, cond)
	}()
	<-done
	return f.msg
}

func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	calls := 0
	msg := run(t, Long, "the third call", func() (bool, string) {
		calls++
		return calls == 3, fmt.Sprintf("%d calls", calls)
	})
	if msg != "" || calls != 3 {
		t.Errorf("For = failure %q after %d calls, want success after 3", msg, calls)
	}
}

func TestForNamesWhatHowLongAndTheLastDetail(t *testing.T) {
	t.Parallel()
	calls := 0
	start := time.Now()
	msg := run(t, 100*time.Millisecond, "the answer", func() (bool, string) {
		calls++
		return false, fmt.Sprintf("saw %d", calls)
	})
	if took := time.Since(start); took < 100*time.Millisecond {
		t.Errorf("For gave up after %s, want at least the 100ms timeout", took)
	}
	for _, want := range []string{"gave up after 1", "waiting for the answer", fmt.Sprintf("last: saw %d", calls), fmt.Sprintf("(%d checks)", calls)} {
		if !strings.Contains(msg, want) {
			t.Errorf("For failure = %q, want it to contain %q", msg, want)
		}
	}
	// Backing off: a 100ms wait is a few dozen checks, not a busy loop.
	if calls < 3 || calls > 40 {
		t.Errorf("For checked %d times in 100ms, want between 3 and 40", calls)
	}
	if msg := run(t, time.Millisecond, "nothing", func() (bool, string) { return false, "" }); !strings.Contains(msg, "last: no detail") {
		t.Errorf("For failure without a detail = %q, want it to say so", msg)
	}
}
