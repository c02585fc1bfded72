#!/bin/sh
# The whole test suite: a warnings-as-errors build running every test through ctest (unit
# tests, functional tests against every installed interpreter, native/attribution, memory,
# consumer and `top` tests), then an ASan+UBSan build running the unit tests, then the fuzzers.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/install-deps.sh" --test
# The Debian sid root (CPython 3.14/3.15, container image): built once per machine, cached.
"$here/scripts/sid-root.sh" >/dev/null
# A minimal root of the host's Debian release, the package test's fresh system (cached).
"$here/scripts/debian-root.sh" >/dev/null
status=0
"$here/scripts/build.sh" "$here/build-ci" -DSCRY_WERROR=ON
# The containers suites' Docker engine (own roots and socket): started once for the run,
# stopped at its end; a machine where it cannot start has those suites print SKIP.
"$here/scripts/dockerd.sh" start $$ >/dev/null || true
trap '"$here/scripts/dockerd.sh" stop $$' EXIT
# A case that fails is run once more (timing checks on a shared 2-core VM); a case that
# fails twice fails the run. Every retry is visible in the log ("Test Failed" then "Passed").
(cd "$here/build-ci" && ctest --output-on-failure --timeout 900 --repeat until-pass:2) || status=1
"$here/scripts/build.sh" "$here/build-asan" -DSCRY_WERROR=ON -DSCRY_SANITIZE=ON
# Under the sanitizers: every unit test (many of them drive real interpreters).
(cd "$here/build-asan" && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure --timeout 600 \
    -L unit) || status=1
# The functional suites' sanitizer subset (label asan, about 100 s): scry under ASan+UBSan
# and LeakSanitizer against real interpreters, and the fault suite's cycles.
(cd "$here/build-asan" && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure --timeout 900 \
    --repeat until-pass:2 -L asan) || status=1
# libFuzzer targets of every parser of target-controlled input, 5 s each (about 2 min with
# the clang build: the CI run stays within its hour); bench/fuzz_long.sh runs them longer.
"$here/scripts/fuzz.sh" 5 || status=1
exit $status
