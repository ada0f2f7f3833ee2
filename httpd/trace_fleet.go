package httpd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"svc/recorder"
	"svc/worker/event"
	"svc/worker/fleet"
)

// A trace of scope cluster also asks each live, trusted worker of the
// cluster for what its live file holds (not sealed yet), with scope=local,
// so a trace never recurses (docs/api.md, "Fleet-wide trace"). Another
// worker's live SQLite file cannot be read directly: it is in that
// worker's private storage.dir, and WAL needs its -shm memory on one host.
const (
	peerTraceTimeout  = 3 * time.Second
	peerTraceMaxBytes = 64 << 20
	peerTraceParallel = 8
)

// Trace scopes on the wire (query scope).
const (
	scopeCluster = "cluster"
	scopeLocal   = "local"
)

// TraceMissing is a worker of the cluster whose live file a trace could
// not search, and why.
type TraceMissing struct {
	Worker string `json:"worker"`
	URL    string `json:"url"`
	Reason string `json:"reason"`
}

// TraceAnswer is GET /api/v1/debug/trace.
type TraceAnswer struct {
	TaskID string        `json:"task_id"`
	Scope  string        `json:"scope"`
	Events []event.Event `json:"events"`
	// Sources are the workers whose live files were searched: this one
	// and each peer that answered.
	Sources []string       `json:"sources"`
	Missing []TraceMissing `json:"missing"`
}

// LabelAnswer is GET /api/v1/debug/trace-by-label.
type LabelAnswer struct {
	Tasks   []event.TaskRow `json:"tasks"`
	Scope   string          `json:"scope"`
	Sources []string        `json:"sources"`
	Missing []TraceMissing  `json:"missing"`
}

// traceScope reads query scope: cluster (default) or local.
func traceScope(r *http.Request) (recorder.Scope, string, error) {
	switch v := r.URL.Query().Get("scope"); v {
	case "", scopeCluster:
		return recorder.ScopeCluster, scopeCluster, nil
	case scopeLocal:
		return recorder.ScopeLocal, scopeLocal, nil
	default:
		return 0, "", fmt.Errorf("scope must be cluster (this worker's files, the cluster's sealed files and archives, and the live files of its other workers) or local (this worker's live file only), got %q", cut(v, 100))
	}
}

// newPeerClient reaches other workers directly (no proxy), follows no
// redirect and gives up after peerTraceTimeout.
func newPeerClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           (&net.Dialer{Timeout: peerTraceTimeout}).DialContext,
			ResponseHeaderTimeout: peerTraceTimeout,
			MaxIdleConnsPerHost:   1,
			IdleConnTimeout:       30 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       peerTraceTimeout,
	}
}

// tracePeers splits the other workers of this cluster into those a trace
// asks and those it cannot (missing). A stopped worker sealed its live
// file as it stopped: it is neither.
func (s *UIServer) tracePeers() (ask []fleet.Worker, missing []TraceMissing) {
	if s.fleet == nil {
		return nil, nil
	}
	return s.livePeers(func(w fleet.Worker) bool { return w.Cluster == s.cfg.Worker.Cluster && w.State != fleet.StateStopped },
		"unreachable: its card has no recent heartbeat; what its live file holds is traced once it restarts and seals it")
}

// askPeers sends GET path?query&scope=local to each worker of ask, at most
// peerTraceParallel at once, and decodes each 200 answer into a T; the
// others are missing, with the reason.
func askPeers[T any](ctx context.Context, s *UIServer, ask []fleet.Worker, path string, query url.Values) (map[string]T, []TraceMissing) {
	q := url.Values{}
	maps.Copy(q, query)
	q.Set("scope", scopeLocal)
	return fanOut(ask, peerTraceParallel, func(w fleet.Worker) (T, error) {
		return askPeer[T](ctx, s, strings.TrimSuffix(w.URL, "/")+path+"?"+q.Encode())
	})
}

// fanOut calls fetch for each worker of ask, at most parallel at once, and
// returns the answers by worker name and the workers whose fetch failed.
func fanOut[T any](ask []fleet.Worker, parallel int, fetch func(fleet.Worker) (T, error)) (map[string]T, []TraceMissing) {
	got := map[string]T{}
	var missing []TraceMissing
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	for _, w := range ask {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			v, err := fetch(w)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				missing = append(missing, TraceMissing{w.Name, w.URL, err.Error()})
				return
			}
			got[w.Name] = v
		})
	}
	wg.Wait()
	return got, missing
}

// askPeer GETs one peer's answer.
func askPeer[T any](ctx context.Context, s *UIServer, u string) (T, error) {
	var v T
	ctx, cancel := context.WithTimeout(ctx, peerTraceTimeout)
	defer cancel()
	resp, err := s.peerGet(ctx, u)
	var bad badURL
	if errors.As(err, &bad) {
		return v, fmt.Errorf("bad URL: %v", bad.error)
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
			return v, fmt.Errorf("did not answer within %s", peerTraceTimeout)
		}
		return v, fmt.Errorf("did not answer: %s", unwrapURLError(err))
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return v, errors.New("refused this worker's UI token (401): the workers of a fleet need the same ui.auth_token")
	case resp.StatusCode != http.StatusOK:
		var e ErrorBody
		_ = json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&e)
		return v, fmt.Errorf("answered %d %s", resp.StatusCode, cut(e.Error, 64))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, peerTraceMaxBytes+1))
	switch {
	case err != nil && (errors.Is(err, context.DeadlineExceeded) || isTimeout(err)):
		return v, fmt.Errorf("did not answer within %s", peerTraceTimeout)
	case err != nil:
		return v, fmt.Errorf("answer cut short: %s", unwrapURLError(err))
	case len(body) > peerTraceMaxBytes:
		return v, fmt.Errorf("answer over %d MiB", peerTraceMaxBytes>>20)
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return v, errors.New("answer is not the expected JSON")
	}
	return v, nil
}

// badURL is a peer URL that makes no request.
type badURL struct{ error }

// peerGet GETs u from a peer with this worker's UI token: a fleet shares one.
func (s *UIServer) peerGet(ctx context.Context, u string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, badURL{err}
	}
	if tok := s.cfg.UI.AuthToken; tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	return s.peers.Do(req)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// unwrapURLError drops url.Error's "Get <url>:" prefix (the URL is in
// the answer beside it).
func unwrapURLError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return cut(ue.Err.Error(), 200)
	}
	return cut(err.Error(), 200)
}

// askPeersMeanwhile asks the cluster's other workers for path with q in
// the background (nobody when scope is local) while the caller reads its
// own files; collect waits for their answers, by worker name, and the
// workers not asked or not answering.
func askPeersMeanwhile[T any](r *http.Request, s *UIServer, scope recorder.Scope, path string, q url.Values) (collect func() (map[string]T, []TraceMissing)) {
	var peers map[string]T
	var missing []TraceMissing
	done := make(chan struct{})
	go func() {
		defer close(done)
		if scope == recorder.ScopeLocal {
			return
		}
		ask, skipped := s.tracePeers()
		var failed []TraceMissing
		peers, failed = askPeers[T](r.Context(), s, ask, path, q)
		missing = append(skipped, failed...)
	}()
	return func() (map[string]T, []TraceMissing) {
		<-done
		return peers, missing
	}
}
