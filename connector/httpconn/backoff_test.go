package httpconn

import (
	"testing"
	"time"
)

// TestBackoffJitter: the waits are spread over [d/2, d) and not all equal.
func TestBackoffJitter(t *testing.T) {
	for attempt := 1; attempt <= 4; attempt++ {
		d := time.Duration(500<<(attempt-1)) * time.Millisecond
		seen := map[time.Duration]bool{}
		for range 50 {
			b := backoff(attempt)
			if b < d/2 || b >= d {
				t.Fatalf("backoff(%d) = %v, outside [%v, %v)", attempt, b, d/2, d)
			}
			seen[b] = true
		}
		if len(seen) < 10 {
			t.Errorf("backoff(%d) took %d values in 50 draws: no jitter", attempt, len(seen))
		}
	}
}
