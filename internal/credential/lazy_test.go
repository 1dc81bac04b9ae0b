package credential

import (
	"regexp"
	"sync"
	"testing"
)

// TestPatternsCompile compiles every kind's pattern: they are compiled on
// first use ([lazyRegexp]), so an invalid one would otherwise panic only
// when a string first holds that kind's literal.
func TestPatternsCompile(t *testing.T) {
	for i, k := range kinds {
		re := k.re()
		if re == nil || k.re() != re {
			t.Errorf("kinds[%d] (%s): re() = %p then %p, want one compiled pattern", i, k.name, re, k.re())
		}
	}
	if basic.re() == nil {
		t.Error("basic.re() = nil")
	}
}

// TestFirstUseConcurrent scans the secrets corpus from 8 goroutines at
// once with every kind's pattern not yet compiled, so the first
// compilation of each happens under contention; run it with -race. Every
// goroutine must find what a serial scan finds, and each kind must end
// with one compiled pattern.
func TestFirstUseConcurrent(t *testing.T) {
	secrets := readCorpus(t, "secrets.txt")
	want := make([]string, len(secrets))
	for i, s := range secrets {
		want[i], _ = Find(s[1])
	}
	saved := make([]func() *regexp.Regexp, len(kinds))
	for i := range kinds {
		saved[i] = kinds[i].re
		kinds[i].re = lazyRegexp(saved[i]().String())
	}
	t.Cleanup(func() {
		for i := range kinds {
			kinds[i].re = saved[i]
		}
	})
	const workers = 8
	got := make([][]string, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			got[w] = make([]string, len(secrets))
			for i, s := range secrets {
				got[w][i], _ = Find(s[1])
			}
		})
	}
	wg.Wait()
	for w := range workers {
		for i := range secrets {
			if got[w][i] != want[i] {
				t.Errorf("worker %d, %s: Find = %q, serial %q", w, secrets[i][0], got[w][i], want[i])
			}
		}
	}
	for i, k := range kinds {
		if k.re().String() != saved[i]().String() {
			t.Errorf("kinds[%d] (%s): pattern %q, want %q", i, k.name, k.re(), saved[i]())
		}
	}
}
