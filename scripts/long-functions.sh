#!/bin/sh
# Lists the C functions of scry's production code (everything but tests/) longer than N lines
# (default 150, the project's limit), longest first: "LINES FILE FUNCTION". Exits 1 when there
# is one. Needs universal-ctags (Debian: universal-ctags).
set -eu
limit=${1:-150}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
command -v ctags >/dev/null || { echo "long-functions: ctags not found (apt-get install universal-ctags)" >&2; exit 2; }
long=$(git ls-files '*.c' '*.h' | grep -v '^tests/' |
    xargs ctags --c-kinds=f --fields=+ne -o - |
    awk -F'\t' -v limit="$limit" '{
        start = 0; end = 0
        for (i = 4; i <= NF; i++) {
            if ($i ~ /^line:/) start = substr($i, 6)
            if ($i ~ /^end:/) end = substr($i, 5)
        }
        if (end - start + 1 > limit) print end - start + 1, $2, $1
    }' | sort -rn)
[ -z "$long" ] && exit 0
echo "$long"
exit 1
