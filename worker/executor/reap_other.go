//go:build !linux

package executor

import "log/slog"

// StartReaper does nothing outside Linux: there is no child subreaper, and
// a worker is not PID 1 of a container there.
func StartReaper(*slog.Logger) (stop func()) { return func() {} }

type reaper struct{}

func newReaper() *reaper { return &reaper{} }
func (*reaper) reap()    {}
