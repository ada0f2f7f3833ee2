package kafka

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"svc/worker/config"
	"svc/worker/workertest"
	"svc/worker/workertest/wait"

	"github.com/BurntSushi/toml"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ktChildEnv names the config file a re-executed test binary runs a
// worker from (see TestKafkaChildWorker).
const ktChildEnv = "SVC_TEST_CHILD_CONFIG"

// TestKafkaChildWorker is not a test of its own: it is the worker process
// of the crash test and of the RSS benchmark, which re-execute the test
// binary with ktChildEnv set. It runs the worker like main's serve until
// SIGTERM (clean stop) or SIGKILL.
func TestKafkaChildWorker(t *testing.T) {
	path := os.Getenv(ktChildEnv)
	if path == "" {
		t.Skip("runs only as the child process of TestKafkaCrashRestart and BenchmarkKafkaPipeline")
	}
	cfg, err := config.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	w := ktNew(t, cfg)
	w.Logs.Tee(os.Stderr)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := w.built.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// ktWriteConfig writes cfg as a TOML file that config.LoadFile reads back.
func ktWriteConfig(t testing.TB, cfg *config.Config) string {
	t.Helper()
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(cfg); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "svc.toml")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := config.LoadFile(path); err != nil {
		t.Fatalf("the child's config does not load: %v", err)
	}
	return path
}

// ktChildLog is a path for child workers' output, whose last lines are
// logged when the test fails.
func ktChildLog(t testing.TB) string {
	logPath := filepath.Join(t.TempDir(), "child.log")
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("child output:\n%s", workertest.Tail(string(b), 60))
		}
	})
	return logPath
}

// ktChild runs the worker of cfgPath in a child process; its output goes to
// logPath (appended), shown when the test fails.
func ktChild(t testing.TB, cfgPath, logPath string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKafkaChildWorker$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), ktChildEnv+"="+cfgPath)
	return ktStartChild(t, cmd, logPath)
}

// ktStartChild starts cmd with its output appended to logPath, killed
// when the test ends.
func ktStartChild(t testing.TB, cmd *exec.Cmd, logPath string) *exec.Cmd {
	t.Helper()
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}

// TestKafkaCrashRestart kills the worker process (SIGKILL) mid-stream,
// produces more while it is down, restarts it and checks that every input
// message ends up in the sink or the DLQ: duplicates are allowed (counted
// and logged), a loss fails.
func TestKafkaCrashRestart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("SIGKILL and restart of a child worker: long end-to-end test, skipped with -short")
	}
	c := ktCluster(t, 4)
	addrs := c.ListenAddrs()
	cfg := ktConfig(t, addrs, workertest.EchoScript(t))
	cfg.Executor.PoolSize = 4
	cfg.Worker.ShutdownTimeout = config.Duration(20 * time.Second)
	// A short session, so the killed member leaves the group soon.
	cfg.Sources.Kafka.ClientConfig["session.timeout.ms"] = "2000"
	cfg.Sources.Kafka.ClientConfig["heartbeat.interval.ms"] = "200"
	cfg.Resolve()
	cfgPath := ktWriteConfig(t, cfg)
	logPath := ktChildLog(t)
	group := cfg.Sources.Kafka.Group
	adm := ktAdmin(t, addrs)
	prod := ktClient(t, addrs)
	msgs := func(from, n int) []*kgo.Record {
		var out []*kgo.Record
		for i := from; i < from+n; i++ {
			out = append(out, ktMsg(i, fmt.Sprintf("k%d", i%11), i%50 == 7))
		}
		return out
	}

	ktProduce(t, prod, msgs(0, 1200))
	first := ktChild(t, cfgPath, logPath)
	wait.For(t, ktWait, "the first worker delivers part of the stream", func() (bool, string) {
		n := ktSum(ktEnds(t, adm, ktOut))
		return n >= 200, fmt.Sprintf("%d sink records", n)
	})
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	if done, total := ktSum(ktCommitted(t, adm, group)), ktSum(ktEnds(t, adm, ktIn)); done >= total {
		t.Fatalf("the worker had committed everything (%d of %d) before it was killed: nothing was crashed mid-stream", done, total)
	} else {
		t.Logf("killed with %d of %d offsets committed", done, total)
	}

	ktProduce(t, prod, msgs(1200, 300))
	second := ktChild(t, cfgPath, logPath)
	ktWaitCommitted(t, adm, group)
	if err := second.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := second.Wait(); err != nil {
		t.Errorf("restarted worker exited with %v after SIGTERM, want a clean exit", err)
	}

	out, dlq := ktCollect(t, addrs, addrs)
	ktCheckAllOut(t, ktIDs(0, 1500), out, dlq)
	for id := range 1500 {
		if failing := id%50 == 7; failing && out[id] > 0 || !failing && dlq[id] > 0 {
			t.Errorf("message %d (failing %v) is in the wrong topic: sink %d, DLQ %d", id, failing, out[id], dlq[id])
		}
	}
}
