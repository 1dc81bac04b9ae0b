package postgres_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/internal/pgtest"
	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/store/postgres"
)

// TestLockRunAcrossStores: two stores on one schema (two processes, as
// far as the server knows: each lock has a session of its own) exclude
// each other; a store on another schema of the same database does not
// share their locks; Close releases the locks a store still holds.
func TestLockRunAcrossStores(t *testing.T) {
	url := pgtest.Schema(t)
	a, b := openURL(t, url, nil), openURL(t, url, nil)
	other := openTest(t)
	unlock, err := a.LockRun("run_a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.LockRun("run_a"); !errors.Is(err, store.ErrRunBusy) {
		t.Fatalf("the other store's lock: %v, want ErrRunBusy", err)
	}
	u, err := other.LockRun("run_a")
	if err != nil {
		t.Fatalf("a store on another schema: %v", err)
	}
	u()
	unlock()
	unlock() // twice is harmless
	ub, err := b.LockRun("run_a")
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	ub() // after Close: harmless
	again, err := a.LockRun("run_a")
	if err != nil {
		t.Fatalf("after the holder closed: %v", err)
	}
	again()
	if _, err := b.LockRun("run_b"); !errors.Is(err, store.ErrClosed) {
		t.Errorf("LockRun after Close: %v, want ErrClosed", err)
	}
}

const lockChildEnv = "OPENPLAYBOOK_PG_LOCK_URL"

// TestHelperLockHolder is the child of TestLockRunDiesWithItsProcess: it
// takes run_a's lock, says "locked" and waits to be killed.
func TestHelperLockHolder(t *testing.T) {
	url := os.Getenv(lockChildEnv)
	if url == "" {
		t.Skip("the child process of TestLockRunDiesWithItsProcess")
	}
	s, err := postgres.Open(bg, url, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	if _, err := s.LockRun("run_a"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	fmt.Println("locked")
	time.Sleep(time.Minute)
	os.Exit(0)
}

// TestLockRunDiesWithItsProcess: another process's lock makes LockRun
// ErrRunBusy; once that process is killed (-9: no unlock), its session
// ends and the run can be locked again.
func TestLockRunDiesWithItsProcess(t *testing.T) {
	url := pgtest.Schema(t)
	s := openURL(t, url, nil)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperLockHolder$", "-test.count=1")
	cmd.Env = append(os.Environ(), lockChildEnv+"="+url)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "locked" {
	}
	if sc.Text() != "locked" {
		t.Fatal("the child did not take the lock")
	}
	if _, err := s.LockRun("run_a"); !errors.Is(err, store.ErrRunBusy) {
		t.Fatalf("while another process holds it: %v, want ErrRunBusy", err)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	// The server notices the closed socket at once; wait for its backend
	// to go (bounded: a lock that never comes back fails the test).
	deadline := time.Now().Add(30 * time.Second)
	for {
		unlock, err := s.LockRun("run_a")
		if err == nil {
			unlock()
			return
		}
		if !errors.Is(err, store.ErrRunBusy) || time.Now().After(deadline) {
			t.Fatalf("after the holder died: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
