package httpd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"svc/worker"
	"svc/worker/config"
	"svc/worker/model"
)

type ingressClient struct {
	name  string
	token tokenCheck
	limit *slidingWindow
}

// Ingress is the HTTP ingress server: POST /v1/process.
type Ingress struct {
	surface
	app      *worker.App
	clients  []ingressClient
	maxBody  int64
	maxConc  int64
	inFlight atomic.Int64
	metrics  *ingressMetrics
	now      func() time.Time
	grace    time.Duration // worker.shutdown_timeout: requests in flight finish within it
	perConn  clientSlots   // requests in progress per client, body reading included
	bodyTime time.Duration // sources.http.body_timeout
}

// NewIngress builds the ingress server from sources.http.
func NewIngress(cfg *config.Config, app *worker.App, reg prometheus.Registerer, log *slog.Logger) *Ingress {
	hc := cfg.Sources.HTTP
	in := &Ingress{
		app: app, maxBody: hc.MaxBodyBytes, maxConc: int64(hc.MaxConcurrent),
		metrics: newIngressMetrics(reg), now: time.Now, grace: cfg.Worker.ShutdownTimeout.D(),
		perConn: clientSlots{max: hc.MaxConcurrentPerClient}, bodyTime: hc.BodyTimeout.D(),
	}
	for _, c := range hc.Clients {
		in.clients = append(in.clients, ingressClient{
			name: c.Name, token: newTokenCheck(c.Token), limit: newSlidingWindow(c.RPM, time.Minute),
		})
	}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/process", guardBrowsers(http.HandlerFunc(in.process)))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "the ingress serves POST /v1/process only")
	})
	// A request may wait for every attempt of its task plus backoff.
	work := time.Duration(cfg.Handler.MaxAttempts)*(cfg.Executor.Timeout.D()+10*time.Second) + 30*time.Second
	in.surface = surface{
		name: "ingress", log: log,
		srv: &http.Server{
			Addr: hostPort(hc.Host, hc.Port), Handler: recoverPanics(log, guardHost(newHostRule(hc.Host, "", hc.AllowedHosts, "sources.http.allowed_hosts"), mux)),
			ReadHeaderTimeout: ingressHeaderTimeout, ReadTimeout: 60 * time.Second,
			WriteTimeout: work, IdleTimeout: uiIdleTimeout, MaxHeaderBytes: uiMaxHeaderBytes,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		},
	}
	if len(in.clients) == 0 {
		log.Warn("http_ingress_unauthenticated", "bind", in.srv.Addr,
			"hint", "add [[sources.http.clients]] entries with name, token and rpm to require bearer tokens")
	}
	return in
}

// Run serves until ctx ends, then closes the listener and lets the
// requests in flight finish within worker.shutdown_timeout.
func (in *Ingress) Run(ctx context.Context) error { return in.serve(ctx, in.grace) }

// authenticate returns the client presenting the request's token; every
// client's hash is compared, so timing does not tell which one matched.
func (in *Ingress) authenticate(r *http.Request) (*ingressClient, bool) {
	if len(in.clients) == 0 {
		return nil, true
	}
	tok := bearer(r)
	if strings.TrimSpace(tok) == "" {
		return nil, false
	}
	h := hashToken(tok)
	var found *ingressClient
	for i := range in.clients {
		if in.clients[i].token.equal(h) {
			found = &in.clients[i]
		}
	}
	return found, found != nil
}

// reject answers a request refused before the pipeline and closes the
// connection, which the server would otherwise keep reading the unread
// body of (perhaps a byte at a time) before answering.
func (in *Ingress) reject(w http.ResponseWriter, client string, status int, reason, code, detail string) {
	w.Header().Set("Connection", "close")
	in.metrics.rejections.WithLabelValues(reason).Inc()
	in.metrics.requests.WithLabelValues(client, strconv.Itoa(status)).Inc()
	writeError(w, status, code, detail)
}

// process runs one request. The client is known and within its rate and
// concurrency cap before its body is read, and the body is read under its
// own deadline before the request takes a max_concurrent slot, so slow
// bodies cannot hold the pipeline from other clients.
func (in *Ingress) process(w http.ResponseWriter, r *http.Request) {
	client, ok := in.authenticate(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="svc-ingress"`)
		in.reject(w, "unknown", http.StatusUnauthorized, "unauthorized", "unauthorized", "missing or unknown client token: send Authorization: Bearer <token>")
		return
	}
	name, slot := "anonymous", remoteHost(r)
	if client != nil {
		name, slot = client.name, "client:"+client.name
		if ok, wait := client.limit.allow(in.now()); !ok {
			secs := int(math.Ceil(wait.Seconds()))
			w.Header().Set("Retry-After", strconv.Itoa(max(1, secs)))
			in.reject(w, name, http.StatusTooManyRequests, "rate_limited", "rate_limited",
				fmt.Sprintf("client %q is over its limit of %d requests per minute; retry in %ds", name, cap(client.limit.ring), max(1, secs)))
			return
		}
	}
	if !in.perConn.acquire(slot) {
		w.Header().Set("Retry-After", "1")
		in.reject(w, name, http.StatusTooManyRequests, "client_concurrency", "too_many_requests",
			fmt.Sprintf("this client already has %d requests in progress (sources.http.max_concurrent_per_client); retry when one finished", in.perConn.max))
		return
	}
	defer in.perConn.release(slot)
	if in.app.Closing() {
		in.reject(w, name, http.StatusServiceUnavailable, "draining", "draining", "the worker is shutting down")
		return
	}
	if in.app.ExecutorHealth().State == model.ExecutorUnavailable { // answered at once, not held
		w.Header().Set("Retry-After", executorRetryAfter)
		in.reject(w, name, http.StatusServiceUnavailable, "executor_unavailable", "executor_unavailable", executorUnavailableDetail)
		return
	}
	if r.ContentLength > in.maxBody {
		in.reject(w, name, http.StatusRequestEntityTooLarge, "too_large", "body_too_large",
			fmt.Sprintf("request body is %d bytes; sources.http.max_body_bytes is %d", r.ContentLength, in.maxBody))
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(in.now().Add(in.bodyTime))
	body, err := readBody(http.MaxBytesReader(w, r.Body, in.maxBody), r.ContentLength)
	_ = rc.SetReadDeadline(time.Time{})
	if err != nil {
		switch {
		case errors.As(err, new(*http.MaxBytesError)):
			in.reject(w, name, http.StatusRequestEntityTooLarge, "too_large", "body_too_large",
				fmt.Sprintf("request body exceeds sources.http.max_body_bytes (%d)", in.maxBody))
		case isTimeout(err):
			in.reject(w, name, http.StatusRequestTimeout, "body_timeout", "body_timeout",
				fmt.Sprintf("the request body did not arrive within sources.http.body_timeout (%s)", in.bodyTime))
		default:
			in.reject(w, name, http.StatusBadRequest, "bad_request", "bad_request", "reading the body: "+err.Error())
		}
		return
	}
	if n := in.inFlight.Add(1); n > in.maxConc {
		in.inFlight.Add(-1)
		w.Header().Set("Retry-After", "1")
		in.reject(w, name, http.StatusServiceUnavailable, "overloaded", "overloaded",
			fmt.Sprintf("%d requests are in flight (sources.http.max_concurrent); retry shortly", in.maxConc))
		return
	}
	defer in.inFlight.Add(-1)
	in.metrics.inFlight.Inc()
	defer in.metrics.inFlight.Dec()
	start := time.Now()
	// The request's own header map, not a copy: net/http does not change it
	// once the handler runs.
	req := &model.HTTPRequest{ID: in.app.IDs().Next(), Body: body, Header: r.Header, Labels: labelHeaders(r.Header)}
	if client != nil {
		req.Client = client.name
	}
	if k := r.Header.Get("X-Svc-Key"); k != "" {
		req.Key = []byte(k)
	}
	resp, err := in.app.HandleHTTP(r.Context(), req)
	in.metrics.duration.Observe(time.Since(start).Seconds())
	if err != nil {
		status, code, detail := http.StatusInternalServerError, "handler_error", err.Error()
		switch {
		case errors.Is(err, context.Canceled):
			status, code = 499, "client_closed"
		case errors.Is(err, model.ErrExecutorUnavailable): // while the request waited: nothing ran
			w.Header().Set("Retry-After", executorRetryAfter)
			status, code, detail = http.StatusServiceUnavailable, "executor_unavailable", executorUnavailableDetail
		case errors.Is(err, model.ErrDeliveryStalled): // nothing kept the failed message
			w.Header().Set("Retry-After", "5")
			status, code, detail = http.StatusServiceUnavailable, "dlq_unavailable",
				"the task failed and the message could not be written to the DLQ within dlq.send_timeout; retry the request"
		}
		in.metrics.requests.WithLabelValues(name, strconv.Itoa(status)).Inc()
		writeError(w, status, code, detail)
		return
	}
	status := resp.Status
	if status == 0 {
		status = http.StatusOK
	}
	in.metrics.requests.WithLabelValues(name, strconv.Itoa(status)).Inc()
	writeJSON(w, status, resp.Body)
}

// The 503 while the executor is unavailable; why is for operators (/readyz,
// the executor_unavailable log).
const (
	executorRetryAfter        = "5"
	executorUnavailableDetail = "the executor is unavailable (it cannot be started or does not get ready); nothing was run: retry later"
)

// labelHeaders collects X-Svc-Label-<name> headers as task labels.
func labelHeaders(h http.Header) map[string]string {
	var labels map[string]string
	for k, v := range h {
		name, ok := strings.CutPrefix(strings.ToLower(k), "x-"+model.LabelHeaderPrefix)
		if !ok || name == "" || len(v) == 0 {
			continue
		}
		if labels == nil {
			labels = map[string]string{}
		}
		labels[name] = v[0]
	}
	return labels
}

// remoteHost is the per-client key of an ingress without clients.
func remoteHost(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return "addr:" + h
	}
	return "addr:" + r.RemoteAddr
}

// clientSlots counts requests in progress per client and refuses one over
// max; a client with none in progress holds no memory.
type clientSlots struct {
	mu  sync.Mutex
	max int
	n   map[string]int
}

func (c *clientSlots) acquire(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	if c.n[key] >= c.max {
		return false
	}
	c.n[key]++
	return true
}

func (c *clientSlots) release(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[key]--; c.n[key] <= 0 {
		delete(c.n, key)
	}
}

// guardBrowsers refuses ingress requests a browser sends from another site:
// a page must not push bytes through the executor from a visitor's browser.
func guardBrowsers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
			writeError(w, http.StatusForbidden, "cross_site_refused", "the ingress takes requests from programs, not from web pages of other sites")
			return
		}
		if o := r.Header.Get("Origin"); o != "" {
			origin, _, ok := normalizeOrigin(o)
			own, _, _ := normalizeOrigin("http://" + r.Host)
			if !ok || origin != own {
				writeError(w, http.StatusForbidden, "origin_refused", "the ingress takes requests from programs; a web page of origin "+quoteOrigin(o)+" may not call it")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// readBody reads the whole body. With a declared length (at most the body
// cap, checked before) the buffer is sized once, with one more byte of room
// so the final read sees EOF without growing it.
func readBody(r io.Reader, declared int64) ([]byte, error) {
	if declared <= 0 {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, declared+1)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) { // more than declared: the server stops it; read on
			rest, err := io.ReadAll(r)
			return append(b, rest...), err
		}
	}
}
