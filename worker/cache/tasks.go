package cache

import (
	"context"
	"maps"
	"sync"
	"time"

	"svc/worker/config"
	"svc/worker/model"
	"svc/worker/payload"
)

// Annotation kinds the cache adds to a task's result: fd 3 cache writes
// refused, and a probe's writes, never stored (a probe has no side effects).
const (
	RefusedKind      = "svc.cache_refused"
	ProbeSkippedKind = "svc.cache_probe_skipped"
)

// EnvBudget bounds the bytes of SVC_CACHE_* variables one run gets, far
// below the kernel's limit; keys past it are left unset (over_budget).
const EnvBudget = 1 << 20

// opTimeout bounds one cache read or write done for a task.
const opTimeout = 10 * time.Second

// Tasks joins executor runs to a Store (model.TaskCache): before a run
// the keys of handler.cache_keys become SVC_CACHE_* variables, after it
// the executor's fd 3 cache writes are stored. Safe for concurrent use.
type Tasks struct {
	store *Store
	keys  []string

	mu      sync.Mutex
	snap    []envVar // the variables of keys as of version snapVer
	snapVer int64
	misses  int // keys not found in snap (for the read counters)
}

// envVar is one cache key as executor variables.
type envVar struct{ name, value, enc string }

var _ model.TaskCache = (*Tasks)(nil)

// NewTasks returns the task hook of s; keys are handler.cache_keys.
func NewTasks(s *Store, keys []string) *Tasks { return &Tasks{store: s, keys: keys} }

// Prepare sets SVC_CACHE_<NAME> and SVC_CACHE_<NAME>_ENCODING (utf-8, or
// base64 for a value that is not UTF-8 or holds a NUL) for each key found
// in its most specific scope, in a copy of the task's environment that
// undo swaps back.
func (c *Tasks) Prepare(t *model.Task) (undo func()) {
	if len(c.keys) == 0 {
		return func() {}
	}
	vars, misses := c.read()
	orig := t.Env
	env := maps.Clone(orig)
	if env == nil {
		env = map[string]string{}
	}
	budget := EnvBudget
	for _, v := range vars {
		// NAME=value and NAME_ENCODING=enc
		n := 2*len(v.name) + len(v.value) + len(v.enc) + 12
		if n > budget {
			c.store.metrics.reads.WithLabelValues("over_budget").Inc()
			continue
		}
		budget -= n
		env[v.name], env[v.name+"_ENCODING"] = v.value, v.enc
		c.store.metrics.reads.WithLabelValues("hit").Inc()
	}
	c.store.metrics.reads.WithLabelValues("miss").Add(float64(misses))
	t.Env = env
	return func() { t.Env = orig }
}

// read returns the variables of the keys found and how many were not,
// reading the store only when it changed since the last read.
func (c *Tasks) read() ([]envVar, int) {
	ver := c.store.version.Load()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.snap != nil && c.snapVer == ver {
		return c.snap, c.misses
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	vars, misses := []envVar{}, 0
	for _, k := range c.keys {
		r, ok, err := c.store.Lookup(ctx, k)
		switch {
		case err != nil:
			c.store.metrics.reads.WithLabelValues("error").Inc()
			return vars, misses // not kept: the next task reads again
		case !ok:
			misses++
			continue
		}
		v := envVar{name: config.CacheEnvName(k)}
		v.value, v.enc = payload.EncodeEnv(r.Value)
		vars = append(vars, v)
	}
	c.snap, c.snapVer, c.misses = vars, ver, misses
	return vars, misses
}

// Commit stores the result's fd 3 cache writes in order, as this worker;
// one RefusedKind annotation names the writes refused, by reason.
func (c *Tasks) Commit(source string, res *model.TaskResult) {
	if len(res.CacheWrites) == 0 {
		return
	}
	if source == model.SourceProbe {
		res.Annotations = append(res.Annotations, model.Annotation{Kind: ProbeSkippedKind, Payload: model.AnnotationPayload(map[string]any{
			"writes": len(res.CacheWrites),
		})})
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	reasons := map[string]any{}
	var keys []string
	refused := 0
	for _, w := range res.CacheWrites {
		err := c.store.Put(ctx, w.Scope, w.Key, []byte(w.Value))
		if err == nil {
			continue
		}
		refused++
		r := writeResult(err)
		n, _ := reasons[r].(int)
		reasons[r] = n + 1
		if len(keys) < 5 {
			keys = append(keys, model.Truncate(w.Key, 64))
		}
	}
	if refused > 0 {
		reasons["refused"] = refused
		reasons["keys"] = keys
		res.Annotations = append(res.Annotations, model.Annotation{Kind: RefusedKind, Payload: model.AnnotationPayload(reasons)})
	}
}
