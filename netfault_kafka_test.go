package main

// The Kafka side of the network-fault harness: a kfake broker on the lab's
// broker host, svc workers on worker hosts, and the test's producer,
// sink reader and /readyz probes on the client host.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"svc/worker/sink"
	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

const (
	nfIn         = "in"
	nfOut        = "out"
	nfDLQ        = "in_dlq"
	nfPartitions = 6
	nfBrokerPort = 9092
	nfUIPort     = 8080 // on each worker host's own loopback
	// nfSession is the workers' group session timeout (session.timeout.ms):
	// the 45 s partition is well past it.
	nfSession = 10 * time.Second
)

// startBroker starts a one-broker kfake cluster listening on the lab's
// broker host, with the input, output and DLQ topics, closed when the
// test ends.
func (l *lab) startBroker() *kfake.Cluster {
	l.t.Helper()
	return l.startBrokerWith(nil)
}

// startBrokerWith is startBroker with every connection the broker accepts
// passed through wrap (nil: none).
func (l *lab) startBrokerWith(wrap func(net.Conn) net.Conn) *kfake.Cluster {
	l.t.Helper()
	b := l.host("broker")
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.Ports(nfBrokerPort),
		kfake.ListenFn(func(_, _ string) (net.Listener, error) {
			ln, err := b.listen(nfBrokerPort)
			if err != nil || wrap == nil {
				return ln, err
			}
			return wrapListener{ln, wrap}, nil
		}),
		kfake.SeedTopics(nfPartitions, nfIn, nfOut, nfDLQ),
	)
	if err != nil {
		l.t.Fatalf("kfake on the broker host: %v", err)
	}
	l.t.Cleanup(c.Close)
	return c
}

// wrapListener passes every accepted connection through wrap.
type wrapListener struct {
	net.Listener
	wrap func(net.Conn) net.Conn
}

func (w wrapListener) Accept() (net.Conn, error) {
	c, err := w.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return w.wrap(c), nil
}

// brokerAddr is the broker's bootstrap address on the lab network.
func (l *lab) brokerAddr() string {
	return net.JoinHostPort(l.host("broker").ip, fmt.Sprint(nfBrokerPort))
}

// kafkaClient is a Kafka client on the client host.
func (l *lab) kafkaClient(opts ...kgo.Opt) *kgo.Client {
	l.t.Helper()
	base := []kgo.Opt{
		kgo.SeedBrokers(l.brokerAddr()),
		kgo.Dialer(l.host("client").dial),
		kgo.MetadataMinAge(250 * time.Millisecond),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(cl.Close)
	return cl
}

// nfValue is the payload of message i; the executor's result is
// "out:" + it.
func nfValue(i int) string { return fmt.Sprintf("m-%05d", i) }

// produceBacklog writes n keyed messages to the input topic from the
// client host.
func (l *lab) produceBacklog(n int) {
	l.t.Helper()
	cl := l.kafkaClient(kgo.DefaultProduceTopic(nfIn))
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Key: []byte(fmt.Sprintf("k-%05d", i)), Value: []byte(nfValue(i))}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		l.t.Fatalf("produce the backlog: %v", err)
	}
}

// sinkReader reads the output topic from the client host, read_committed,
// counting each result value.
type sinkReader struct {
	cl *kgo.Client
	mu sync.Mutex
	n  map[string]int
	by map[string]int // results per delivering worker (header svc-worker)
	// seen is when the reader first polled each result value: the moment
	// a read_committed consumer on the client host sees it.
	seen map[string]time.Time
}

func (l *lab) readSink() *sinkReader {
	r := &sinkReader{n: map[string]int{}, by: map[string]int{}, seen: map[string]time.Time{}}
	r.cl = l.kafkaClient(
		kgo.ConsumeTopics(nfOut),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	l.t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := r.cl.PollFetches(ctx)
			now := time.Now()
			r.mu.Lock()
			fs.EachRecord(func(rec *kgo.Record) {
				if r.n[string(rec.Value)] == 0 {
					r.seen[string(rec.Value)] = now
				}
				r.n[string(rec.Value)]++
				for _, h := range rec.Headers {
					if h.Key == sink.HeaderWorker {
						r.by[string(h.Value)]++
					}
				}
			})
			r.mu.Unlock()
		}
	}()
	return r
}

// tally is what the reader has seen of n messages: distinct results,
// missing ones, and duplicates (records beyond the first of each).
func (r *sinkReader) tally(n int) (distinct, missing, dups int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := 0; i < n; i++ {
		c := r.n["out:"+nfValue(i)] + r.n[nfValue(i)] // spawn's echo, persistent's echo-go
		if c > 0 {
			distinct++
			dups += c - 1
		} else {
			missing++
		}
	}
	return distinct, missing, dups
}

// deliveredBy is how many results the worker named delivered.
func (r *sinkReader) deliveredBy(worker string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.by[worker]
}

// seenAt is when the reader first saw message i's result (zero: not yet).
func (r *sinkReader) seenAt(i int) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.seen["out:"+nfValue(i)]; ok {
		return t
	}
	return r.seen[nfValue(i)]
}

// holdTxnProduce makes the broker hold the next transactional produce
// request of txid for a second before handling it as usual: the returned
// channel is closed when one is held, so the test can cut the network
// while the coordinator has the transaction open (the broker's answer is
// then lost in the cut).
func holdTxnProduce(c *kfake.Cluster, txid string) <-chan struct{} {
	held := make(chan struct{})
	c.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		req := kr.(*kmsg.ProduceRequest)
		if req.TransactionID == nil || *req.TransactionID != txid {
			return nil, nil, false // kept for the next request
		}
		c.DropControl()
		close(held)
		c.SleepControl(func() { time.Sleep(time.Second) })
		return nil, nil, false
	})
	return held
}

// nfWorker is an svc process on a worker host.
type nfWorker struct {
	host *labHost
	proc *workertest.Proc
	name string
	ui   string // base URL of its UI, reachable from its own host
}

// nfWorkerOpts are what varies between the workers of the scenarios.
type nfWorkerOpts struct {
	delivery string        // sources.kafka.delivery
	session  time.Duration // session.timeout.ms; 0: the worker's default (45 s)
	// persistent runs testdata/executors/echo-go as a persistent executor
	// (results are the payloads) instead of the spawn echo script.
	persistent bool
	// fleet binds the UI to the host's address (not its loopback) with
	// nfToken, public_url its own address, and trusts the other hosts
	// named here (fleet.trusted_urls, and ui.allowed_ws_origins with its
	// own).
	fleet []*labHost
	// uiOnHost binds the UI to the host's address (implied by fleet).
	uiOnHost bool
	// cache turns the handler cache and its exchange on (pulls every
	// 500 ms, nfCacheTimeout per peer request); the executor writes the
	// cluster row "nf:" + payload for each message.
	cache bool
	// alignSeconds is sources.kafka.startup_align_seconds (0: the default,
	// 10 s: a worker joins its group at the next multiple of it).
	alignSeconds int
}

// nfCacheTimeout is fleet.cache_exchange.timeout of the workers with the
// cache: the bound on one pull from a peer that does not answer.
const nfCacheTimeout = 2 * time.Second

// nfCacheEcho is EchoBody writing a cluster cache row per message.
const nfCacheEcho = `IFS= read -r in
printf '{"cache":{"key":"nf:%s","value":"%s","scope":"cluster"}}\n' "$in" "$in" >&3
printf 'out:%s' "$in"`

// nfToken is the fleet's shared ui.auth_token.
const nfToken = "netfault-fleet-token-0123456789"

// uiURL is the UI's base URL on host h's address.
func uiURL(h *labHost) string { return fmt.Sprintf("http://%s:%d", h.ip, nfUIPort) }

// startWorker runs svc on host h with the Kafka source, a spawn executor
// answering "out:" + payload, and the lab's shared folder.
func (l *lab) startWorker(h *labHost, o nfWorkerOpts) *nfWorker {
	l.t.Helper()
	clientConfig := "{}"
	if o.session > 0 {
		clientConfig = fmt.Sprintf(`{ "session.timeout.ms" = "%d", "heartbeat.interval.ms" = "1000" }`, o.session.Milliseconds())
	}
	name := workertest.UniqueName("nf-" + h.name)
	storage := l.t.TempDir()
	exe, mode := workertest.EchoScript(l.t), "spawn"
	if o.persistent {
		exe, mode = filepath.Join(l.t.TempDir(), "echo-go"), "persistent"
		build := exec.Command("go", "build", "-o", exe, "./testdata/executors/echo-go")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			l.t.Fatalf("build the persistent executor: %v\n%s", err, out)
		}
	}
	extra, kafkaExtra := "", ""
	if o.alignSeconds > 0 {
		kafkaExtra = fmt.Sprintf("startup_align_seconds = %d", o.alignSeconds)
	}
	if o.cache {
		exe = workertest.Script(l.t, nfCacheEcho)
		extra = fmt.Sprintf("[cache]\nenabled = true\n[fleet.cache_exchange]\ninterval = \"500ms\"\ntimeout = %q\n", nfCacheTimeout.String())
	}
	ui, uiConfig := fmt.Sprintf("http://127.0.0.1:%d", nfUIPort), `host = "127.0.0.1"`
	if o.uiOnHost || o.fleet != nil {
		ui = uiURL(h)
		uiConfig = fmt.Sprintf("host = %q\nauth_token = %q\npublic_url = %q", h.ip, nfToken, ui)
	}
	if o.fleet != nil {
		var peers []string
		for _, p := range o.fleet {
			peers = append(peers, strconv.Quote(uiURL(p)))
		}
		// A Live page served by a peer opens /ws here with the peer's
		// origin: with a token, only origins listed here pass (its own
		// too).
		uiConfig += fmt.Sprintf("\nallowed_ws_origins = [%s]", strings.Join(append([]string{strconv.Quote(ui)}, peers...), ", "))
		uiConfig += fmt.Sprintf("\n[fleet]\ntrusted_urls = [%s]", strings.Join(peers, ", "))
	}
	cfg := workertest.WriteConfig(l.t, fmt.Sprintf(`
[worker]
name = %q
shutdown_timeout = "5s"
[metrics]
enabled = false
[ui]
port = %d
%s
[storage]
dir = %q
[shared]
dir = %q
[executor]
binary_path = %q
mode = %q
pool_size = 4
[sources.kafka]
enabled = true
brokers = [%q]
topic = %q
group = "nf"
delivery = %q
max_poll_records = 100
client_config = %s
%s
[[sinks.kafka]]
name = "out"
topic = %q
%s`, name, nfUIPort, uiConfig, storage, l.shared, exe, mode, l.brokerAddr(), nfIn, o.delivery, clientConfig, kafkaExtra, nfOut, extra))
	p := workertest.Start(l.t, "ip", h.command(svcBin, "run", "-config", cfg)[1:]...)
	if os.Getenv("SVC_NETFAULT_VERBOSE") != "" {
		p.Output.Tee(os.Stderr)
	}
	w := &nfWorker{host: h, proc: p, name: name, ui: ui}
	l.t.Cleanup(func() {
		if l.t.Failed() {
			l.t.Logf("worker %s (%s) log tail:\n%s", h.name, name, workertest.Tail(p.Output.String(), 60))
			_ = os.WriteFile(filepath.Join(os.TempDir(), name+".log"), []byte(p.Output.String()), 0o644)
		}
	})
	return w
}

// check fails the test at once when the worker has exited.
func (w *nfWorker) check(t *testing.T) {
	t.Helper()
	if syscall.Kill(w.proc.Cmd.Process.Pid, 0) == syscall.ESRCH {
		t.Fatalf("worker %s exited; output:\n%s", w.host.name, workertest.Tail(w.proc.Output.String(), 40))
	}
}

// ready asks the worker's /readyz from its own host: ok, and the reasons
// when not ready (or the error).
func (w *nfWorker) ready() (bool, string) {
	r, err := w.host.httpClient().Get(w.ui + "/readyz")
	if err != nil {
		return false, err.Error()
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	if r.StatusCode == http.StatusOK {
		return true, ""
	}
	var body struct {
		Reasons []string `json:"reasons"`
	}
	_ = json.Unmarshal(b, &body)
	if len(body.Reasons) == 0 {
		return false, fmt.Sprintf("%d %s", r.StatusCode, b)
	}
	return false, strings.Join(body.Reasons, "; ")
}

// waitReady waits until /readyz answers 200.
func (w *nfWorker) waitReady(t *testing.T, timeout time.Duration) {
	t.Helper()
	wait.For(t, timeout, w.host.name+" /readyz to be ready", w.ready)
}

// events lists the names of the worker's log events, in order, deduplicated
// when consecutive.
func (w *nfWorker) events(names ...string) []string {
	var out []string
	for _, line := range strings.Split(w.proc.Output.String(), "\n") {
		var m struct {
			Msg string `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		for _, n := range names {
			if m.Msg == n && (len(out) == 0 || out[len(out)-1] != n) {
				out = append(out, n)
			}
		}
	}
	return out
}
