//go:build !linux

package executor

// pollFD is unused outside Linux.
type pollFD struct{}

// initQuiet does nothing outside Linux: quiet always says "look".
func (c *child) initQuiet() {}

// quiet reports that both pipes must be looked at with reads.
func (c *child) quiet() (out, errOut bool) { return true, true }
