#!/usr/bin/env bash
# Checks that every error reply's text lives in src/engine/errors.h/.cc: fails on a string
# literal in src/commands that begins with a Redis error code ("ERR ...", "WRONGTYPE ...", ...),
# naming each; comment lines are skipped. The check's own pattern is tried on a sample first, so
# that a broken grep cannot pass by matching nothing.
# Usage: tests/error_texts_test.sh [directory, default src/commands]
set -u

repo="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-$repo/src/commands}"
codes='ERR|WRONGTYPE|NOGROUP|BUSYGROUP|BUSYKEY|BUSY|EXECABORT|NOAUTH|WRONGPASS|NOPERM|OOM|MISCONF'
codes+='|CROSSSLOT|CLUSTERDOWN|TRYAGAIN|MOVED|ASK|NOPROTO|DENIED|IOERR|NOSCRIPT|READONLY|LOADING'
codes+='|MASTERDOWN|NOREPLICAS|UNBLOCKED'
pattern="\"-?($codes)[ \"]"

inline_errors() { grep -rnE --include='*.cc' --include='*.h' "$pattern" "$@" | grep -vE '^[^:]+:[0-9]+:\s*//'; }

sample="$(mktemp -d /tmp/prefixd-error-texts.XXXXXX)"
trap 'rm -rf "$sample"' EXIT
printf '%s\n' '  // "ERR in a comment" is fine' '  ctx.reply.Error("ERR no such key");' \
  '  return "NOGROUP No such consumer group";' > "$sample/sample.cc"
if [ "$(inline_errors "$sample" | wc -l)" -ne 2 ]; then
  echo "error_texts: the check's pattern no longer finds inline error texts" >&2
  exit 1
fi

found="$(inline_errors "$dir")"
if [ -n "$found" ]; then
  echo "error_texts: error texts written inline; name them in src/engine/errors.h instead:" >&2
  echo "$found" >&2
  exit 1
fi
echo "error_texts: no inline error texts under $dir"
