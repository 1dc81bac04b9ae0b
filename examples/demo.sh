#!/usr/bin/env bash
# The main job on the bundled examples:
#   1. validate every example playbook;
#   2. check two of them against the example harness: the built-ins, the
#      Stripe connector on stripe-mock, and the real server-memory MCP server;
#   3. run refund-review end to end with the transcript driver: the gate and
#      the charge.refund approval are approved from the command line;
#   4. verify the run's hash-chained audit log.
set -euo pipefail
cd "$(dirname "$0")/.."
PATH="$(scripts/deps.sh)"
export PATH

go build -o bin/openplaybook ./cmd/openplaybook
op() { echo "+ openplaybook $*" >&2; bin/openplaybook "$@"; }
H=examples/harness.yaml

# stripe-mock on the port examples/harness.yaml names, unless one answers.
if ! (exec 3<>/dev/tcp/127.0.0.1/12111) 2>/dev/null; then
  stripe-mock -http-addr 127.0.0.1:12111 -https-addr 127.0.0.1:0 >/tmp/openplaybook-demo-stripe-mock.log 2>&1 &
  mock=$!
  trap 'kill $mock 2>/dev/null || true' EXIT
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/12111) 2>/dev/null && break; sleep 0.1; done
fi
# stripe-mock accepts any test key; a real deployment reads the key from the
# environment or a dotenv file (docs/harness.md).
export STRIPE_API_KEY="${STRIPE_API_KEY:-sk_test_123}"

# The memory graph the example harness names knows the customer, so the
# refund's add_observations call has an entity to add to.
mem=/tmp/openplaybook-example-memory.jsonl
grep -qs '"name":"Ada Lovelace"' "$mem" ||
  echo '{"type":"entity","name":"Ada Lovelace","entityType":"customer","observations":["Asked about a duplicate charge."]}' >>"$mem"

op validate examples/
op check --harness "$H" examples/support-triage.json examples/refund-review.json

status=0
out=$(op run --harness "$H" --format json \
  --input '{"customerId":"cus_ada","chargeId":"ch_duplicate","message":"I was charged twice for the same invoice."}' \
  examples/refund-review.json) || status=$?
run=$(printf '%s' "$out" | sed -n 's/.*"run": *"\(run_[0-9a-f]*\)".*/\1/p' | head -n1)
[ "$status" -eq 3 ] || { echo "expected the run to wait at its gate (exit 3), got $status" >&2; exit 1; }

op approve --harness "$H" --reason "duplicate confirmed" "$run" approve_refund
status=0
out=$(op resume --harness "$H" --format json "$run") || status=$?
[ "$status" -eq 3 ] || { echo "expected the run to wait for the refund approval (exit 3), got $status" >&2; exit 1; }
approval=$(printf '%s' "$out" | sed -n 's/.*"id": *"\(apr_[0-9a-f]*\)".*/\1/p' | head -n1)

op approve --harness "$H" --reason "refund the duplicate" "$run" "$approval"
op resume --harness "$H" "$run"
op audit --harness "$H" --verify "$run" | tail -n 1
op today --harness "$H"
