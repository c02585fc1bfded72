#!/bin/sh
# Runs one of the sid root's interpreters as if it were installed on the host, for the
# functional tests: sid-python.sh LABEL ARGS...   (LABEL: 3.14, 3.15, 3.14d, 3.15d)
#
# The interpreter runs under chroot in a private mount namespace in which /tmp and the
# top-level directory of this checkout (and of every directory in SCRY_SID_SHARE,
# colon-separated) are bind-mounted at the same paths inside the root: the tests' workloads,
# temporary files, and scry's memory shim in the build tree have the same path inside and
# outside, and nothing is copied or left mounted when the process exits. The working
# directory is kept. The process keeps the PID it was started with (every step execs).
# Needs root (chroot, mount). Exits 3 with "SKIP sid-root: ..." when the root is missing.
set -eu
label=$1
shift
root=${SCRY_SID_ROOT:-/var/cache/scry-tests/sid-root}
exe="$root/usr/bin/python$label"
if [ ! -x "$exe" ]; then
    echo "SKIP sid-root: no $exe (build it with scripts/sid-root.sh)" >&2
    exit 3
fi
here=$(cd "$(dirname "$0")/.." && pwd)
top=/$(echo "$here" | cut -d/ -f2)
share="$top:${SCRY_SID_SHARE:-}"
exec unshare -m --propagation private /bin/sh -c '
    root=$1 label=$2 share=$3 cwd=$4
    shift 4
    mount --bind /tmp "$root/tmp"
    IFS=:
    for d in $share; do
        [ -n "$d" ] && [ -d "$d" ] || continue
        mkdir -p "$root$d"
        mount --rbind "$d" "$root$d"
    done
    exec chroot "$root" /bin/sh -c "cd \"\$0\" 2>/dev/null || cd /; exec /usr/bin/python$label \"\$@\"" "$cwd" "$@"
' sid-python "$root" "$label" "$share" "$PWD" "$@"
