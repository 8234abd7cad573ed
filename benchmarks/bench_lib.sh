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
    # Below Linux's ephemeral range (32768 up): a port there may be taken between this check and
    # the server's bind by a client connection's own end (a server then "did not answer PING").
    port=$((20000 + RANDOM % 12000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return
    fi
  done
  echo "no free port found" >&2
  exit 1
}

# Nanoseconds the threads of process $1 have spent on a CPU, summed (schedstat: /proc/PID/stat's
# ticks are 10 ms, as coarse as a whole run's difference between two builds; %.0f because mawk's
# %d stops at 2^31).
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f", s }'; }

wait_ready() {  # port name
  for _ in $(seq 1 100); do
    [[ $(timeout 2 redis-cli -p "$1" PING 2>/dev/null) == PONG ]] && return
    sleep 0.1
  done
  echo "$2 did not answer PING on port $1" >&2
  exit 1
}

# Tables from a results file of tab-separated rows: kind, row, server, rep, value, p50, p99.
# bench_median FILE KIND ROW SERVER COLUMN: the median over reps of column 5, 6 or 7 ("nan" if none).
bench_median() {
  awk -F'\t' -v k="$2" -v r="$3" -v s="$4" -v c="$5" '$1 == k && $2 == r && $3 == s { print $c }' \
    "$1" | sort -g | awk '{ v[NR] = $1 } END {
      if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2];
      else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# bench_show_table FILE: the tables on stdout, the time taken on stderr (needs `elapsed`).
bench_show_table() {
  echo
  cat "$1"
  echo
  echo "total $(elapsed)" >&2
}
bench_ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f×", a / b; else print "n/a" }'; }
bench_fmt() { awk -v v="$1" -v f="$2" 'BEGIN { printf f, v }'; }

# The machine, for a section's header lines: "2 CPUs (AMD EPYC), 24 GiB, Linux 6.1".
bench_machine() {
  local cpu mem
  cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
  mem=$(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
  echo "$(nproc) CPUs ($cpu), $mem, Linux $(uname -r)"
}

# bench_write_section DOC TITLE FILE: replaces the section "## TITLE" of DOC (up to the next "## "
# or "### " heading: subsections are written by hand and kept) with FILE, which starts with that
# heading, or appends FILE when DOC has no such section.
bench_write_section() {
  local doc=$1 title=$2 section=$3
  [[ -f $doc ]] || printf '# Benchmarks\n\n' >"$doc"
  awk -v section="$section" -v title="## $title" '
    { heading = $0; sub(/[[:space:]]+$/, "", heading) }
    heading == title {
      while ((getline line < section) > 0) print line
      done = 1; skipping = 1; next
    }
    skipping && /^###? / { skipping = 0 }
    !skipping { print }
    { last = $0 }
    END {
      if (!done) {
        if (last != "") print ""
        while ((getline line < section) > 0) print line
      }
    }
  ' "$doc" >"$work/doc.md"
  cp "$work/doc.md" "$doc"
}

# The options of the scripts that drive prefixd-server and redis-server side by side:
#   --build-dir DIR (default: the first argument), --server BIN, --quick, --reps N (default 5),
#   --no-write; --help prints the script's opening comment.
# Sets build_dir, server_bin, bench_bin (prefixd-blob-bench), quick, reps, write_doc and commit
# (the commit as the run starts; the binaries are assumed to be built from this tree), and checks
# that the binaries and the tools the scripts use are there. Needs `repo`.
bench_parse_options() {  # default-build-dir "$@"
  local script=${0##*/}
  build_dir=$1
  shift
  server_bin=
  quick=0
  reps=5
  write_doc=1
  while [[ $# -gt 0 ]]; do
    case $1 in
      --build-dir) build_dir=$2; shift 2 ;;
      --server) server_bin=$2; shift 2 ;;
      --quick) quick=1; shift ;;
      --reps) reps=$2; shift 2 ;;
      --no-write) write_doc=0; shift ;;
      -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
      *) echo "$script: unknown argument '$1'" >&2; exit 2 ;;
    esac
  done
  [[ $build_dir = /* ]] || build_dir=$repo/$build_dir
  server_bin=${server_bin:-$build_dir/prefixd-server}
  [[ $server_bin = /* ]] || server_bin=$PWD/$server_bin
  bench_bin=$build_dir/prefixd-blob-bench
  [[ -x $bench_bin ]] || bench_bin=$build_dir/benchmarks/prefixd-blob-bench
  local bin tool
  for bin in "$server_bin" "$bench_bin"; do
    [[ -x $bin ]] || { echo "missing $bin; build prefixd-server and prefixd-blob-bench" >&2; exit 2; }
  done
  for tool in redis-server redis-cli redis-benchmark jq timeout; do
    command -v "$tool" >/dev/null || { echo "$script needs $tool" >&2; exit 2; }
  done
  commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
  if ! git -C "$repo" --no-optional-locks diff --quiet HEAD -- src benchmarks 2>/dev/null; then
    commit="$commit (plus uncommitted changes under src/ or benchmarks/)"
  fi
}
