# Sourced by the benchmark scripts: a scratch folder removed on exit with every server started
# into it, a free loopback port, and waiting for a server's PING. After sourcing, `work` names the
# scratch folder (/tmp/prefixd-NAME.*) and `pids` collects the server processes to stop.
# Usage: source "$repo/benchmarks/bench_lib.sh" NAME

work=$(mktemp -d "/tmp/prefixd-${1:-bench}.XXXXXX")
pids=()
bench_cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap bench_cleanup EXIT

free_port() {
  local port
  for _ in $(seq 1 100); do
    port=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return
    fi
  done
  echo "no free port found" >&2
  exit 1
}

wait_ready() {  # port name
  for _ in $(seq 1 100); do
    [[ $(timeout 2 redis-cli -p "$1" PING 2>/dev/null) == PONG ]] && return
    sleep 0.1
  done
  echo "$2 did not answer PING on port $1" >&2
  exit 1
}
