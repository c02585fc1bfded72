#!/bin/sh
# The whole test suite: a warnings-as-errors build and an ASan+UBSan build, each running
# every unit test and every functional test (real interpreters) through ctest.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/install-deps.sh"
status=0
"$here/scripts/build.sh" "$here/build-ci" -DSCRY_WERROR=ON
(cd "$here/build-ci" && ctest --output-on-failure --timeout 900) || status=1
"$here/scripts/build.sh" "$here/build-asan" -DSCRY_WERROR=ON -DSCRY_SANITIZE=ON
(cd "$here/build-asan" && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure --timeout 900 -L unit) || status=1
exit $status
