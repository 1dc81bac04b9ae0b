package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/spf13/cobra"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/builtin"
	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/internal/textsafe"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/store/engine"
)

// storeFor opens the store a harness names (without connecting anything
// else).
func (c *CLI) storeFor(harnessPath string) (store.Store, *harness.Harness, error) {
	h, hds, err := harness.Load(harnessPath)
	if err != nil {
		return nil, nil, ioError(fmt.Errorf("reading the harness: %w", err))
	}
	for _, d := range hds {
		if d.Severity == 2 {
			return nil, nil, &exitError{code: ExitUsage, err: fmt.Errorf("%s:%d:%d: %s [%s]", d.File, d.Line, d.Column, d.Message, d.Rule)}
		}
	}
	if h.Store.Postgres == nil {
		if _, err := os.Stat(h.Store.SQLite); err != nil {
			return nil, nil, &exitError{code: ExitProblems, err: fmt.Errorf("there is no store at %s yet: no run was started with this harness (%v)", h.Store.SQLite, err)}
		}
	}
	st, err := engine.Open(context.Background(), h, nil)
	if err != nil {
		return nil, nil, ioError(err)
	}
	return st, h, nil
}

func (c *CLI) statusCommand() *cobra.Command {
	var harnessPath string
	format := newChoice("text", []string{"text", "json"})
	cmd := &cobra.Command{
		Use:                   "status [--harness FILE] [--format text|json] [RUN]",
		DisableFlagsInUseLine: true,
		Short:                 "List runs and what each waits for",
		Long: `Status lists the runs in the harness's store: status, current step, and
what each waits for with the command that decides it. Given one RUN, it also
shows each step attempt with its output (what a gate's reviewer reads) and
the tokens its model turns used, the run's tokens in all, and the exact
arguments of every call waiting for approval.`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: c.completeRuns,
		RunE: func(cmd *cobra.Command, args []string) error {
			st, _, err := c.storeFor(harnessPath)
			if err != nil {
				return err
			}
			defer st.Close()
			ctx := ctxOf(cmd)
			var runs []store.Run
			if len(args) == 1 {
				r, err := st.GetRun(ctx, args[0])
				if err != nil {
					return &exitError{code: ExitProblems, err: runError(err, args[0], harnessPath)}
				}
				runs = []store.Run{r}
			} else if runs, err = st.ListRuns(ctx); err != nil {
				return ioError(err)
			}
			var out []runtime.RunStatus
			for _, r := range runs {
				rs, err := runtime.StatusOf(ctx, st, r, len(args) == 1)
				if err != nil {
					return ioError(err)
				}
				out = append(out, rs)
			}
			if format.value == "json" {
				if out == nil {
					out = []runtime.RunStatus{}
				}
				b, _ := json.Marshal(out, jsontext.WithIndent("  "))
				fmt.Fprintln(c.stdout(), string(b))
				return nil
			}
			// Text for people: everything that comes from a document, an
			// agent or a tool is escaped (textsafe), so that a control or
			// bidi character can neither hide nor reorder what is shown.
			L := textsafe.Line
			tw := tabwriter.NewWriter(c.stdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "RUN\tPLAYBOOK\tSTATUS\tSTEP\tUPDATED")
			for _, r := range out {
				fmt.Fprintf(tw, "%s\t%s %s\t%s\t%s\t%s\n", L(r.Run), L(r.Playbook), L(r.Version), r.Status, L(r.Step), r.Updated)
			}
			tw.Flush()
			for _, r := range out {
				for _, s := range r.Steps {
					line := fmt.Sprintf("  step %s (attempt %d): %s", L(s.Step), s.Attempt, s.Status)
					if len(s.Output) > 0 {
						line += "\n    output: " + L(clip(string(s.Output), 400))
					}
					if s.Error != "" {
						line += "\n    error: " + L(clip(s.Error, 400))
					}
					if s.Usage != nil {
						line += "\n    usage: " + usageText(*s.Usage)
					}
					fmt.Fprintln(c.stdout(), line)
				}
				if r.Usage != nil {
					fmt.Fprintf(c.stdout(), "%s usage: %s\n", L(r.Run), usageText(*r.Usage))
				}
				for _, p := range r.Waiting {
					switch p.Kind {
					case "resume":
						fmt.Fprintf(c.stdout(), "%s: %s\n  openplaybook resume --harness %s %s\n", L(r.Run), L(p.Summary), harnessPath, L(r.Run))
						continue
					case "agent":
						fmt.Fprintf(c.stdout(), "%s waits: %s\n  %s\n", L(r.Run), L(p.Summary), agentHint(harnessPath, L(r.Run)))
						continue
					}
					fmt.Fprintf(c.stdout(), "%s waits: %s\n", L(r.Run), L(p.Summary))
					if p.AgentText != "" {
						// The model's claim, as it wrote it: escaped line by
						// line, marked as unchecked.
						writeLong(c.stdout(), "  the agent's words before the call, unchecked ", "its own text", p.AgentText)
					}
					if len(p.Arguments) > 0 {
						writeArguments(c.stdout(), p.Arguments)
					}
					fmt.Fprintf(c.stdout(), "  openplaybook approve --harness %s %s %s   (or deny)\n", harnessPath, L(r.Run), L(p.ID))
				}
			}
			return nil
		},
	}
	harnessFlag(cmd, &harnessPath, "the harness file (its store holds the runs)")
	formatFlag(cmd, format, "output format: text or json")
	return cmd
}

// usageText says what model turns cost: "3 model turns, 3700 input
// tokens (3150 cached, 300 written to the cache), 80 output tokens".
func usageText(u runtime.Usage) string {
	turns := "model turns"
	if u.Turns == 1 {
		turns = "model turn"
	}
	s := fmt.Sprintf("%d %s, %d input tokens", u.Turns, turns, u.InputTokens)
	switch {
	case u.CachedInputTokens > 0 && u.CacheWriteTokens > 0:
		s += fmt.Sprintf(" (%d cached, %d written to the cache)", u.CachedInputTokens, u.CacheWriteTokens)
	case u.CachedInputTokens > 0:
		s += fmt.Sprintf(" (%d cached)", u.CachedInputTokens)
	case u.CacheWriteTokens > 0:
		s += fmt.Sprintf(" (%d written to the cache)", u.CacheWriteTokens)
	}
	return s + fmt.Sprintf(", %d output tokens", u.OutputTokens)
}

// longArgument is the length from which an argument is announced with its
// size before it is printed.
const longArgument = 200

// writeArguments prints every argument of a call waiting for approval,
// whole: a person approves exactly what they read. Each member of the
// arguments object is a line "name: value"; a string holding line breaks,
// or longer than longArgument bytes, is announced with its size and
// printed line by line after "| ". Every character that could hide or
// reorder text is escaped (textsafe). Arguments that are not an object
// are printed as their JSON text.
func writeArguments(w io.Writer, args jsontext.Value) {
	fmt.Fprintln(w, "  arguments:")
	dec := jsontext.NewDecoder(bytes.NewReader(args))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		writeLong(w, "    ", "(JSON)", string(args))
		return
	}
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			break
		}
		label := textsafe.Line(tok.String()) + ":" // before the next read: tok is valid until then
		val, err := dec.ReadValue()
		if err != nil {
			break
		}
		var str string
		if val.Kind() == '"' && json.Unmarshal(val, &str) == nil {
			if !strings.Contains(str, "\n") && len(str) <= longArgument {
				fmt.Fprintf(w, "    %s \"%s\"\n", label, textsafe.Line(str))
				continue
			}
			writeLong(w, "    "+label+" ", "string", str)
			continue
		}
		if len(val) <= longArgument {
			fmt.Fprintf(w, "    %s %s\n", label, textsafe.Line(string(val)))
			continue
		}
		writeLong(w, "    "+label+" ", "JSON", string(val))
	}
}

// writeLong prints s whole, after a header saying how long it is.
func writeLong(w io.Writer, head, what, s string) {
	lines := strings.Split(s, "\n")
	unit := "lines"
	if len(lines) == 1 {
		unit = "line"
	}
	fmt.Fprintf(w, "%s(%s, %d bytes, %d %s)\n", head, what, len(s), len(lines), unit)
	for _, l := range lines {
		fmt.Fprintf(w, "      | %s\n", textsafe.Line(l))
	}
}

// clip shortens s to at most n bytes (on a rune boundary), marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

func (c *CLI) auditCommand() *cobra.Command {
	var harnessPath string
	var verify bool
	format := newChoice("text", []string{"text", "json"})
	cmd := &cobra.Command{
		Use:                   "audit [--harness FILE] [--format text|json] [--verify] RUN",
		DisableFlagsInUseLine: true,
		Short:                 "Print a run's audit log and prove its hash chain",
		Long: `Audit prints RUN's audit log: every step, tool call (allowed, refused,
waiting), approval and gate decision, each record carrying the SHA-256 of the
record before it and of its own RFC 8785 canonical content.

With --verify it also proves the chain: sequence numbers without gaps, each
record linked to the one before, each hash matching its content, and the log
ending at the run's recorded head. A tampered, removed or reordered record
is named. It then compares the store's rows with the chain: a run, step,
call, approval or gate whose state no record gives (a decision flipped in
SQLite, an edited call) is named too. Exit status: 0 the chain verifies (or was not asked to), 1 it does
not.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeRuns,
		RunE: func(cmd *cobra.Command, args []string) error {
			st, _, err := c.storeFor(harnessPath)
			if err != nil {
				return err
			}
			defer st.Close()
			ctx := ctxOf(cmd)
			if _, err := st.GetRun(ctx, args[0]); err != nil {
				return &exitError{code: ExitProblems, err: runError(err, args[0], harnessPath)}
			}
			w := bufio.NewWriterSize(c.stdout(), 64<<10)
			var probs []audit.Problem
			if format.value == "json" {
				// The problems come before the records in the object:
				// the log is verified, then read again to print it.
				if verify {
					if probs, err = runtime.VerifyRun(ctx, st, args[0], nil); err != nil {
						return ioError(err)
					}
				}
				err = writeAuditJSON(ctx, w, st, args[0], verify, probs)
			} else {
				// Each record is printed as it is read, a page at a time
				// (with --verify also checked and compared with the rows,
				// in the same read): memory stays bounded however long
				// the log.
				n, head := 0, audit.Genesis
				var line []byte
				show := func(r audit.Record) error {
					n, head = n+1, r.Hash
					line = appendAuditText(line[:0], &r)
					_, err := w.Write(line)
					return err
				}
				if verify {
					probs, err = runtime.VerifyRun(ctx, st, args[0], show)
				} else {
					err = store.EachAudit(ctx, st, args[0], show)
				}
				if err == nil && verify {
					for _, p := range probs {
						fmt.Fprintf(w, "TAMPERED: %s\n", p.Message)
					}
					if len(probs) == 0 {
						fmt.Fprintf(w, "chain verifies: %d records, head %s\n", n, head)
					}
				}
			}
			if ferr := w.Flush(); err == nil {
				err = ferr
			}
			if err != nil {
				return ioError(err)
			}
			if len(probs) > 0 {
				return failed
			}
			return nil
		},
	}
	harnessFlag(cmd, &harnessPath, "the harness file (its store holds the run)")
	cmd.Flags().BoolVar(&verify, "verify", false, "prove the hash chain; exit 1 and name the record when it is broken")
	formatFlag(cmd, format, "output format: text or json")
	return cmd
}

// appendAuditText appends r as `audit` prints it to b: the seq (right
// aligned in 4 columns), time, kind (left aligned in 22), step (made
// safe, textsafe.Line), tool (quoted, ASCII) and data (made safe) on one
// line, then "     hash " and the hash on the next.
func appendAuditText(b []byte, r *audit.Record) []byte {
	var num [20]byte
	seq := strconv.AppendInt(num[:0], r.Seq, 10)
	for i := len(seq); i < 4; i++ {
		b = append(b, ' ')
	}
	b = append(b, seq...)
	b = append(b, ' ')
	b = append(b, r.Time...)
	b = append(b, ' ')
	b = append(b, r.Kind...)
	for i := utf8.RuneCountInString(r.Kind); i < 22; i++ {
		b = append(b, ' ')
	}
	if r.Step != "" {
		b = append(b, " step="...)
		b = appendSafeLine(b, r.Step)
	}
	if r.Tool != "" {
		b = append(b, " tool="...)
		b = strconv.AppendQuoteToASCII(b, r.Tool)
	}
	if len(r.Data) > 0 {
		b = append(b, ' ')
		b = appendSafeLine(b, r.Data)
	}
	b = append(b, "\n     hash "...)
	b = append(b, r.Hash...)
	return append(b, '\n')
}

// appendSafeLine appends textsafe.Line(s) to b, without converting s
// when it is printable ASCII (which Line leaves as it is).
func appendSafeLine[T ~string | ~[]byte](b []byte, s T) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return append(b, textsafe.Line(string(s))...)
		}
	}
	return append(b, s...)
}

// writeAuditJSON writes `audit --format json`'s object, its records
// streamed as they are read: what json.Marshal of {"problems" (with
// verify), "records", "run", "verified" (with verify)} writes, indented
// by two spaces, members in name order.
func writeAuditJSON(ctx context.Context, w *bufio.Writer, st store.Store, run string, verify bool, probs []audit.Problem) error {
	member := func(name string, v any, last bool) error {
		b, err := json.Marshal(v, jsontext.WithIndent("  "), jsontext.WithIndentPrefix("  "), json.Deterministic(true))
		if err != nil {
			return err
		}
		k, _ := json.Marshal(name)
		end := ",\n"
		if last {
			end = "\n"
		}
		_, err = fmt.Fprintf(w, "  %s: %s%s", k, b, end)
		return err
	}
	w.WriteString("{\n")
	if verify {
		ps := make([]map[string]any, 0, len(probs))
		for _, p := range probs {
			ps = append(ps, map[string]any{"seq": p.Seq, "message": p.Message})
		}
		if err := member("problems", ps, false); err != nil {
			return err
		}
	}
	w.WriteString(`  "records": [`)
	n := 0
	err := store.EachAudit(ctx, st, run, func(r audit.Record) error {
		b, err := json.Marshal(r, jsontext.WithIndent("  "), jsontext.WithIndentPrefix("    "), json.Deterministic(true))
		if err != nil {
			return err
		}
		if n > 0 {
			w.WriteByte(',')
		}
		n++
		w.WriteString("\n    ")
		_, err = w.Write(b)
		return err
	})
	if err != nil {
		return err
	}
	if n > 0 {
		w.WriteString("\n  ")
	}
	w.WriteString("],\n")
	if err := member("run", run, !verify); err != nil {
		return err
	}
	if verify {
		if err := member("verified", len(probs) == 0, true); err != nil {
			return err
		}
	}
	_, err = w.WriteString("}\n")
	return err
}

func (c *CLI) todayCommand() *cobra.Command {
	var harnessPath string
	var all bool
	format := newChoice("text", []string{"text", "json"})
	cmd := &cobra.Command{
		Use:                   "today [--harness FILE] [--all] [--format text|json]",
		DisableFlagsInUseLine: true,
		Short:                 "List the items playbooks put in front of the operator (today.surface)",
		Long: `Today lists the items the built-in tool today.surface put on the operator's
list, by priority (high, normal, low), then newest first.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			st, _, err := c.storeFor(harnessPath)
			if err != nil {
				return err
			}
			defer st.Close()
			d, err := builtin.DataOf(st)
			if err != nil {
				return ioError(err)
			}
			items, err := d.ListToday(ctxOf(cmd), all)
			if err != nil {
				return ioError(err)
			}
			if format.value == "json" {
				type item struct {
					ID         string `json:"id"`
					Title      string `json:"title"`
					Summary    string `json:"summary"`
					Priority   string `json:"priority"`
					CustomerID string `json:"customerId,omitempty"`
					Link       string `json:"link,omitempty"`
					Run        string `json:"run,omitempty"`
					Step       string `json:"step,omitempty"`
					Created    string `json:"createdAt"`
				}
				out := []item{}
				for _, it := range items {
					out = append(out, item{it.ID, it.Title, it.Summary, it.Priority, it.CustomerID, it.Link, it.Run, it.Step, it.Created.UTC().Format("2006-01-02T15:04:05Z")})
				}
				b, _ := json.Marshal(out, jsontext.WithIndent("  "))
				fmt.Fprintln(c.stdout(), string(b))
				return nil
			}
			if len(items) == 0 {
				fmt.Fprintln(c.stdout(), "nothing on today's list")
			}
			for _, it := range items {
				L := textsafe.Line
				fmt.Fprintf(c.stdout(), "[%s] %s  (%s, from run %s step %s)\n", L(it.Priority), L(it.Title), L(it.ID), L(it.Run), L(it.Step))
				if it.Summary != "" {
					fmt.Fprintf(c.stdout(), "    %s\n", L(it.Summary))
				}
			}
			return nil
		},
	}
	harnessFlag(cmd, &harnessPath, "the harness file (its store holds the list)")
	cmd.Flags().BoolVar(&all, "all", false, "include dismissed items")
	formatFlag(cmd, format, "output format: text or json")
	return cmd
}
