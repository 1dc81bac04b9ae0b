package openairesponses

import "time"

// SetClock sets the clock d reads its step deadline on.
func SetClock(d *Driver, now func() time.Time) { d.now = now }
