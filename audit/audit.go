// Package audit defines the tamper-evident audit log of a run: an
// append-only list of records, each carrying the SHA-256 of the record
// before it and of its own canonical content, so that changing, removing
// or reordering any record breaks the chain at a place [Verify] names.
//
// Canonical content is the RFC 8785 (JSON Canonicalization Scheme) form of
// the record's JSON without its "hash" member. The hash of record n is
// SHA-256 over the bytes of that canonical form, which includes "prev",
// the hex hash of record n-1 (64 zeros for the first record of a run).
package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Genesis is the "prev" of a run's first record.
var Genesis = strings.Repeat("0", 64)

// Record is one audit log entry. Seq counts from 1 within a run. Time is
// RFC 3339 with nanoseconds, UTC. Kind is a dotted event name (for example
// "call.refused"); Step and Tool name what it concerns ("" when nothing);
// Tool is the tool name exactly as the agent sent it. Data holds the
// event's details as a JSON object; it never holds a secret value.
type Record struct {
	Run  string         `json:"run"`
	Seq  int64          `json:"seq"`
	Time string         `json:"time"`
	Kind string         `json:"kind"`
	Step string         `json:"step,omitempty"`
	Tool string         `json:"tool,omitempty"`
	Data jsontext.Value `json:"data,omitempty"`
	Prev string         `json:"prev"`
	Hash string         `json:"hash,omitempty"`
}

// Canonical returns the RFC 8785 canonical JSON of r without its hash.
func (r Record) Canonical() ([]byte, error) {
	if b, ok := r.canonicalPlain(); ok {
		return b, nil
	}
	return r.canonicalEncoded()
}

// canonicalEncoded is Canonical through the JSON encoder: any record.
func (r Record) canonicalEncoded() ([]byte, error) {
	r.Hash = ""
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("audit: encoding record %d: %w", r.Seq, err)
	}
	v := jsontext.Value(b)
	if err := v.Canonicalize(); err != nil {
		return nil, fmt.Errorf("audit: canonicalizing record %d: %w", r.Seq, err)
	}
	return v, nil
}

// canonicalPlain writes the canonical form directly, the members in
// RFC 8785 order (data, kind, prev, run, seq, step, time, tool), for the
// usual record: every string member plain (printable ASCII without '"'
// or '\\', which RFC 8785 writes as they are) and data, when present, a
// non-empty object once canonicalized. Any other record (ok false) takes
// the general path through the JSON encoder; TestCanonicalPlainMatches
// holds the two to the same bytes.
func (r Record) canonicalPlain() (_ []byte, ok bool) {
	var data jsontext.Value
	return r.appendPlain(nil, &data)
}

// appendPlain is canonicalPlain appending to b, canonicalizing the data
// in *data (room reused from one record to the next).
func (r *Record) appendPlain(b []byte, data *jsontext.Value) (_ []byte, ok bool) {
	for _, s := range [...]string{r.Run, r.Time, r.Kind, r.Step, r.Tool, r.Prev} {
		if !plain(s) {
			return nil, false
		}
	}
	if r.Data != nil {
		*data = append((*data)[:0], r.Data...)
		if data.Canonicalize() != nil || data.Kind() != '{' || len(*data) == 2 {
			return nil, false
		}
	}
	if b == nil {
		b = make([]byte, 0, 192+len(r.Run)+len(r.Kind)+len(r.Step)+len(r.Tool)+len(*data))
	}
	b = append(b, '{')
	if r.Data != nil {
		b = append(b, `"data":`...)
		b = append(b, *data...)
		b = append(b, ',')
	}
	b = appendString(b, "kind", r.Kind)
	b = appendString(b, "prev", r.Prev)
	b = appendString(b, "run", r.Run)
	b = append(b, `"seq":`...)
	b = strconv.AppendInt(b, r.Seq, 10)
	b = append(b, ',')
	if r.Step != "" {
		b = appendString(b, "step", r.Step)
	}
	b = appendString(b, "time", r.Time)
	if r.Tool != "" {
		b = appendString(b, "tool", r.Tool)
	}
	b[len(b)-1] = '}' // the last member's comma
	return b, true
}

// appendString appends "name":"value", to b; value is plain.
func appendString(b []byte, name, value string) []byte {
	b = append(b, '"')
	b = append(b, name...)
	b = append(b, `":"`...)
	b = append(b, value...)
	return append(b, `",`...)
}

// plain reports whether s is printable ASCII without '"' or '\\'.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// Seal sets r.Prev to prev and r.Hash to the hash of r's canonical
// content, and returns the sealed record.
func Seal(r Record, prev string) (Record, error) {
	r.Prev = prev
	c, err := r.Canonical()
	if err != nil {
		return r, err
	}
	sum := sha256.Sum256(c)
	r.Hash = hex.EncodeToString(sum[:])
	return r, nil
}

// Problem is a break in the chain found by [Verify].
type Problem struct {
	Seq     int64
	Message string
}

// Verify checks a run's records in order: sequence numbers 1, 2, 3, ...
// without gaps, each prev equal to the hash before it, and each hash equal
// to the SHA-256 of the record's canonical content. A gap is reported once
// (the records around it are not reported again for not linking). When lastSeq and
// lastHash are given (the run's head as recorded apart from the log; 0 and
// "" to skip), the log must end there, so truncation is found too. It
// returns every problem found; none means the chain verifies.
func Verify(records []Record, lastSeq int64, lastHash string) []Problem {
	var v Verifier
	for _, r := range records {
		v.Add(r)
	}
	return v.End(lastSeq, lastHash)
}

// A Verifier is [Verify] one record at a time, for a log read in
// batches: what it keeps is the problems found and the last record's seq
// and hash, whatever the log's length. Add the records in the order
// read, then End once. The zero value is ready to use.
type Verifier struct {
	probs   []Problem
	prev    string // the hash of the record before the next one ("" before the first: Genesis)
	prevSeq int64
	n       int64
	buf     []byte         // the last record's canonical form
	data    jsontext.Value // the last record's data, canonicalized
}

// Add checks the next record of the log.
func (v *Verifier) Add(r Record) {
	prev := v.prev
	if v.n == 0 {
		prev = Genesis
	}
	v.n++
	gap := false
	switch {
	case r.Seq > v.prevSeq+1:
		gap = true
		if r.Seq == v.prevSeq+2 {
			v.probs = append(v.probs, Problem{r.Seq, fmt.Sprintf("record %d is missing: the log goes from record %d to record %d (a record was removed)", v.prevSeq+1, v.prevSeq, r.Seq)})
		} else {
			v.probs = append(v.probs, Problem{r.Seq, fmt.Sprintf("records %d to %d are missing: the log goes from record %d to record %d (records were removed)", v.prevSeq+1, r.Seq-1, v.prevSeq, r.Seq)})
		}
	case r.Seq <= v.prevSeq:
		gap = true
		v.probs = append(v.probs, Problem{r.Seq, fmt.Sprintf("record %d is out of sequence: it comes after record %d (records were reordered or repeated)", r.Seq, v.prevSeq)})
	}
	if r.Prev != prev && !gap {
		v.probs = append(v.probs, Problem{r.Seq, fmt.Sprintf("record %d does not follow the record before it: its prev is %s, the hash before it is %s", r.Seq, short(r.Prev), short(prev))})
	}
	// What Seal(r, r.Prev) would give, its canonical form written in
	// room kept from the record before (a long log is checked without
	// allocating per record).
	c, ok := r.appendPlain(v.buf[:0], &v.data)
	var err error
	if ok {
		v.buf = c
	} else {
		c, err = r.canonicalEncoded()
	}
	var sum [sha256.Size]byte
	var hash [2 * sha256.Size]byte
	if err == nil {
		sum = sha256.Sum256(c)
		hex.Encode(hash[:], sum[:])
	}
	switch {
	case err != nil:
		v.probs = append(v.probs, Problem{r.Seq, fmt.Sprintf("record %d cannot be hashed: %v", r.Seq, err)})
	case string(hash[:]) != r.Hash:
		v.probs = append(v.probs, Problem{r.Seq, fmt.Sprintf("record %d was altered: its content hashes to %s but it says %s", r.Seq, short(string(hash[:])), short(r.Hash))})
	}
	v.prev, v.prevSeq = r.Hash, r.Seq
}

// Records is how many records were added.
func (v *Verifier) Records() int64 { return v.n }

// End checks that the log ends at the run's head (lastSeq and lastHash,
// as [Verify] takes them; 0 and "" to skip) and returns every problem
// found; none means the chain verifies.
func (v *Verifier) End(lastSeq int64, lastHash string) []Problem {
	probs := v.probs
	prev := v.prev
	if v.n == 0 {
		prev = Genesis
	}
	if lastSeq > 0 {
		switch {
		case v.prevSeq < lastSeq:
			probs = append(probs, Problem{v.prevSeq, fmt.Sprintf("the log ends at record %d but the run's head is record %d (%s): records were removed from the end", v.prevSeq, lastSeq, short(lastHash))})
		case v.prevSeq > lastSeq || prev != lastHash:
			probs = append(probs, Problem{v.prevSeq, fmt.Sprintf("the log ends at record %d (%s) but the run's head is record %d (%s): the log or the head was changed", v.prevSeq, short(prev), lastSeq, short(lastHash))})
		}
	}
	return probs
}

// EndHead is [Verifier.End] for a head read from the store's run row,
// where a run without records has head 0: a zero head with records
// after it is a head that was reset, a problem too (End skips the head
// check for a zero head).
func (v *Verifier) EndHead(lastSeq int64, lastHash string) []Problem {
	probs := v.End(lastSeq, lastHash)
	if lastSeq == 0 && v.n > 0 {
		probs = append(probs, Problem{v.n, fmt.Sprintf("the run's head says it has no records but the log has %d: the head was reset", v.n)})
	}
	return probs
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
