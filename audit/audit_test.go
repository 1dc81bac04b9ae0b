package audit

import (
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

func chain(t *testing.T, n int) []Record {
	t.Helper()
	var out []Record
	prev := Genesis
	for i := 1; i <= n; i++ {
		r, err := Seal(Record{Run: "run_1", Seq: int64(i), Time: "2026-11-30T09:00:00.000000001Z", Kind: "call.allowed", Step: "recover", Tool: "customer.get", Data: jsontext.Value(`{"b":1,"a":"x"}`)}, prev)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
		prev = r.Hash
	}
	return out
}

func TestVerifyIntactChain(t *testing.T) {
	rs := chain(t, 5)
	if p := Verify(rs, 5, rs[4].Hash); len(p) != 0 {
		t.Fatalf("intact chain: %v", p)
	}
}

func TestVerifyFindsTampering(t *testing.T) {
	tests := []struct {
		name    string
		tamper  func([]Record) []Record
		wantSeq int64
		want    string
	}{
		{"altered data", func(rs []Record) []Record { rs[2].Data = jsontext.Value(`{"a":"y","b":1}`); return rs }, 3, "altered"},
		{"altered tool", func(rs []Record) []Record { rs[1].Tool = "charge.refund"; return rs }, 2, "altered"},
		{"removed record", func(rs []Record) []Record { return append(rs[:2], rs[3:]...) }, 4, "record 3 is missing"},
		{"removed records", func(rs []Record) []Record { return append(rs[:1], rs[3:]...) }, 4, "records 2 to 3 are missing"},
		{"swapped records", func(rs []Record) []Record { rs[1], rs[2] = rs[2], rs[1]; return rs }, 3, "record 2 is missing"},
		{"truncated", func(rs []Record) []Record { return rs[:4] }, 4, "removed from the end"},
		{"rehashed without relinking", func(rs []Record) []Record {
			rs[2].Kind = "call.refused"
			rs[2], _ = Seal(rs[2], rs[2].Prev)
			return rs
		}, 4, "does not follow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := chain(t, 5)
			head := rs[4].Hash
			probs := Verify(tt.tamper(rs), 5, head)
			if len(probs) == 0 {
				t.Fatal("tampering not found")
			}
			if probs[0].Seq != tt.wantSeq || !strings.Contains(probs[0].Message, tt.want) {
				t.Errorf("first problem = %+v, want record %d %q", probs[0], tt.wantSeq, tt.want)
			}
		})
	}
}

// TestCanonicalIgnoresKeyOrder: data written with another member order or
// spacing hashes the same (RFC 8785), so re-encoding by a database cannot
// break the chain.
func TestCanonicalIgnoresKeyOrder(t *testing.T) {
	a, _ := Seal(Record{Run: "r", Seq: 1, Kind: "k", Data: jsontext.Value(`{"b":1,"a":[1.0,"é"]}`)}, Genesis)
	b, _ := Seal(Record{Run: "r", Seq: 1, Kind: "k", Data: jsontext.Value(`{ "a" : [1, "\u00e9"], "b" : 1 }`)}, Genesis)
	if a.Hash != b.Hash {
		t.Errorf("hashes differ: %s vs %s", a.Hash, b.Hash)
	}
}

// TestVerifyMiddleDeletionIsNamedOnce: removing a record in the middle is
// one problem at the record after it, not one per later record, and not a
// truncation.
func TestVerifyMiddleDeletionIsNamedOnce(t *testing.T) {
	rs := chain(t, 8)
	head := rs[7].Hash
	probs := Verify(append(rs[:3], rs[4:]...), 8, head)
	if len(probs) != 1 || probs[0].Seq != 5 || !strings.Contains(probs[0].Message, "record 4 is missing") {
		t.Fatalf("problems = %+v, want one naming record 4 as missing", probs)
	}
}
