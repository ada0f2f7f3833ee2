package httpd

import (
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"svc/worker/config"
)

// Connection caps: each listener holds at most its cap of open
// connections, idle ones included, so a flood of them cannot take the
// descriptors the worker needs for its own files. One over the cap waits
// in the kernel's accept queue, costing the worker no descriptor.
const (
	// connReserveMin is the least number of descriptors kept for the
	// worker's own files; a quarter of the file limit when larger.
	connReserveMin = 256
	// Ceilings of the derived caps (shares of what the reserve leaves:
	// ingress a half, UI a quarter, metrics an eighth).
	ingressConnCeiling = 16384
	uiConnCeiling      = 4096
	metricsConnCeiling = 64
	connCapFloor       = 8
	connCapWarnEvery   = time.Minute // between connection_cap_reached warnings of a listener
)

// ConnCaps is the connection plan: the file limit, the reserve kept for
// the worker's own files and each surface's cap (0: off).
type ConnCaps struct {
	NoFile, Reserve      int
	UI, Ingress, Metrics int
	// Clamped names the configured caps lowered to the file limit; Over:
	// the caps together exceed it.
	Clamped []string
	Over    bool
}

// fileLimit is the process's soft RLIMIT_NOFILE, which the Go runtime
// raised to the hard one at start.
func fileLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<30 {
		return 1 << 20
	}
	return int(rl.Cur)
}

// PlanConnCaps derives each enabled surface's cap: its max_connections
// unless that alone exceeds what the reserve leaves of nofile; 0 takes the
// surface's share, within its ceiling.
func PlanConnCaps(cfg *config.Config, nofile int) ConnCaps {
	c := ConnCaps{NoFile: nofile, Reserve: max(connReserveMin, nofile/4)}
	avail := max(nofile-c.Reserve, connCapFloor)
	pick := func(on bool, key string, configured, share, ceiling int) int {
		switch {
		case !on:
			return 0
		case configured == 0:
			return max(connCapFloor, min(avail/share, ceiling))
		case configured > avail:
			c.Clamped = append(c.Clamped, key)
			return avail
		}
		return configured
	}
	c.Ingress = pick(cfg.Sources.HTTP.Enabled, "sources.http.max_connections", cfg.Sources.HTTP.MaxConnections, 2, ingressConnCeiling)
	c.UI = pick(cfg.UI.Enabled, "ui.max_connections", cfg.UI.MaxConnections, 4, uiConnCeiling)
	c.Metrics = pick(cfg.Metrics.Enabled, "metrics.max_connections", cfg.Metrics.MaxConnections, 8, metricsConnCeiling)
	c.Over = c.Ingress+c.UI+c.Metrics > avail
	return c
}

// Log reports the plan, and warns when the caps exceed the file limit.
func (c ConnCaps) Log(log *slog.Logger) {
	args := []any{"nofile", c.NoFile, "reserve", c.Reserve, "ui", c.UI, "ingress", c.Ingress, "metrics", c.Metrics}
	log.Info("connection_caps", args...)
	if len(c.Clamped) > 0 || c.Over {
		log.Warn("connection_caps_above_file_limit", append(args, "clamped", c.Clamped,
			"detail", "the surfaces' max_connections together exceed the file limit minus the reserve kept for the worker's own files: "+
				"a connection flood could still exhaust descriptors; lower the max_connections keys or raise the file limit (ulimit -n, LimitNOFILE)")...)
	}
}

// limitListener accepts at most cap(sem) connections at a time; Accept
// waits for an open one to close (as x/net/netutil.LimitListener).
type limitListener struct {
	net.Listener
	name      string
	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	log       atomic.Pointer[slog.Logger]
	lastWarn  atomic.Int64 // unix nanoseconds of the last connection_cap_reached
}

// limitListen wraps ln with a cap of n open connections (n <= 0: ln).
func limitListen(ln net.Listener, name string, n int) net.Listener {
	if ln == nil || n <= 0 {
		return ln
	}
	return &limitListener{Listener: ln, name: name, sem: make(chan struct{}, n), done: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	default:
		l.warnFull()
		select {
		case l.sem <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

func (l *limitListener) warnFull() {
	log := l.log.Load()
	if log == nil {
		return
	}
	now, last := time.Now().UnixNano(), l.lastWarn.Load()
	if now-last < int64(connCapWarnEvery) || !l.lastWarn.CompareAndSwap(last, now) {
		return
	}
	log.Warn("connection_cap_reached", "surface", l.name, "max_connections", cap(l.sem),
		"detail", "new connections wait in the accept queue until open ones close (idle ones close after the header or idle timeout)")
}

func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

// limitConn frees its listener's slot once, at the first Close.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
