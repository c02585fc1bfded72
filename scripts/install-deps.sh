#!/bin/sh
# Installs what scry needs to build, run and test, from Debian 12 packages only.
# Run as root. Installs only what is missing; safe to run again.
#   --test: also the container engines the containers suite runs (Debian's docker.io,
#           rootless podman with uidmap) and strace (scripts/test.sh passes it)
set -eu
extra=""
[ "${1:-}" = --test ] && extra="docker.io podman uidmap strace"
need=""
for p in $extra build-essential cmake pkg-config libelf-dev libunwind-dev libcapstone-dev \
         libprotobuf-c-dev protobuf-c-compiler zlib1g-dev libncurses-dev libiberty-dev \
         libinih-dev libjson-c-dev libcurl4-openssl-dev libzstd-dev liblz4-dev liblzma-dev \
         clang bpftool libbpf-dev \
         python3 python3-numpy procps util-linux tmux golang-go chromium gdb zstd lz4 xz-utils; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need="$need $p"
done
if [ -n "$need" ]; then
    echo "scry: installing:$need"
    if [ "$(id -u)" != 0 ]; then
        echo "scry: installing packages needs root (run as root or with sudo)" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need
fi
