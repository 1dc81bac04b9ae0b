#!/usr/bin/env bash
# The mock APIs the bundled examples run against, each on the fixed
# loopback port examples/harness.yaml names as the connection's baseURL.
#
#   scripts/mocks.sh start STATE_DIR [PROVIDER...]   # default: those the examples use
#   scripts/mocks.sh stop STATE_DIR
#   scripts/mocks.sh ports                           # provider port, a line each
#
# - stripe: stripe-mock (scripts/deps.sh installs it);
# - an OpenAPI provider: Prism serving the description its connector file
#   names (connector/providers/<p>.json: description.package under
#   node_modules, or description.file under connector/providers/descriptions);
# - a GraphQL provider: scripts/graphql-mock.mjs serving its SDL.
#
# A mock already answering on its port is reused (and not stopped). A
# provider whose connector file is not there yet is skipped with a note.
# start waits until every mock listens (MOCKS_TIMEOUT seconds, default 120)
# and fails naming the log of any that died or did not listen in time.
# STATE_DIR gets <provider>.log and <provider>.pid; stop stops only the
# processes start recorded there. Needs node (and scripts/deps.sh run first).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

# provider port (keep in line with examples/harness.yaml's baseURLs).
ports="stripe 12111
github 12201
gmail 12202
posthog 12203
resend 12204
notion 12205
slack 12206
mercury 12207
ramp 12208
shopify 12209
linear 12210
vercel 12211
square 12212
plaid 12213
clover 12214
brex 12215
stripe_financial_connections 12216
teller 12217
paypal 12218
etsy 12219
amazon 12220
gusto 12221"

# The providers examples/harness.yaml binds: what start starts by default.
examples="stripe github gmail posthog resend notion slack mercury ramp shopify linear"

die() { echo "mocks: $*" >&2; exit 1; }
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port_of() { awk -v p="$1" '$1 == p {print $2}' <<<"$ports"; }

# command_for PROVIDER PORT: prints the mock's command line, one word a
# line; nothing (and a note) when the provider has no connector file yet.
command_for() {
  local p=$1 port=$2 spec kind pkg file
  if [ "$p" = stripe ]; then
    printf '%s\n' stripe-mock -http-addr "127.0.0.1:$port" -https-addr 127.0.0.1:0
    return
  fi
  spec="$root/connector/providers/$p.json"
  if [ ! -f "$spec" ]; then
    echo "mocks: $p: no connector/providers/$p.json yet, skipped" >&2
    return
  fi
  { read -r kind; read -r pkg; read -r file; } < <(node -e 'const d = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).description || {};
    for (const k of ["kind", "package", "file"]) console.log(d[k] || "")' "$spec")
  kind=${kind:-openapi}
  if [ -n "$pkg" ]; then
    file="$root/node_modules/$pkg"
  elif [ -n "$file" ]; then
    file="$root/connector/providers/descriptions/$file"
  else
    die "$p: $spec names no description.package or description.file"
  fi
  [ -f "$file" ] || die "$p: the description $file is missing (run scripts/deps.sh)"
  if [ "$kind" = graphql ]; then
    [ -f "$root/scripts/graphql-mock.mjs" ] || { echo "mocks: $p: scripts/graphql-mock.mjs is not there yet, skipped" >&2; return; }
    printf '%s\n' node "$root/scripts/graphql-mock.mjs" --port "$port" --schema "$file"
  else
    printf '%s\n' "$root/node_modules/.bin/prism" mock -h 127.0.0.1 -p "$port" "$file"
  fi
}

start() {
  local dir=$1 p port started=() cmd
  shift
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  local want=("$@")
  [ ${#want[@]} -gt 0 ] || read -r -a want <<<"$examples"
  for p in "${want[@]}"; do
    port=$(port_of "$p")
    [ -n "$port" ] || die "no mock for provider \"$p\" (scripts/mocks.sh ports lists them)"
    if listening "$port"; then
      echo "mocks: $p: reusing what answers on 127.0.0.1:$port" >&2
      continue
    fi
    mapfile -t cmd < <(command_for "$p" "$port")
    [ ${#cmd[@]} -gt 0 ] || continue
    # Its own session, so stop can end it and what it started.
    setsid "${cmd[@]}" >"$dir/$p.log" 2>&1 </dev/null &
    echo "$! $port" >"$dir/$p.pid"
    started+=("$p")
  done
  local deadline=$((SECONDS + ${MOCKS_TIMEOUT:-120})) waiting pid
  while :; do
    waiting=()
    for p in ${started[@]+"${started[@]}"}; do
      read -r pid port <"$dir/$p.pid"
      listening "$port" && continue
      kill -0 "$pid" 2>/dev/null || die "$p: the mock exited before listening on 127.0.0.1:$port; see $dir/$p.log:
$(tail -n 15 "$dir/$p.log")"
      waiting+=("$p")
    done
    [ ${#waiting[@]} -eq 0 ] && break
    if [ $SECONDS -ge $deadline ]; then
      for p in "${waiting[@]}"; do
        echo "mocks: $p: not listening on 127.0.0.1:$(port_of "$p") after ${MOCKS_TIMEOUT:-120} s; see $dir/$p.log" >&2
      done
      exit 1
    fi
    sleep 0.2
  done
  for p in ${started[@]+"${started[@]}"}; do
    echo "mocks: $p: listening on 127.0.0.1:$(port_of "$p") (log $dir/$p.log)" >&2
  done
}

stop() {
  local dir=$1 f pid port
  [ -d "$dir" ] || return 0
  for f in "$dir"/*.pid; do
    [ -e "$f" ] || continue
    read -r pid port <"$f"
    # Only the session start made, and only while it still runs.
    if kill -0 "$pid" 2>/dev/null; then
      kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$f"
  done
}

case "${1:-}" in
  start) [ $# -ge 2 ] || die "usage: scripts/mocks.sh start STATE_DIR [PROVIDER...]"; shift; start "$@" ;;
  stop) [ $# -eq 2 ] || die "usage: scripts/mocks.sh stop STATE_DIR"; stop "$2" ;;
  ports) echo "$ports" ;;
  *) die "usage: scripts/mocks.sh start STATE_DIR [PROVIDER...] | stop STATE_DIR | ports" ;;
esac
