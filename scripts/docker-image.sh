#!/bin/sh
# Builds scry's own container image, scry:local, from a build tree, offline: a minimal root
# file system holding the scry executable, the memory shim, the shared libraries both load
# (found with ldd) and the terminal descriptions of `scry top`, imported with `docker
# import` (no registry, no base image).
#
#   scripts/docker-image.sh [BUILD_DIR] [IMAGE]    (default: build, scry:local)
#
# The root is left in BUILD_DIR/docker-image/rootfs (a container may mount it to run scry
# from another image: see docs/containers.md). Uses the engine DOCKER_HOST names (the test
# bed's: eval "$(scripts/dockerd.sh env)"). Re-imports only when the binary or the shim
# changed, or this script (the image is labelled with their hash). Prints the image's name.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
image=${2:-scry:local}
docker=/usr/bin/docker
[ -x "$docker" ] || docker=docker
scry=$build/daemon/scry
shim=$build/shim/libscry-shim.so
for f in "$scry" "$shim"; do
    [ -f "$f" ] || { echo "docker-image.sh: no $f (build first: scripts/build.sh $build)" >&2; exit 1; }
done
stamp=$(cat "$scry" "$shim" "$0" | sha1sum | cut -c1-16)
have=$("$docker" image inspect --format '{{index .Config.Labels "scry.stamp"}}' "$image" \
       2>/dev/null || true)
root=$build/docker-image/rootfs
if [ "$have" = "stamp:$stamp" ] && [ -d "$root" ]; then
    echo "$image"
    exit 0
fi
rm -rf "$root"
mkdir -p "$root/usr/bin" "$root/usr/lib/scry" "$root/etc" "$root/tmp" "$root/proc" \
         "$root/sys" "$root/dev" "$root/var/lib/scry" "$root/run/scry"
chmod 1777 "$root/tmp"
cp "$scry" "$root/usr/bin/scry"
cp "$shim" "$root/usr/lib/scry/libscry-shim.so" # where scry looks: ../lib/scry/ beside it
# every library either loads, at the path the loader gives (copied, links resolved)
{ ldd "$scry"; ldd "$shim"; } | awk '/=> \// { print $3 } /^[ \t]*\/[^ ]+ \(/ { print $1 }' |
    sort -u | while read -r lib; do
        mkdir -p "$root$(dirname "$lib")"
        cp -L "$lib" "$root$lib"
    done
# the terminal descriptions `scry top` needs (ncurses-base's small set, about 230 KB)
[ -d /lib/terminfo ] && mkdir -p "$root/lib" && cp -r /lib/terminfo "$root/lib/terminfo"
# scry names users (ctl, serve's socket owner) and needs nothing else of /etc
printf 'root:x:0:0:root:/root:/bin/false\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' \
    >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
tar -C "$root" -c . | "$docker" import -c "LABEL scry.stamp=stamp:$stamp" \
    -c 'ENV PATH=/usr/bin' -c 'WORKDIR /tmp' - "$image" >/dev/null
echo "$image"
