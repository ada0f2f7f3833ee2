package executor

import (
	"context"
	"time"
)

// seat keeps one child of the pool alive: it starts a child, hands it to
// the pool, waits until it leaves service, and starts the next one, backing
// off while children keep dying before they answer a task (a crash loop),
// so that a broken binary never makes the pool spin.
func (p *persistent) seat() {
	defer p.seats.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-p.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	deaths := 0 // consecutive children that died before answering
	for first := true; ; first = false {
		if deaths > 0 && !p.sleep(execCrashBackoff(deaths)) {
			return
		}
		if !first { // acquire counted every seat's first start
			p.mu.Lock()
			p.starting++
			p.mu.Unlock()
		}
		c, why, err := p.sp.startChild(ctx, p.opts.ReadyTimeout, p.reaped)
		if err != nil {
			p.mu.Lock()
			p.starting--
			closed := p.closed
			if why != execReasonKilled {
				deaths++
			}
			// Tasks fail at once rather than wait when the binary cannot
			// be run at all, or its children keep dying at start-up.
			if !closed && (why == execReasonStartFailed || deaths >= execCrashLoopAfter) {
				p.startErr = err
				if p.live == 0 && p.starting == 0 {
					p.failWaitersLocked(err)
				}
			}
			p.mu.Unlock()
			if closed {
				return
			}
			p.metrics.restarts.WithLabelValues(why).Inc()
			if why == execReasonKilled {
				// Not the executor's fault: start again soon, without
				// growing the crash-loop backoff.
				if !p.sleep(execCrashBackoff(1)) {
					return
				}
				continue
			}
			p.noteDeath(deaths, why, err.Error())
			continue
		}
		p.mu.Lock()
		p.starting--
		c.busy, c.live = false, true
		c.inLoop = deaths >= execCrashLoopAfter
		p.live++
		p.metrics.ready.Set(float64(p.live))
		p.startErr = nil
		if p.closed {
			p.markDownLocked(c, execReasonStopped)
		} else {
			p.handLocked(c)
		}
		p.mu.Unlock()

		<-c.downCh
		p.mu.Lock()
		why, answered, closed := c.downWhy, c.answered, p.closed
		ended := false
		if c.inLoop && why != execReasonExited {
			c.inLoop = false
			ended = p.loopEndLocked()
		}
		p.mu.Unlock()
		if ended {
			p.log.Info("executor_crash_loop_ended")
		}
		if why == execReasonStopped || closed {
			if why == execReasonStopped {
				c.retire(p.opts.StopGrace)
			}
			<-c.exited
			return
		}
		p.metrics.restarts.WithLabelValues(why).Inc()
		if answered > 0 || why != execReasonExited {
			deaths = 0
			continue
		}
		<-c.exited
		deaths++
		p.noteDeath(deaths, why, "executor exited before answering a task ("+c.exitText()+")"+execTailText(c.stderr.take()))
	}
}

// execCrashBackoff is the wait before start n+1 after n start-up deaths.
func execCrashBackoff(n int) time.Duration {
	if n <= 1 {
		return 0
	}
	d := execCrashBackoffBase << min(n-2, 20)
	return min(d, execCrashBackoffMax)
}

// sleep waits d; false when the pool closed first.
func (p *persistent) sleep(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.stop:
		return false
	}
}

// noteDeath counts a start-up death; the pool's first seat to reach
// execCrashLoopAfter opens a crash-loop episode (one log line, one count).
func (p *persistent) noteDeath(n int, why, detail string) {
	if n != execCrashLoopAfter {
		return
	}
	p.mu.Lock()
	p.looping++
	first := p.looping == 1
	p.mu.Unlock()
	if first {
		p.metrics.crashLoops.Inc()
		p.metrics.crashLooping.Set(1)
		p.log.Warn("executor_crash_loop", "reason", why, "error", detail,
			"detail", "executor children keep dying before they answer a task; restarts back off up to "+execCrashBackoffMax.String())
	}
}

// loopEndLocked closes a seat's crash loop; true when that ends the
// pool's episode (the caller logs it).
func (p *persistent) loopEndLocked() bool {
	p.looping--
	if p.looping > 0 {
		return false
	}
	p.metrics.crashLooping.Set(0)
	return true
}

// close stops the pool and waits for every child to be gone.
func (p *persistent) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.seats.Wait()
		return
	}
	p.closed = true
	close(p.stop)
	p.failWaitersLocked(errPoolClosed)
	idle := p.idle
	p.idle = nil
	for _, c := range idle {
		p.markDownLocked(c, execReasonStopped)
	}
	p.mu.Unlock()
	p.seats.Wait()
}
