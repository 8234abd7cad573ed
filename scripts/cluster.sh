#!/usr/bin/env bash
# A local prefixd cluster for trying Redis Cluster clients: `scripts/cluster.sh start [nodes]
# [first-port]` installs and builds like scripts/run.sh, writes one nodes.conf per node (every node
# listed, the 16384 slots split evenly) under ./cluster/<port>/, and starts the nodes in the
# background on 127.0.0.1; `scripts/cluster.sh stop` stops them. docs/cluster.md explains the files.
set -euo pipefail
cd "$(dirname "$0")/.."
action=${1:-start}
nodes=${2:-3}
first_port=${3:-7001}
root=cluster

if [[ $action == stop ]]; then
  for pidfile in "$root"/*/prefixd.pid; do
    [[ -f $pidfile ]] || continue
    kill "$(cat "$pidfile")" 2>/dev/null || true
    rm -f "$pidfile"
  done
  exit 0
fi
if [[ $action != start ]] || ! [[ $nodes =~ ^[0-9]+$ ]] || ((nodes < 1 || nodes > 100)); then
  echo "usage: $0 start [nodes 1-100] [first-port] | $0 stop" >&2
  exit 2
fi

scripts/install-deps.sh
scripts/build-release.sh prefixd-server
binary=build/release/prefixd-server

# Node ids are fixed per port so a restart finds the same cluster.
node_id() { printf '%040x' "$1"; }
for ((i = 0; i < nodes; i++)); do
  port=$((first_port + i))
  dir=$root/$port
  mkdir -p "$dir"
  if [[ ! -f $dir/nodes.conf ]]; then
    for ((j = 0; j < nodes; j++)); do
      flags=master
      ((i == j)) && flags=myself,master
      first=$((16384 * j / nodes))
      last=$((16384 * (j + 1) / nodes - 1))
      echo "$(node_id $((first_port + j))) 127.0.0.1:$((first_port + j))@0 $flags - 0 0 $((j + 1))" \
        "connected $first-$last"
    done >"$dir/nodes.conf"
    echo "vars currentEpoch $nodes lastVoteEpoch 0" >>"$dir/nodes.conf"
  fi
  nohup "$binary" --port "$port" --dir "$dir" --cluster-enabled yes >"$dir/server.log" 2>&1 &
  echo $! >"$dir/prefixd.pid"
done
for ((i = 0; i < nodes; i++)); do
  port=$((first_port + i))
  for _ in $(seq 100); do
    redis-cli -p "$port" PING >/dev/null 2>&1 && break
    sleep 0.1
  done
  redis-cli -p "$port" CLUSTER INFO | head -1 | sed "s/^/127.0.0.1:$port /"
done
echo "try: redis-cli -c -p $first_port SET hello world; scripts/cluster.sh stop"
