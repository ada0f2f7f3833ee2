package httpd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"time"

	"svc/worker/fleet"
	"svc/worker/trends"
)

// Bounds of a fleet trends answer (past trendsMaxPeers, workers are missing).
const (
	trendsPeerTimeout = 3 * time.Second
	trendsPeerBytes   = 1 << 20
	trendsMaxPeers    = 64
)

// TrendsWorker is one worker's trend in GET /api/v1/dashboard/trends.
type TrendsWorker struct {
	Worker string `json:"worker"`
	Self   bool   `json:"self"`
	trends.Series
}

// TrendsMissing is a worker whose trend is not in the answer, and why.
type TrendsMissing struct {
	Worker string `json:"worker"`
	Reason string `json:"reason"`
}

// Trends is GET /api/v1/dashboard/trends.
type Trends struct {
	WindowSeconds int64           `json:"window_seconds"`
	StepSeconds   int64           `json:"step_seconds"`
	Scope         string          `json:"scope"`
	FromMS        int64           `json:"from_ms"`
	ToMS          int64           `json:"to_ms"`
	Workers       []TrendsWorker  `json:"workers"`
	Fleet         []trends.Point  `json:"fleet"` // the workers' points added up by step
	Missing       []TrendsMissing `json:"missing"`
}

// dashboardTrends answers the trends of this worker (scope=self) or of
// every worker of the list (scope=fleet).
func (s *UIServer) dashboardTrends(w http.ResponseWriter, r *http.Request) {
	if s.trends == nil {
		writeError(w, http.StatusNotFound, "not_found", "this worker keeps no trends")
		return
	}
	q := r.URL.Query()
	window := time.Hour
	if v := q.Get("window"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < trends.MinWindow || d > trends.MaxWindow {
			writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("window must be a duration from %s to %s, such as 1h or 30m", trends.MinWindow, "24h"))
			return
		}
		window = d
	}
	scope, ok := oneOf(w, r, "scope", "scope must be fleet or self", "fleet", "self")
	if !ok {
		return
	}
	own := s.trends.Snapshot(window)
	now := time.Now()
	out := Trends{WindowSeconds: int64(window / time.Second), StepSeconds: own.StepSeconds, Scope: scope,
		FromMS: now.Add(-window).UnixMilli(), ToMS: now.UnixMilli(),
		Workers: []TrendsWorker{{Worker: s.cfg.Worker.Name, Self: true, Series: own}}, Missing: []TrendsMissing{}}
	if scope == "fleet" && s.fleet != nil {
		peers, missing := s.askPeers(r.Context(), q.Get("window"), own.StepSeconds)
		out.Workers = append(out.Workers, peers...)
		out.Missing = append(out.Missing, missing...)
	}
	out.Fleet = addUp(out.Workers)
	writeJSON(w, http.StatusOK, out)
}

// askPeers asks every other worker of the list for its own trend at once;
// one not asked or not answering is named missing, never dropped.
func (s *UIServer) askPeers(ctx context.Context, window string, step int64) ([]TrendsWorker, []TrendsMissing) {
	ctx, cancel := context.WithTimeout(ctx, trendsPeerTimeout)
	defer cancel()
	var ask []fleet.Worker
	var missing []TrendsMissing
	for _, wk := range s.fleet.Workers() {
		var why string
		switch {
		case wk.Self:
			continue
		case wk.State == fleet.StateStopped || wk.State == fleet.StateUnreachable:
			why = wk.State
		case wk.URL == "":
			why = "no usable URL on its card"
		case !wk.Trusted:
			why = "not trusted: its URL's origin is not in fleet.trusted_urls, so it is not sent the token"
		case len(ask) >= trendsMaxPeers:
			why = fmt.Sprintf("not asked: at most %d workers are asked", trendsMaxPeers)
		default:
			ask = append(ask, wk)
			continue
		}
		missing = append(missing, TrendsMissing{Worker: wk.Name, Reason: why})
	}
	got, failed := fanOut(ask, trendsMaxPeers, func(wk fleet.Worker) (trends.Series, error) {
		series, err := s.peerTrends(ctx, wk.URL, window)
		if err == nil && series.StepSeconds != step {
			err = fmt.Errorf("answered in %d-second steps, not %d (an earlier release?)", series.StepSeconds, step)
		}
		return series, err
	})
	for _, m := range failed {
		missing = append(missing, TrendsMissing{Worker: m.Worker, Reason: m.Reason})
	}
	var workers []TrendsWorker
	for _, name := range sortedKeys(got) {
		workers = append(workers, TrendsWorker{Worker: name, Series: got[name]})
	}
	sort.Slice(missing, func(i, j int) bool { return missing[i].Worker < missing[j].Worker })
	return workers, missing
}

// peerTrends asks one peer for its own trend (scope=self).
func (s *UIServer) peerTrends(ctx context.Context, base, window string) (trends.Series, error) {
	u := base + "/api/v1/dashboard/trends?scope=self"
	if window != "" {
		u += "&window=" + url.QueryEscape(window)
	}
	resp, err := s.peerGet(ctx, u)
	if err != nil {
		if errors.As(err, new(badURL)) {
			return trends.Series{}, fmt.Errorf("bad URL")
		}
		if ctx.Err() != nil || isTimeout(err) {
			return trends.Series{}, fmt.Errorf("no answer within %s", trendsPeerTimeout)
		}
		return trends.Series{}, fmt.Errorf("unreachable")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return trends.Series{}, fmt.Errorf("answered %d (an earlier release, or another token?)", resp.StatusCode)
	}
	var body Trends
	if err := json.NewDecoder(io.LimitReader(resp.Body, trendsPeerBytes)).Decode(&body); err != nil {
		return trends.Series{}, fmt.Errorf("unreadable answer")
	}
	if len(body.Workers) != 1 || len(body.Workers[0].Points) > body.Workers[0].MaxPoints || body.Workers[0].MaxPoints > trends.FinePoints+1 {
		return trends.Series{}, fmt.Errorf("implausible answer")
	}
	return body.Workers[0].Series, nil
}

// addUp adds the workers' points step by step; a step's lag is the sum of
// the lags known at it (null when none is).
func addUp(ws []TrendsWorker) []trends.Point {
	by := map[int64]*trends.Point{}
	for _, w := range ws {
		for _, p := range w.Points {
			f := by[p.TS]
			if f == nil {
				f = &trends.Point{TS: p.TS, Open: p.Open}
				by[p.TS] = f
			}
			f.OK += p.OK
			f.Failed += p.Failed
			if p.Lag != nil {
				v := *p.Lag
				if f.Lag != nil {
					v += *f.Lag
				}
				f.Lag = &v
			}
		}
	}
	out := make([]trends.Point, 0, len(by))
	for _, p := range by {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TS < out[j].TS })
	return out
}
