package storetest

import (
	"bytes"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/store"
)

// testVault: an engine's credential vault ([store.Vault]) keeps bytes
// verbatim, writes one of two racing writers over a version, gives a lease
// to one of many racing holders until it is released or runs out, and
// deletes an entry with its lease.
func testVault(t *testing.T, openTest Opener) {
	s := openTest(t)
	v, ok := s.(store.Vault)
	if !ok {
		t.Fatalf("%T does not keep a credential vault (store.Vault)", s)
	}
	if _, err := v.Credential(bg, "mcp:linear"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("reading a missing entry: %v; want ErrNotFound", err)
	}
	sealed := []byte("\x00sealed\xff bytes \u2028")
	ver, err := v.PutCredential(bg, "mcp:linear", sealed, 0)
	if err != nil || ver != 1 {
		t.Fatalf("first write: version %d, %v; want 1", ver, err)
	}
	if _, err := v.PutCredential(bg, "mcp:linear", []byte("again"), 0); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a second create: %v; want ErrConflict", err)
	}
	c, err := v.Credential(bg, "mcp:linear")
	if err != nil || !bytes.Equal(c.Sealed, sealed) || c.Version != 1 || c.Updated.IsZero() {
		t.Fatalf("read back: %+v, %v", c, err)
	}
	// Of eight writers over version 1, exactly one wins.
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nv, err := v.PutCredential(bg, "mcp:linear", []byte("w"+strconv.Itoa(i)), 1)
			switch {
			case err == nil && nv == 2:
				mu.Lock()
				wins++
				mu.Unlock()
			case errors.Is(err, store.ErrConflict):
			default:
				t.Errorf("racing write: %d, %v", nv, err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d of 8 writers over one version won; want 1", wins)
	}
	if _, err := v.PutCredential(bg, "connection:stripe", []byte("s"), 0); err != nil {
		t.Fatal(err)
	}
	all, err := v.Credentials(bg)
	if err != nil || len(all) != 2 || all[0].Name != "connection:stripe" || all[1].Name != "mcp:linear" || all[1].Version != 2 {
		t.Fatalf("list: %+v, %v", all, err)
	}

	// Leases: one of many racing holders; the holder may renew; another
	// gets it once it is released or has run out.
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	until := t0.Add(store.CredentialLease)
	got := 0
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := v.LeaseCredential(bg, "mcp:new", "h"+strconv.Itoa(i), t0, until)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				got++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if got != 1 {
		t.Fatalf("%d of 8 racing holders got the lease; want 1", got)
	}
	var holder string
	for i := range 8 {
		if ok, _ := v.LeaseCredential(bg, "mcp:new", "h"+strconv.Itoa(i), t0.Add(time.Second), until); ok {
			holder = "h" + strconv.Itoa(i)
			break
		}
	}
	if holder == "" {
		t.Fatal("the holder could not renew its lease")
	}
	if ok, err := v.LeaseCredential(bg, "mcp:new", "other", t0.Add(time.Second), until); ok || err != nil {
		t.Fatalf("a lease held by another: %v, %v; want refused", ok, err)
	}
	if ok, err := v.LeaseCredential(bg, "mcp:new", "other", until, until.Add(time.Minute)); !ok || err != nil {
		t.Fatalf("a lease that ran out: %v, %v; want taken", ok, err)
	}
	if err := v.ReleaseCredential(bg, "mcp:new", holder); err != nil {
		t.Fatal(err)
	}
	if ok, _ := v.LeaseCredential(bg, "mcp:new", "third", until, until.Add(time.Minute)); ok {
		t.Fatal("a release by a former holder ended the current holder's lease")
	}
	if err := v.ReleaseCredential(bg, "mcp:new", "other"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := v.LeaseCredential(bg, "mcp:new", "third", until, until.Add(time.Minute)); !ok {
		t.Fatal("a released lease was not free")
	}

	if err := v.DeleteCredential(bg, "mcp:linear"); err != nil {
		t.Fatal(err)
	}
	if err := v.DeleteCredential(bg, "mcp:linear"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleting twice: %v; want ErrNotFound", err)
	}
	if _, err := v.PutCredential(bg, "mcp:linear", sealed, 0); err != nil {
		t.Fatalf("a deleted entry could not be written anew: %v", err)
	}
}
