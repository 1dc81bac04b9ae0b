#!/usr/bin/env bash
# The mock APIs the bundled examples run against, each on a loopback port
# of its own run.
#
#   scripts/mocks.sh start STATE_DIR [PROVIDER...]   # default: those the examples use
#   scripts/mocks.sh stop STATE_DIR
#   scripts/mocks.sh ports [STATE_DIR]               # provider port, a line each
#   scripts/mocks.sh harness STATE_DIR FILE          # FILE with its baseURLs on the mocks
#
# - stripe: stripe-mock (scripts/deps.sh installs it);
# - an OpenAPI provider: Prism serving the description its connector file
#   names (connector/providers/<p>.json: description.package under
#   node_modules, or description.file under connector/providers/descriptions);
# - a GraphQL provider: scripts/graphql-mock.mjs serving its SDL.
#
# Each start takes a free loopback port per mock (the system's choice), so
# two runs never share a mock; MOCKS_PORTS="stripe=12111 github=12201" asks
# for fixed ones instead. A port something else already listens on is
# refused, never reused, and a mock counts as listening only when the
# listening socket belongs to the process start made (its session, found
# through /proc, or lsof where there is no /proc): whatever else answers
# there is refused, naming the port. A provider whose connector file is not
# there yet is skipped with a note. start waits until every mock listens
# (MOCKS_TIMEOUT seconds, default 120) and fails naming the log of any that
# died or did not listen in time; on any failure it stops what it started.
# STATE_DIR gets <provider>.log and <provider>.pid ("PID PORT") and ports
# (what `ports STATE_DIR` prints); stop stops only the processes start
# recorded there. harness prints FILE (examples/harness.yaml) with the
# baseURL of each connection whose mock STATE_DIR holds set to that mock.
# Needs node (and scripts/deps.sh run first).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

# provider port: the baseURLs examples/harness.yaml is written with (what
# `scripts/mocks.sh harness` replaces), kept in line with it.
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

# free_port: a loopback port nothing listens on now, the system's choice.
free_port() {
  node -e 'const s = require("net").createServer(); s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });'
}

# wanted_port PROVIDER: the port MOCKS_PORTS asks for ("" when none).
wanted_port() {
  local kv
  for kv in ${MOCKS_PORTS:-}; do
    if [ "${kv%%=*}" = "$1" ]; then
      [[ ${kv#*=} =~ ^[0-9]+$ ]] || die "MOCKS_PORTS: \"$kv\" is not PROVIDER=PORT"
      echo "${kv#*=}"
      return
    fi
  done
}

# ours PORT SID: whether what listens on 127.0.0.1:PORT is the mock start
# made in session SID (setsid makes the mock the leader of a session of
# its own, the session id its pid). 0: every socket listening on PORT is
# held by a process of that session; 1: nothing listens yet; 3: a socket
# listening there is held by no process of it (something else took the
# port); 4: this system cannot say (no /proc/net/tcp and no lsof).
ours() {
  local port=$1 sid=$2 hex inodes held pid fd l ino pids
  if [ -r /proc/net/tcp ]; then
    hex=$(printf '%04X' "$port")
    # Listening sockets on PORT that a client of 127.0.0.1 reaches: bound to
    # 127.0.0.1, 0.0.0.0, ::, ::1 or ::ffff:127.0.0.1.
    inodes=$(awk -v p="$hex" '
      BEGIN {
        reach["0100007F"]; reach["00000000"]; reach["00000000000000000000000000000000"]
        reach["00000000000000000000000001000000"]; reach["0000000000000000FFFF00000100007F"]
      }
      FNR > 1 && $4 == "0A" { split($2, a, ":"); if (a[2] == p && (a[1] in reach)) print $10 }
    ' /proc/net/tcp /proc/net/tcp6 2>/dev/null | sort -u)
    [ -n "$inodes" ] || return 1
    held=$(for pid in $(ps -o pid= --sid "$sid" 2>/dev/null); do
      for fd in /proc/"$pid"/fd/*; do
        l=$(readlink "$fd" 2>/dev/null) || continue
        case $l in socket:\[*\]) ino=${l#socket:[}; echo "${ino%]}" ;; esac
      done
    done | sort -u)
    for ino in $inodes; do
      grep -qx "$ino" <<<"$held" || return 3
    done
    return 0
  elif command -v lsof >/dev/null; then
    pids=$(lsof -nP -iTCP:"$port" -sTCP:LISTEN -t 2>/dev/null || true)
    [ -n "$pids" ] || return 1
    for pid in $pids; do
      [ "$(ps -o sid= -p "$pid" 2>/dev/null | tr -d ' ')" = "$sid" ] || return 3
    done
    return 0
  fi
  return 4
}

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
    [ -n "$(port_of "$p")" ] || die "no mock for provider \"$p\" (scripts/mocks.sh ports lists them)"
  done
  # On any failure from here on, stop what this start started.
  trap 'stop_started' ERR
  trap 'stop_started; exit 1' INT TERM
  for p in "${want[@]}"; do
    if [ -e "$dir/$p.pid" ]; then
      local opid
      read -r opid port <"$dir/$p.pid"
      if kill -0 "$opid" 2>/dev/null; then
        fail "$p: $dir already holds a mock of it (pid $opid, port $port); stop $dir first, or give another STATE_DIR"
      fi
      rm -f "$dir/$p.pid"
    fi
    port=$(wanted_port "$p")
    if [ -z "$port" ]; then
      port=$(free_port) || fail "$p: no free loopback port"
    fi
    if listening "$port"; then
      fail "$p: 127.0.0.1:$port already answers, and not from a mock this start made; it is refused, not reused (stop what listens there, or leave MOCKS_PORTS out for a free port)"
    fi
    mapfile -t cmd < <(command_for "$p" "$port")
    [ ${#cmd[@]} -gt 0 ] || continue
    # Its own session, so stop can end it and what it started, and so
    # that the listener can be told to be ours.
    setsid "${cmd[@]}" >"$dir/$p.log" 2>&1 </dev/null &
    echo "$! $port" >"$dir/$p.pid"
    started+=("$p")
  done
  local deadline=$((SECONDS + ${MOCKS_TIMEOUT:-120})) waiting pid rc
  while :; do
    waiting=()
    for p in ${started[@]+"${started[@]}"}; do
      read -r pid port <"$dir/$p.pid"
      rc=0
      ours "$port" "$pid" || rc=$?
      case $rc in
        0) continue ;;
        3) fail "$p: what listens on 127.0.0.1:$port is not the mock this start made (pid $pid, its session holds no socket listening there): something else took the port; refused" ;;
        4) fail "$p: cannot tell which process listens on 127.0.0.1:$port (no /proc/net/tcp, no lsof), so it is not trusted" ;;
      esac
      kill -0 "$pid" 2>/dev/null || fail "$p: the mock exited before listening on 127.0.0.1:$port; see $dir/$p.log:
$(tail -n 15 "$dir/$p.log")"
      waiting+=("$p")
    done
    [ ${#waiting[@]} -eq 0 ] && break
    if [ $SECONDS -ge $deadline ]; then
      for p in "${waiting[@]}"; do
        read -r pid port <"$dir/$p.pid"
        echo "mocks: $p: not listening on 127.0.0.1:$port after ${MOCKS_TIMEOUT:-120} s; see $dir/$p.log" >&2
      done
      fail "not every mock listens"
    fi
    sleep 0.2
  done
  trap - ERR INT TERM
  : >"$dir/ports"
  for f in "$dir"/*.pid; do
    [ -e "$f" ] || continue
    read -r pid port <"$f"
    echo "$(basename "$f" .pid) $port" >>"$dir/ports"
  done
  for p in ${started[@]+"${started[@]}"}; do
    read -r pid port <"$dir/$p.pid"
    echo "mocks: $p: listening on 127.0.0.1:$port (pid $pid, log $dir/$p.log)" >&2
  done
}

# fail MESSAGE: stops what this start started, then dies.
fail() {
  trap - ERR INT TERM
  stop_started
  die "$*"
}

# stop_started: stops the mocks this start started (start's $dir and
# $started), and nothing it found there.
stop_started() {
  local p
  for p in ${started[@]+"${started[@]}"}; do
    stop_one "$dir/$p.pid"
  done
}

# harness DIR FILE: FILE with the baseURL of each connection whose mock
# DIR holds pointed at it. A connection's block is the lines after
# "  <provider>:" up to the next line indented by two blanks or less.
harness() {
  local dir=$1 file=$2
  [ -f "$dir/ports" ] || die "$dir has no ports file: scripts/mocks.sh start $dir first"
  [ -f "$file" ] || die "no file $file"
  awk -v portsfile="$dir/ports" '
    BEGIN { while ((getline line < portsfile) > 0) { split(line, a, " "); port[a[1]] = a[2] } }
    /^[^ #]/ { section = $1; conn = "" }
    section == "connections:" && /^  [a-z_]+:/ { conn = $1; sub(/:$/, "", conn) }
    section == "connections:" && conn in port && /^    baseURL: http:\/\/127\.0\.0\.1:[0-9]+/ {
      sub(/http:\/\/127\.0\.0\.1:[0-9]+/, "http://127.0.0.1:" port[conn])
    }
    { print }
  ' "$file"
}

# stop_one PIDFILE: ends the session the pid file records, while it still
# runs, and removes the file.
stop_one() {
  local pid port
  [ -e "$1" ] || return 0
  read -r pid port <"$1"
  # Only the session start made, and only while it still runs.
  if kill -0 "$pid" 2>/dev/null; then
    kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$1"
}

stop() {
  local dir=$1 f
  [ -d "$dir" ] || return 0
  for f in "$dir"/*.pid; do
    stop_one "$f"
  done
  rm -f "$dir/ports"
}

# Sourced (the tests do, for ours), it only defines the functions.
[ "${BASH_SOURCE[0]}" = "$0" ] || return 0

case "${1:-}" in
  start) [ $# -ge 2 ] || die "usage: scripts/mocks.sh start STATE_DIR [PROVIDER...]"; shift; start "$@" ;;
  stop) [ $# -eq 2 ] || die "usage: scripts/mocks.sh stop STATE_DIR"; stop "$2" ;;
  ports)
    if [ $# -eq 2 ]; then
      [ -f "$2/ports" ] || die "$2 has no ports file: scripts/mocks.sh start $2 first"
      cat "$2/ports"
    else
      echo "$ports"
    fi
    ;;
  harness) [ $# -eq 3 ] || die "usage: scripts/mocks.sh harness STATE_DIR FILE"; harness "$2" "$3" ;;
  *) die "usage: scripts/mocks.sh start STATE_DIR [PROVIDER...] | stop STATE_DIR | ports [STATE_DIR] | harness STATE_DIR FILE" ;;
esac
