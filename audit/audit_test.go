package audit

import (
	"bytes"
	"math/rand/v2"
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

// The direct canonical form of a plain record is byte for byte what the
// encoder and RFC 8785 canonicalization give, and a record that is not
// plain takes that path: random records with plain and unusual strings,
// data objects in any member order, spacing and number spelling, and
// data that is empty, null, not an object or not JSON.
func TestCanonicalPlainMatches(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	strs := []string{"", "run_0123abcd", "2026-12-01T16:22:30.115361374Z", "call.succeeded", "mcp.everything.echo", Genesis,
		"a b", "~!@#$%^&*()", "quo\"te", "back\\slash", "tab\t", "nul\x00", "é", "\u2028", "\xff", "<>&", "\x7f"}
	datas := []string{"", `{"index":3,"attempt":1}`, `{ "b" : 1 , "a" : [ 2 , { "z":1,"y":2 } ] }`, `{"n":1.50,"m":1e3,"k":-0}`,
		`{"s":"é\u00e9\n","t":"\ud83d\ude00"}`, `{}`, `{ }`, `null`, `[]`, `[1]`, `"x"`, `7`, `{"a":`, `{"a":1,"a":2}`,
		`{"argsDigest":"` + Genesis + `","defDigest":"abc","index":0,"attempt":1}`}
	plainSeen, other := 0, 0
	for i := range 20000 {
		pick := func() string { return strs[r.IntN(len(strs))] }
		rec := Record{Run: pick(), Seq: int64(r.IntN(1 << 20)), Time: pick(), Kind: pick(), Step: pick(), Tool: pick(),
			Data: jsontext.Value(datas[r.IntN(len(datas))]), Prev: pick(), Hash: pick()}
		if len(rec.Data) == 0 && r.IntN(2) == 0 {
			rec.Data = nil // no data, as most records are written
		}
		if i%2 == 0 { // plain, as records usually are
			rec.Run, rec.Time, rec.Kind, rec.Step, rec.Tool, rec.Prev = strs[1], strs[2], strs[3], strs[r.IntN(2)*4], strs[r.IntN(2)*4], strs[5]
		}
		want, wantErr := rec.canonicalEncoded()
		got, ok := rec.canonicalPlain()
		if !ok {
			other++
			continue
		}
		plainSeen++
		if wantErr != nil {
			t.Fatalf("%+v: written directly as %s; the encoder refuses it: %v", rec, got, wantErr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%+v:\ndirect  %s\nencoder %s", rec, got, want)
		}
		if c, err := rec.Canonical(); err != nil || !bytes.Equal(c, want) {
			t.Fatalf("Canonical = %s, %v", c, err)
		}
	}
	if plainSeen < 3000 || other < 3000 {
		t.Errorf("%d plain and %d other records: the test does not cover both paths", plainSeen, other)
	}
}
