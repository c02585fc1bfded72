#!/bin/sh
# Builds the libFuzzer targets (tests/fuzz, clang, ASan+UBSan) into build-fuzz/ and runs
# each for SECONDS (default 15) starting from its committed corpus; new inputs go to
# build-fuzz/fuzz-work/<target>/, crashes to build-fuzz/fuzz-crashes/. Prints one line per
# target (executions, seconds, new corpus entries) and the totals. Exit 1 when a target
# crashed: add the crash file to tests/fuzz/corpus/<target>/ once fixed (a regression input).
# usage: scripts/fuzz.sh [SECONDS] [TARGET...]     (bench/fuzz.sh runs them longer)
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-15}
[ $# -gt 0 ] && shift
dir=${SCRY_FUZZ_BUILD:-$here/build-fuzz}
targets=$*
[ -n "$targets" ] || targets=$(cd "$here/tests/fuzz" && ls fuzz_*.c | sed 's/^fuzz_//; s/\.c$//')
# Only the fuzz targets and the libraries they need (the shim is gcc-only).
CC=clang cmake -S "$here" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSCRY_FUZZ=ON >/dev/null
cmake --build "$dir" -j"$(nproc)" --target $(for t in $targets; do printf 'fuzz_%s ' "$t"; done) \
    >"$dir/fuzz-build.log" 2>&1 || { tail -30 "$dir/fuzz-build.log"; exit 1; }
work=$dir/fuzz-work
crashes=$dir/fuzz-crashes
mkdir -p "$work" "$crashes"
# ASan keeps freed blocks in a quarantine (256 MB by default) to catch uses after free; with
# millions of short inputs that free tables of up to 1 MiB, its churn alone passed
# libFuzzer's 2 GB RSS limit (pystate_image, CI). 64 MB still catches a use right after a free.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=64"
status=0
total_runs=0
total_secs=0
for t in $targets; do
    mkdir -p "$work/$t"
    log=$work/$t.log
    start=$(date +%s)
    if "$dir/tests/fuzz/fuzz_$t" -max_total_time="$secs" -print_final_stats=1 \
        -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$crashes/$t-" \
        "$work/$t" "$here/tests/fuzz/corpus/$t" >"$log" 2>&1; then
        res=ok
    else
        res=CRASH
        status=1
    fi
    took=$(( $(date +%s) - start ))
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    runs=${runs:-0}
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    printf '%-22s %-5s %10s execs %4ss  cov %s  corpus +%s\n' "$t" "$res" "$runs" "$took" \
        "${cov:-?}" "$(ls "$work/$t" | wc -l)"
    [ "$res" = ok ] || grep -E 'ERROR|FUZZ_ASSERT|runtime error|SUMMARY|Test unit written' "$log" | head -8
    total_runs=$((total_runs + runs))
    total_secs=$((total_secs + took))
done
echo "fuzz: $total_runs executions in $total_secs s over $(echo $targets | wc -w) targets"
exit $status
