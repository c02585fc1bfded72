#!/bin/sh
# Builds (once per machine) a minimal Debian root of the host's own release (bookworm on
# Debian 12) holding python3 and nothing of scry's: the fresh system the package test
# (tests/func/install) installs scry's .deb into with dpkg -i, on a throw-away overlay. The
# root keeps the apt lists debootstrap fetched, so the package's Depends are installed in
# it with apt-get; the .debs apt fetches are kept in DIR.debs/ for later runs. Cached
# outside the repository like scripts/sid-root.sh's root; a second run only prints the path.
# Prints "SKIP debian-root: <reason>" and exits 0 where it cannot be built.
#
#   scripts/debian-root.sh          -> builds if missing, prints the root's path
#   scripts/debian-root.sh --path   -> only prints the path (built or not; never builds)
#   SCRY_DEBIAN_ROOT=DIR            -> where (default /var/cache/scry-tests/<release>-root)
set -eu
release=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
if [ -z "$release" ]; then
    echo "SKIP debian-root: /etc/os-release names no Debian release" >&2
    exit 0
fi
root=${SCRY_DEBIAN_ROOT:-/var/cache/scry-tests/$release-root}
pkgs=python3
stamp="$root/.scry-debian-root"
if [ "${1:-}" = --path ]; then
    echo "$root"
    exit 0
fi
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$release $pkgs" ]; then
    echo "$root"
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "SKIP debian-root: building $root needs root" >&2
    exit 0
fi
if ! command -v debootstrap >/dev/null 2>&1; then
    apt-get update -qq >/dev/null 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap \
        >/dev/null 2>&1 || { echo "SKIP debian-root: debootstrap cannot be installed" >&2; exit 0; }
fi
tmp="$root.tmp.$$"
rm -rf "$tmp"
mkdir -p "$(dirname "$root")"
echo "scry: building the Debian $release test root in $root (about 1-3 minutes, once per machine)" >&2
if ! debootstrap --variant=minbase --include="$pkgs" "$release" "$tmp" \
        http://deb.debian.org/debian >"$tmp.log" 2>&1; then
    echo "SKIP debian-root: debootstrap failed (last lines of $tmp.log follow)" >&2
    tail -n 5 "$tmp.log" >&2
    rm -rf "$tmp"
    exit 0
fi
rm -f "$tmp.log"
rm -rf "$tmp/var/cache/apt/archives/"*.deb
echo "$release $pkgs" >"$tmp/.scry-debian-root"
rm -rf "$root" "$root.debs"
mv "$tmp" "$root"
mkdir -p "$root.debs/partial"
echo "$root"
