package cache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"svc/worker/fleet"
	"svc/worker/model"
)

// PeerPath is the peer route every worker serves.
const PeerPath = "/api/v1/peer/cache/changes"

// Exchange bounds.
const (
	// MaxFutureSkew: a pulled row stamped further ahead of this worker's
	// clock is stamped now + MaxFutureSkew when received (package doc).
	MaxFutureSkew   = fleet.MaxClockSkew
	pullers         = 4  // peers pulled at once
	maxPagesPerPull = 16 // pages of one peer in one cycle; the rest follows next cycle
)

// Request results (label values of svc_fleet_peer_requests_total).
const (
	resultOK          = "ok"
	resultUnreachable = "unreachable" // connection refused, DNS, reset
	resultTimeout     = "timeout"     // fleet.cache_exchange.timeout passed
	resultRedirect    = "redirect"    // 3xx: never followed
	resultNotServing  = "not_serving" // 404: the peer serves no cache rows
	resultHTTPError   = "http_error"  // any other status
	resultTooLarge    = "too_large"   // body over MaxPageBody
	resultInvalid     = "invalid"     // not the documented JSON shape
	resultRefused     = "refused"     // rows this worker must not apply
)

// PeerSource lists the peers to pull (the registry) and takes the outcome
// of each static peer's requests.
type PeerSource interface {
	Peers() []fleet.Peer
	Contacted(name string, ok bool)
}

// ExchangeConfig is what an Exchange needs.
type ExchangeConfig struct {
	Store    *Store
	Peers    PeerSource
	Cluster  string        // this worker's cluster
	Interval time.Duration // fleet.cache_exchange.interval
	Timeout  time.Duration // fleet.cache_exchange.timeout, per request
	Registry prometheus.Registerer
	Logger   *slog.Logger
}

// Exchange pulls the cluster and global rows of the registry's peers into
// the store every interval: both scopes from its own cluster, global rows
// from others. A page is applied only when every row's origin is the peer
// and its scope one asked for; else none of it (result refused). Requests
// ignore proxy variables, follow no redirect and each has the timeout.
type Exchange struct {
	cfg      ExchangeConfig
	log      *slog.Logger
	client   *http.Client
	requests *prometheus.CounterVec
	cycles   prometheus.Counter
	clamped  prometheus.Counter
	state    map[string]*peerState // by peer name; Run's goroutine and one puller per peer use each
}

type peerState struct {
	cursor string
	pulled *fleet.Marks // marks of the last complete pull
	last   string       // last request result, for logging changes only
	ahead  bool         // a clamped row of the peer was logged
}

// NewExchange returns the exchange of cfg; it starts nothing.
func NewExchange(cfg ExchangeConfig) (*Exchange, error) {
	if cfg.Store == nil || cfg.Peers == nil || cfg.Interval <= 0 || cfg.Timeout <= 0 {
		return nil, errors.New("cache exchange: store, peers, interval and timeout are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	x := &Exchange{
		cfg: cfg, log: cfg.Logger.With("component", "cache_exchange"), state: map[string]*peerState{},
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_fleet_peer_requests_total",
			Help: "Cache-exchange requests to peers by result (ok, unreachable, timeout, redirect, not_serving, http_error, too_large, invalid, refused).",
		}, []string{"result"}),
		cycles: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svc_cache_exchange_cycles_total", Help: "Completed cache-exchange pull cycles.",
		}),
		clamped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svc_cache_exchange_clamped_total",
			Help: "Pulled cache rows stamped more than the clock skew (30s) ahead of this worker, stamped now + 30s when received.",
		}),
		client: &http.Client{
			Transport: &http.Transport{
				Proxy:                 nil, // peers are reached directly, whatever HTTP_PROXY says
				DialContext:           (&net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}).DialContext,
				TLSHandshakeTimeout:   cfg.Timeout,
				ResponseHeaderTimeout: cfg.Timeout,
				MaxIdleConnsPerHost:   1,
				IdleConnTimeout:       90 * time.Second,
			},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			Timeout:       cfg.Timeout,
		},
	}
	for _, r := range []string{resultOK, resultUnreachable, resultTimeout, resultRedirect, resultNotServing, resultHTTPError, resultTooLarge, resultInvalid, resultRefused} {
		x.requests.WithLabelValues(r)
	}
	cfg.Registry.MustRegister(x.requests, x.cycles, x.clamped)
	return x, nil
}

// Run pulls every interval until ctx ends.
func (x *Exchange) Run(ctx context.Context) error {
	defer x.client.CloseIdleConnections()
	t := time.NewTicker(x.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		x.cycle(ctx)
	}
}

// cycle pulls every due peer once, a few at a time.
func (x *Exchange) cycle(ctx context.Context) {
	peers := x.cfg.Peers.Peers()
	listed := map[string]bool{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, pullers)
	for _, p := range peers {
		if p.URL == "" || listed[p.Name] {
			continue
		}
		listed[p.Name] = true
		st := x.state[p.Name]
		if st == nil {
			st = &peerState{}
			x.state[p.Name] = st
		}
		if !x.due(p, st) {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			x.pull(ctx, p, st)
		}()
	}
	wg.Wait()
	for name := range x.state {
		if !listed[name] {
			delete(x.state, name)
		}
	}
	x.cycles.Inc()
}

// due reports whether p needs a pull: static peers always, cards when
// the marks of the scopes asked for moved.
func (x *Exchange) due(p fleet.Peer, st *peerState) bool {
	switch {
	case p.Static:
		return true
	case p.Marks == nil:
		return false // the worker serves no cache rows
	case st.pulled == nil:
		return true
	}
	return p.Marks.Global != st.pulled.Global || (p.Cluster == x.cfg.Cluster && p.Marks.Cluster != st.pulled.Cluster)
}

// pull fetches and applies p's pages until it has no more (or
// maxPagesPerPull), logging when its result changes.
func (x *Exchange) pull(ctx context.Context, p fleet.Peer, st *peerState) {
	scopes := []string{ScopeGlobal}
	if p.Cluster == x.cfg.Cluster {
		scopes = []string{ScopeCluster, ScopeGlobal}
	}
	for range maxPagesPerPull {
		page, result, err := x.fetch(ctx, p, scopes, st.cursor)
		x.requests.WithLabelValues(result).Inc()
		if p.Static {
			x.cfg.Peers.Contacted(p.Name, result == resultOK)
		}
		if result != st.last {
			if result == resultOK {
				x.log.Info("cache_exchange_peer_ok", "peer", p.Name, "url", p.URL)
			} else {
				x.log.Warn("cache_exchange_peer_failed", "peer", p.Name, "url", p.URL, "result", result, "error", err.Error())
			}
			st.last = result
		}
		if result != resultOK {
			return
		}
		if page.clamped > 0 {
			x.clamped.Add(float64(page.clamped))
			if !st.ahead {
				st.ahead = true
				x.log.Warn("cache_exchange_peer_clock_ahead", "peer", p.Name, "url", p.URL, "rows", page.clamped,
					"first_ts_ms", page.aheadTS, "stamped_ms", page.latest, "max_skew", MaxFutureSkew.String(),
					"detail", "rows of this peer are stamped further ahead of this worker's clock than the skew allowed: they are stamped now + the skew when received (counted in svc_cache_exchange_clamped_total); sync the peer's clock")
			}
		}
		if len(page.rows) > 0 {
			if _, err := x.cfg.Store.Apply(ctx, page.rows); err != nil {
				x.log.Error("cache_exchange_apply_failed", "peer", p.Name, "error", err.Error())
				return
			}
		}
		st.cursor = page.next
		if !page.more {
			if p.Marks != nil {
				m := *p.Marks
				st.pulled = &m
			}
			return
		}
	}
}

// checkedPage is an answer whose rows passed every check.
type checkedPage struct {
	rows            []Row
	next            string
	more            bool
	clamped         int // rows stamped past latest (the first at aheadTS), now at latest
	aheadTS, latest int64
}

// fetch makes one request and checks the answer; result names what went
// wrong, err says more.
func (x *Exchange) fetch(ctx context.Context, p fleet.Peer, scopes []string, since string) (checkedPage, string, error) {
	q := url.Values{"scopes": {strings.Join(scopes, ",")}, "limit": {strconv.Itoa(DefaultPageRows)}}
	if since != "" {
		q.Set("since", since)
	}
	ctx, cancel := context.WithTimeout(ctx, x.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(p.URL, "/")+PeerPath+"?"+q.Encode(), nil)
	if err != nil {
		return checkedPage{}, resultInvalid, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := x.client.Do(req)
	if err != nil {
		return checkedPage{}, netResult(err), err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return checkedPage{}, resultRedirect, fmt.Errorf("status %d to %q: redirects are not followed", resp.StatusCode, resp.Header.Get("Location"))
	case resp.StatusCode == http.StatusNotFound:
		return checkedPage{}, resultNotServing, errors.New("404: the peer serves no cache rows")
	case resp.StatusCode != http.StatusOK:
		return checkedPage{}, resultHTTPError, fmt.Errorf("status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxPageBody+1))
	if err != nil {
		return checkedPage{}, netResult(err), err
	}
	if len(body) > MaxPageBody {
		return checkedPage{}, resultTooLarge, fmt.Errorf("answer over %d bytes", MaxPageBody)
	}
	var w WirePage
	if err := json.Unmarshal(body, &w); err != nil {
		return checkedPage{}, resultInvalid, err
	}
	if len(w.Rows) > DefaultPageRows || len(w.Next) > MaxCursorBytes {
		return checkedPage{}, resultInvalid, errors.New("more rows than asked for, or an oversized cursor")
	}
	out := checkedPage{rows: make([]Row, 0, len(w.Rows)), next: w.Next, more: w.More}
	out.latest = x.cfg.Store.cfg.Now().Add(MaxFutureSkew).UnixMilli()
	for i := range w.Rows {
		r, err := w.Rows[i].row()
		switch {
		case err != nil:
			return checkedPage{}, resultRefused, fmt.Errorf("row %d: %w", i, err)
		case r.Origin != p.Name:
			return checkedPage{}, resultRefused, fmt.Errorf("row %d: origin %q is not the peer %q", i, model.Truncate(r.Origin, 64), p.Name)
		case !slices.Contains(scopes, r.Scope):
			return checkedPage{}, resultRefused, fmt.Errorf("row %d: scope %q was not asked for", i, r.Scope)
		case r.TSms <= 0:
			return checkedPage{}, resultRefused, fmt.Errorf("row %d: timestamp %d out of range", i, r.TSms)
		case r.TSms > out.latest:
			if out.clamped == 0 {
				out.aheadTS = r.TSms
			}
			out.clamped++
			r.TSms = out.latest
		}
		out.rows = append(out.rows, r)
	}
	return out, resultOK, nil
}

// netResult tells a timeout from any other transport failure.
func netResult(err error) string {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return resultTimeout
	}
	return resultUnreachable
}
