package executor

import (
	"errors"
	"fmt"
	"time"
)

// seat keeps one child of the pool alive: it starts a child, hands it to
// the pool, waits until it leaves service and starts the next, backing off
// while children die before they answer a task (a crash loop).
func (p *persistent) seat() {
	defer p.seats.Done()
	deaths := 0 // consecutive children that died before answering
	for first := true; ; first = false {
		if deaths > 0 && !after(crashBackoff(deaths), p.ctx.Done()) {
			return
		}
		// Until a start after no failure ended, the executor is not
		// reported unavailable.
		fresh := deaths == 0
		if !first { // startLocked counted every seat's first start
			p.mu.Lock()
			p.starting++
			if fresh {
				p.fresh++
			}
			p.mu.Unlock()
		}
		c, why, err := p.sp.startChild(p.ctx, p.opts.ReadyTimeout, p.reaped)
		p.mu.Lock()
		p.starting--
		if fresh {
			p.fresh--
		}
		if err != nil {
			closed := p.closed
			if why != reasonKilled {
				deaths++
			}
			if !closed && (why == reasonStartFailed || deaths >= crashLoopAfter) {
				p.startErr, p.startCause = err, readyCause(why, err)
			}
			p.failFastLocked()
			p.mu.Unlock()
			if closed {
				return
			}
			p.changed()
			p.metrics.restarts.WithLabelValues(why).Inc()
			if why != reasonKilled { // else not the executor's fault
				p.noteDeath(deaths, why, err.Error())
			}
			continue
		}
		c.busy = false
		c.inLoop = deaths >= crashLoopAfter
		c.readyAt = time.Now()
		p.everReady = true
		closePipes := false
		switch {
		case c.down:
			// Reaped right after its ready frame: the seat closes its pipes.
			closePipes = c.closePend
			p.failFastLocked()
		case p.closed:
			p.markDownLocked(c, reasonStopped)
		default:
			if c.inLoop || p.unavailableLocked() {
				c.probation = true
				p.probation++
				time.AfterFunc(probation, func() {
					p.mu.Lock()
					trusted := p.trustLocked(c)
					p.mu.Unlock()
					if trusted {
						p.changed()
					}
				})
			} else {
				p.startErr, p.startCause = nil, ""
			}
			c.live = true
			p.live++
			p.metrics.ready.Set(float64(p.live))
			p.handLocked(c)
		}
		p.mu.Unlock()
		if closePipes {
			c.closePipes()
		}
		p.changed()

		<-c.downCh
		p.mu.Lock()
		why, answered, closed := c.downWhy, c.answered, p.closed
		ended := false
		if c.inLoop && why != reasonExited {
			c.inLoop = false
			ended = p.loopEndLocked()
		}
		p.mu.Unlock()
		if ended {
			p.log.Info("executor_crash_loop_ended")
		}
		if why == reasonStopped || closed {
			if why == reasonStopped {
				c.retire(p.opts.StopGrace)
			}
			<-c.exited
			return
		}
		p.metrics.restarts.WithLabelValues(why).Inc()
		if answered > 0 || why != reasonExited {
			deaths = 0
			continue
		}
		<-c.exited
		deaths++
		detail := "executor exited before answering a task (" + c.exitText() + ")" + tailText(c.stderr.take())
		if deaths >= crashLoopAfter && time.Since(c.readyAt) < probation {
			// No better than children that never get ready.
			p.mu.Lock()
			if !p.closed {
				p.startErr = fmt.Errorf("%w: executor.binary_path %q: %s", ErrStart, p.opts.BinaryPath, detail)
				p.startCause = "executor children exit right after their ready frame (crash loop)"
				p.failFastLocked()
			}
			p.mu.Unlock()
			p.changed()
		}
		p.noteDeath(deaths, why, detail)
	}
}

// readyCause is a start-up failure in short, without the child's output.
func readyCause(why string, err error) string {
	var re *readyErr
	switch {
	case why == reasonStartFailed:
		return startCause(err)
	case errors.As(err, &re):
		return "executor children do not get ready (" + re.cause + ")"
	}
	return "executor children do not get ready"
}

// crashBackoff is the wait before start n+1 after n start-up deaths.
func crashBackoff(n int) time.Duration {
	if n <= 1 {
		return 0
	}
	return backoffAt(crashBackoffBase, crashBackoffMax, n-2)
}

// noteDeath counts a start-up death; the first seat to reach
// crashLoopAfter opens the pool's crash-loop episode.
func (p *persistent) noteDeath(n int, why, detail string) {
	if n != crashLoopAfter {
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
			"detail", "executor children keep dying before they answer a task; restarts back off up to "+crashBackoffMax.String())
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
	p.stop()
	p.endWaitersLocked(errPoolClosed, true)
	idle := p.idle
	p.idle = nil
	for _, c := range idle {
		p.markDownLocked(c, reasonStopped)
	}
	p.mu.Unlock()
	p.seats.Wait()
}
