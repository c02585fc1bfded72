#!/bin/sh
# The fuzzers of tests/fuzz for longer than CI does: SECONDS per target (default 600).
# New corpus entries stay in build-fuzz/fuzz-work/; minimise and commit the interesting
# ones (`fuzz_X -merge=1 tests/fuzz/corpus/X build-fuzz/fuzz-work/X`), and every crash as a
# regression input once fixed.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
exec "$here/scripts/fuzz.sh" "${1:-600}"
