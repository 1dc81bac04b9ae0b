package store

// Column names one column of one table of the store's schema.
type Column struct {
	Table, Name string
}

func (c Column) String() string { return c.Table + "." + c.Name }

// ChainedColumns lists the columns of a run's rows whose values its audit
// chain records (as the value, its SHA-256, or the record that sets it),
// in schema order. runtime.Disagreements compares each of them with the
// chain, and `openplaybook audit --verify` and resume refuse a run where
// one differs. A column added to one of these tables goes here or in
// [UnchainedColumns]; a store test holds the two lists to the schema.
var ChainedColumns = []Column{
	{"runs", "playbook_id"}, {"runs", "playbook_version"}, {"runs", "document_digest"}, {"runs", "document"},
	{"runs", "input"}, {"runs", "status"}, {"runs", "current_step"}, {"runs", "audit_last_seq"}, {"runs", "audit_last_hash"},

	{"steps", "run"}, {"steps", "step"}, {"steps", "attempt"}, {"steps", "status"}, {"steps", "output"}, {"steps", "error"},

	{"calls", "run"}, {"calls", "step"}, {"calls", "attempt"}, {"calls", "idx"}, {"calls", "tool"}, {"calls", "def_digest"},
	{"calls", "args"}, {"calls", "args_digest"}, {"calls", "decision"}, {"calls", "reason"}, {"calls", "state"},
	{"calls", "side_effecting"}, {"calls", "result"}, {"calls", "error"}, {"calls", "code"},

	{"approvals", "id"}, {"approvals", "kind"}, {"approvals", "run"}, {"approvals", "step"}, {"approvals", "tool"},
	{"approvals", "def_digest"}, {"approvals", "args_digest"}, {"approvals", "call_attempt"}, {"approvals", "call_idx"},
	{"approvals", "status"}, {"approvals", "reason"}, {"approvals", "decided_by"},

	{"gates", "run"}, {"gates", "step"}, {"gates", "attempt"}, {"gates", "status"}, {"gates", "reason"}, {"gates", "decided_by"},
}

// UnchainedColumns are the columns of the same tables the chain does not
// record, each with why; a person's view of them is not a verified one.
var UnchainedColumns = map[Column]string{
	{"runs", "id"}:           "the key the log is read by: another id is a run the store does not have, which verify and resume refuse as not found",
	{"runs", "harness_path"}: "where the harness was; the chain records the harness's digest, which resume compares with the harness it is given",
	{"runs", "reason"}:       "a note on the status, rewritten with it on paths no record carries",
	{"runs", "created_at"}:   "a time; each record has its own",
	{"runs", "updated_at"}:   "a time; each record has its own",
	{"runs", "owner"}:        "which replica executes the run; a claim changes what may write the run, never what the run did",
	{"runs", "owner_epoch"}:  "the claim count that fences a replica's writes; a claim changes what may write the run, never what the run did",

	{"steps", "started_at"}:  "a time; each record has its own",
	{"steps", "finished_at"}: "a time; each record has its own",

	{"calls", "started_at"}:  "a time; each record has its own",
	{"calls", "finished_at"}: "a time; each record has its own",

	{"approvals", "created_at"}: "a time; each record has its own",
	{"approvals", "expires_at"}: "when a pending approval lapses; approval.requested does not carry it, so an expiry moved later is not noticed",
	{"approvals", "decided_at"}: "a time; each record has its own",
	{"approvals", "used_at"}:    "a time; each record has its own",

	{"gates", "opened_at"}:  "a time; each record has its own",
	{"gates", "decided_at"}: "a time; each record has its own",
}

// RunStateTables are the tables [ChainedColumns] and [UnchainedColumns]
// cover between them. The store's other tables are the audit log itself,
// the schema's version, agent tokens (issued and revoked with records,
// but checked by hash when presented, not against the chain), the
// notifications' outbox (what was sent about the records, not a run's
// state), the replicas of serve (which processes are alive, not what a
// run did), the credential vault and its leases (sealed tokens by
// destination, shared by every run), the console's logins (who may use
// serve's console, not what a run did) and the built-in tools' data (customers, notes, today), which
// no run's chain describes.
var RunStateTables = []string{"runs", "steps", "calls", "approvals", "gates"}
