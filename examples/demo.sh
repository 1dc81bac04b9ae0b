#!/usr/bin/env bash
# Every bundled example, end to end, against mock APIs:
#   1. validate every example playbook;
#   2. start the mocks (scripts/mocks.sh: stripe-mock, Prism on each
#      provider's API description, the GraphQL mock) and check every example
#      against a copy of examples/harness.yaml whose state lives in a
#      temporary directory;
#   3. run each example with the transcript driver (examples/transcripts/):
#      each gate and each call waiting for approval is approved or denied
#      from the command line, as this script says per example;
#   4. verify each run's hash-chained audit log and print one line per
#      example: "<example>: <status> (<N> calls)".
# Nothing is shared with other runs: the store, the memory graph, the logs
# and the binaries are in one mktemp -d directory, removed at the end (set
# KEEP=1 to keep it). The credentials are fake values for the mocks.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
PATH="$(scripts/deps.sh)"
export PATH

tmp="$(mktemp -d "${TMPDIR:-/tmp}/openplaybook-demo.XXXXXX")"
cleanup() {
  scripts/mocks.sh stop "$tmp/mocks" || true
  if [ -n "${KEEP:-}" ]; then echo "kept $tmp" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

go build -o "$tmp/openplaybook" ./cmd/openplaybook
go build -o "$tmp/acme-mcp" ./examples/acme-mcp
op() { echo "+ openplaybook $*" >&2; "$tmp/openplaybook" "$@"; }
# json EXPR: evaluates EXPR over the JSON object on standard input (d).
json() { node -e 'const d = JSON.parse(require("fs").readFileSync(0, "utf8")); const v = ('"$1"'); if (v !== undefined) console.log(Array.isArray(v) ? v.join("\n") : v)'; }

# The mocks, each on a free port of this run's own.
scripts/mocks.sh start "$tmp/mocks"

# The demo's harness: examples/harness.yaml with every connection's baseURL
# on this run's mock, every relative path made absolute, the store and the
# memory graph in $tmp, and the acme server the binary built above.
H="$tmp/harness.yaml"
scripts/mocks.sh harness "$tmp/mocks" examples/harness.yaml | sed \
  -e "s|^\(  *cwd: \)\.\.\( .*\)\{0,1\}$|\1$root|" \
  -e "s|\(transcript: \"\{0,1\}\)transcripts/|\1$root/examples/transcripts/|" \
  -e "s|^\(  sqlite: \).*|\1$tmp/store/openplaybook.db|" \
  -e "s|^\(  seed: \)\([^ ]*\)|\1$root/examples/\2|" \
  -e "s|^\(  *MEMORY_FILE_PATH: \).*|\1$tmp/memory.jsonl|" \
  -e "s|^\(  *command: \)go$|\1$tmp/acme-mcp|" \
  -e "s|^\(  *args: \)\[run, \./examples/acme-mcp, -orders, |\1[-orders, $root/|" \
  -e "s|^\(    - {path: \)\.env,|\1$tmp/.env,|" \
  >"$H"
if grep -nE 'cwd: \.\.|openplaybook-example-memory|\.openplaybook/|command: go$|path: \.env' "$H" >&2; then
  echo "demo: the harness copy still names shared or relative paths (above): examples/harness.yaml changed; update the sed lines in $0" >&2
  exit 1
fi
while read -r p port; do
  grep -q "^    baseURL: http://127.0.0.1:$port\b" "$H" || { echo "demo: the harness copy has no baseURL on $p's mock (port $port)" >&2; exit 1; }
done <"$tmp/mocks/ports"

# Fake credentials for every secret the harness names: the mocks accept any.
for s in $(sed -n 's/.*secrets: {\(.*\)}.*/\1/p; s/.*\${secret:\([A-Z0-9_]*\)}.*/x: \1/p' examples/harness.yaml | tr ',' '\n' | sed 's/.*: *//' | sort -u); do
  export "$s=demo-fake-$(echo "$s" | tr 'A-Z_' 'a-z-')"
done
export STRIPE_API_KEY=sk_test_123 # stripe-mock wants a test key's shape

# The memory graph knows Ada, so refund-review's add_observations has an
# entity to add to.
echo '{"type":"entity","name":"Ada Lovelace","entityType":"customer","observations":["Asked about a duplicate charge."]}' >"$tmp/memory.jsonl"

summary=()
op validate examples/
op check --harness "$H" examples/*.json

# example NAME INPUT DECISION...: runs examples/NAME.json with INPUT; each
# time the run waits, decides what it waits for (a gate or an approval, in
# the order they come) with the next DECISION (approve or deny), then
# resumes, until the run ends.
example() {
  local name=$1 input=$2 out status run kind id step decision n
  shift 2
  echo "== $name" >&2
  status=0
  out=$(op run --harness "$H" --format json --input "$input" "examples/$name.json") || status=$?
  run=$(json d.run <<<"$out")
  while [ "$status" -eq 3 ]; do
    while IFS=' ' read -r kind id step; do
      [ $# -gt 0 ] || { echo "demo: $name waits for $kind $id in step $step, and the script has no decision left for it" >&2; exit 1; }
      decision=$1
      shift
      op "$decision" --harness "$H" --by demo --reason "demo: $decision $kind in step $step" "$run" "$id" >/dev/null
    done < <(json 'd.waiting.map(w => w.kind + " " + w.id + " " + w.step)' <<<"$out")
    status=0
    out=$(op resume --harness "$H" --format json "$run") || status=$?
  done
  [ $# -eq 0 ] || { echo "demo: $name ended with $# decisions left: $*" >&2; exit 1; }
  case "$status" in
    0 | 4) ;;
    *) echo "demo: $name did not run to its end (exit $status): $out" >&2; exit 1 ;;
  esac
  op audit --harness "$H" --verify "$run" | tail -n 1 >&2
  # The calls made, and any refused or failed (none expected).
  n=$(op audit --harness "$H" --format json "$run" | json '(k => k("succeeded") + " calls" + ["refused", "failed", "outcome-unknown", "output-invalid"].map(x => k(x) ? ", " + k(x) + " " + x : "").join(""))(x => d.records.filter(r => r.kind === "call." + x).length)')
  summary+=("$name: $(json d.status <<<"$out") ($n)")
}

example support-triage '{"fromEmail":"ada@analytical.example","subject":"CSV export times out","body":"Exporting our workspace to CSV times out after a minute."}' \
  deny
example refund-review '{"customerId":"cus_ada","chargeId":"ch_duplicate","message":"I was charged twice for the same invoice."}' \
  approve approve
example churn-watch '{"fromAddress":"Dana at Acme <dana@acme.example>","posthogProjectId":"12345"}' \
  approve approve
example failed-charge-recovery '{"customerId":"cus_ada","chargeId":"ch_failed","stripeCustomerId":"cus_StripeAda"}' \
  approve approve approve approve
example order-delay-follow-up '{"orderId":"gid://shopify/Order/5468126543921","customerId":"cus_ada","daysLate":7}' \
  approve approve approve
example finance-reconciliation '{"month":"2026-11","mercuryAccountId":"0ad81488-cead-11e9-80e2-8fecf9556cc6","rampRecipientId":"73dbe710-fb4a-11e9-b89d-07e77a363005"}' \
  approve approve
example meeting-notes '{"title":"Analytical Engines: Q1 planning","heldAt":"2026-12-01T15:00:00Z","attendees":["Dana Scully","Ada Lovelace"],"transcript":"Dana: Thanks for joining. Ada: The exports keep timing out for finance. Dana: Background exports ship next month; want to pilot them from 15 January? Ada: Yes, I will name two users by the 8th.","notionDataSourceId":"1a44be12-0953-4631-b498-9e5817518db8"}'
example release-notes '{"repo":"octocat/Hello-World","fromTag":"v1.0.0","toTag":"v1.1.0","slackChannel":"#releases"}' \
  approve approve

op today --harness "$H" >&2
printf '%s\n' "${summary[@]}"
