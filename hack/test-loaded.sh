#!/usr/bin/env bash
# Runs `make test` beside two CPU-bound processes, as on a user's busy
# laptop: on a 2-core machine the suite then gets about a third of the CPU
# it gets alone. Every test must still pass: one that needs time waits on a
# condition or the virtual clock, never on the machine being idle.
#
#   hack/test-loaded.sh [make arguments]
#
# The last line is `test-loaded: passed in <s> s` or `test-loaded: failed
# in <s> s`.
set -uo pipefail
cd "$(dirname "$0")/.."
busy=()
for _ in 1 2; do
  # A shell loop that never sleeps: one core's worth of load each.
  bash -c 'while :; do :; done' &
  busy+=($!)
done
trap 'kill "${busy[@]}" 2>/dev/null' EXIT
start=$(date +%s)
make test "$@"
rc=$?
took=$(( $(date +%s) - start ))
kill "${busy[@]}" 2>/dev/null
if [ $rc -eq 0 ]; then
  echo "test-loaded: passed in ${took} s"
else
  echo "test-loaded: failed in ${took} s"
fi
exit $rc
