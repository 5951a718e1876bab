# Sourced by scripts/bench-vs-valkey-benchmark and scripts/bench-client-instructions (issue 11
# item 7): what both compare emq-bench and redis-benchmark on.

# constant_lua_dir DIR: copies lua/ into DIR with enqueue.lua cut after its argument gates
# (`return 1` before the EXISTS), so its server cost does not depend on the ids. Exits 1 when
# lua/enqueue.lua has no line to cut at.
constant_lua_dir() {
  mkdir "$1"
  cp lua/*.lua "$1/"
  awk '/^-- Idempotent:/ && !done {print "do return 1 end"; done = 1} {print}' lua/enqueue.lua >"$1/enqueue.lua"
  grep -q '^do return 1 end$' "$1/enqueue.lua" || { echo "bench: lua/enqueue.lua has no '-- Idempotent:' line to cut at" >&2; exit 1; }
}

# redis-benchmark's request, byte for byte as long as emq-bench's, and as costly to the server:
# - the id is 29 characters like a JOB + 26-digit ULID (14 zeros, then the 12 digits of
#   __rand_int__), so both send the same bytes per request;
# - the 256-byte payload starts with __rand_int__, so it differs per request as emq-bench's
#   verifiable payloads do: the server makes a new Lua string of every distinct argument, while
#   a payload repeated verbatim is found interned (measured here: server CPU 3.33 against
#   3.62 us/request and 7 % more throughput at 1 x 64 for the repeated one).
# shellcheck disable=SC2034 # used by the scripts that source this file
id='JOB00000000000000__rand_int__'
# shellcheck disable=SC2034
payload="__rand_int__$(head -c 244 /dev/zero | tr '\0' 'x')"
