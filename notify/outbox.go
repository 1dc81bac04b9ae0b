package notify

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
)

// FileOutbox is an [Outbox] kept in one JSON file, written whole to a
// temporary file, synced and renamed over it on every change: a crash
// leaves the old or the new file, never half of one. It suits a single
// server with few notifications; the store's engines are where a shared
// outbox belongs (see docs/console.md, "Notifications").
type FileOutbox struct {
	path string
	mu   sync.Mutex
	ds   []Delivery
}

// OpenFileOutbox reads the outbox at path, or starts an empty one when
// the file does not exist.
func OpenFileOutbox(path string) (*FileOutbox, error) {
	o := &FileOutbox{path: path}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return o, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &o.ds); err != nil {
		return nil, fmt.Errorf("notify: the outbox %s is not a JSON list of deliveries: %w", path, err)
	}
	return o, nil
}

func (o *FileOutbox) find(endpoint, id string) int {
	for i, d := range o.ds {
		if d.Endpoint == endpoint && d.Event.ID == id {
			return i
		}
	}
	return -1
}

// save writes the outbox; o.mu is held.
func (o *FileOutbox) save() error {
	b, err := json.Marshal(o.ds)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(o.path), filepath.Base(o.path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), o.path)
}

// Add implements [Outbox].
func (o *FileOutbox) Add(_ context.Context, d Delivery) (bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.find(d.Endpoint, d.Event.ID) >= 0 {
		return false, nil
	}
	o.ds = append(o.ds, d)
	if err := o.save(); err != nil {
		o.ds = o.ds[:len(o.ds)-1]
		return false, err
	}
	return true, nil
}

// Due implements [Outbox].
func (o *FileOutbox) Due(_ context.Context, now time.Time, limit int) ([]Delivery, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []Delivery
	for _, d := range o.ds {
		if !d.Done && !d.Dead && !d.Next.After(now) {
			out = append(out, d)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Next.Before(out[j].Next) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Update implements [Outbox].
func (o *FileOutbox) Update(_ context.Context, d Delivery) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	i := o.find(d.Endpoint, d.Event.ID)
	if i < 0 {
		return fmt.Errorf("notify: no delivery of %s to %s in the outbox", d.Event.ID, d.Endpoint)
	}
	was := o.ds[i]
	o.ds[i] = d
	if err := o.save(); err != nil {
		o.ds[i] = was
		return err
	}
	return nil
}

// NextDue implements [Outbox].
func (o *FileOutbox) NextDue(context.Context) (time.Time, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var next time.Time
	for _, d := range o.ds {
		if !d.Done && !d.Dead && (next.IsZero() || d.Next.Before(next)) {
			next = d.Next
		}
	}
	return next, nil
}

// Deliveries returns every delivery the outbox holds.
func (o *FileOutbox) Deliveries() []Delivery {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]Delivery(nil), o.ds...)
}
