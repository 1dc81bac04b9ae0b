package store

import (
	"fmt"
	"os"
	"time"

	"github.com/go-json-experiment/json"
)

// Customer is a record of the workspace's customer list, as the built-in
// tools customer.get and customer.search return it.
type Customer struct {
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Email   string    `json:"email"`
	Company string    `json:"company,omitempty"`
	Plan    string    `json:"plan,omitempty"`
	Tags    []string  `json:"tags,omitempty"`
	Created time.Time `json:"createdAt,omitzero"`
}

// Note is an internal note, written by note.add.
type Note struct {
	ID         string    `json:"id"`
	CustomerID string    `json:"customerId,omitempty"`
	Body       string    `json:"body"`
	Tags       []string  `json:"tags,omitempty"`
	Author     string    `json:"-"` // who wrote it: an agent name or a person
	Run        string    `json:"-"` // the run and step that wrote it, "" when none
	Step       string    `json:"-"`
	Created    time.Time `json:"createdAt"`
}

// TodayItem is an item on the operator's Today list, surfaced by
// today.surface.
type TodayItem struct {
	ID         string // "today_" and 16 hex digits
	Title      string // one-line headline
	Summary    string // why it needs attention (Markdown)
	Priority   string // low, normal or high ("" means normal)
	CustomerID string // "" when none
	Link       string // "" when none
	Run, Step  string // the run and step that surfaced it, "" when none
	Created    time.Time
	Dismissed  time.Time // zero while on the list
}

// ReadSeed reads a customer seed file: a JSON array of [Customer] objects
// (id, name, email, and optionally company, plan, tags, createdAt), read
// strictly (unknown members are errors). Every customer needs an id.
func ReadSeed(path string) ([]Customer, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cs []Customer
	if err := json.Unmarshal(src, &cs, json.RejectUnknownMembers(true)); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for i, c := range cs {
		if c.ID == "" {
			return nil, fmt.Errorf("%s: customer %d has no id", path, i)
		}
	}
	return cs, nil
}
