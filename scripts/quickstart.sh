#!/bin/sh
# Quick start: install what is missing, build scry, and profile the bundled demo.
# Writes demo-profile.svg (a flame graph) and prints the hottest lines.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/install-deps.sh"
"$here/scripts/build.sh"
py=$(command -v python3)
"$here/build/daemon/scry" record --rate 200 -o demo-profile.svg -- "$py" "$here/demo/demo.py"
"$here/build/daemon/scry" record --rate 200 --format text -o - -q -- "$py" "$here/demo/demo.py"
echo "scry: wrote $(pwd)/demo-profile.svg"
