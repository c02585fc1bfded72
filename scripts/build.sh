#!/bin/sh
# Builds scry into build/ (or $1). Extra arguments go to cmake's configure step.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$here/build}
[ $# -gt 0 ] && shift
cmake -S "$here" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$dir" -j"$(nproc)"
