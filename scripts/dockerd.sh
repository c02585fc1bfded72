#!/bin/sh
# The test bed's own Docker engine (Debian's docker.io): a dockerd with its own data root,
# exec root and socket, no network set-up (containers run with --network none) and images
# imported from directories, never pulled. The data root is cached per machine, so an image
# is imported once; the engine runs only while the tests need it.
#
#   scripts/dockerd.sh start [PID]  -> starts it unless it answers already; prints
#                                      "started" or "running". PID (default the caller's
#                                      parent) is recorded as a user of the engine
#   scripts/dockerd.sh stop [PID]   -> PID no longer uses it; the engine (this script's,
#                                      by its pidfile) stops when no live user is left, so
#                                      suites of several checkouts can share it
#   scripts/dockerd.sh env          -> prints DOCKER_HOST=... (for eval / env)
#   scripts/dockerd.sh image NAME DIR [STAMP]
#                                   -> imports DIR as image NAME unless an image NAME
#                                      labelled with STAMP exists; prints NAME
#   SCRY_DOCKERD_DATA=DIR            -> data root (default /var/cache/scry-tests/dockerd)
# Exits 2 with "SKIP dockerd: <reason>" on stderr where the engine cannot run here.
set -eu
data=${SCRY_DOCKERD_DATA:-/var/cache/scry-tests/dockerd}
# the exec root holds containerd's and the engine's sockets: a short path (sun_path is
# 108 bytes and containerd nests its own sockets below it)
run=/run/scry-dk
sock=$run/d.sock
pidf=$run/dockerd.pid
log=$data.log
# Debian's client: /usr/local/bin may hold a newer one that speaks an API this engine lacks
docker=/usr/bin/docker
[ -x "$docker" ] || docker=$(command -v docker || echo docker)
export DOCKER_HOST=unix://$sock

skip() {
    echo "SKIP dockerd: $*" >&2
    exit 2
}

answers() {
    [ -S "$sock" ] && "$docker" version --format '{{.Server.Version}}' >/dev/null 2>&1
}

# The pid in the pidfile if that process is this engine (a dockerd with our exec root: not
# a stale file whose pid went to another process, another dockerd included), else nothing.
engine_pid() {
    [ -f "$pidf" ] || return 0
    p=$(cat "$pidf" 2>/dev/null || true)
    case "$p" in ''|*[!0-9]*) return 0 ;; esac
    [ "$(cat "/proc/$p/comm" 2>/dev/null || true)" = dockerd ] || return 0
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "--exec-root $run " && echo "$p"
    return 0
}

users=$run/users

# Records user $1 (a pid) of the engine.
add_user() {
    mkdir -p "$users"
    : >"$users/$1"
}

# Forgets user $1 and the users that no longer run; succeeds when none is left.
drop_user() {
    rm -f "$users/$1"
    for f in "$users"/*; do
        [ -e "$f" ] || continue
        kill -0 "${f##*/}" 2>/dev/null && return 1
        rm -f "$f"
    done
    return 0
}

start() {
    [ "$(id -u)" = 0 ] || skip "needs root"
    command -v dockerd >/dev/null 2>&1 || skip "no dockerd (apt-get install docker.io)"
    mkdir -p "$data" "$run"
    add_user "${1:-$PPID}"
    if answers; then
        echo running
        return 0
    fi
    p=$(engine_pid)
    if [ -n "$p" ]; then
        # a dockerd of ours that does not answer (starting, or wedged): give it 20 s
        i=0
        while [ $i -lt 200 ] && ! answers; do sleep 0.1; i=$((i + 1)); done
        answers && { echo running; return 0; }
        kill "$p" 2>/dev/null || true
        sleep 2
    fi
    rm -f "$pidf" "$sock"
    # setsid: the engine outlives the shell that started it and no terminal signal reaches it
    setsid dockerd --data-root "$data" --exec-root "$run" -H "unix://$sock" \
        --pidfile "$pidf" --iptables=false --ip-masq=false --bridge=none \
        --exec-opt native.cgroupdriver=cgroupfs --storage-driver overlay2 \
        --log-level warn </dev/null >"$log" 2>&1 &
    i=0
    while [ $i -lt 600 ] && ! answers; do
        if ! kill -0 $! 2>/dev/null; then
            skip "dockerd exited: $(tail -n 3 "$log" | tr '\n' ' ')"
        fi
        sleep 0.1
        i=$((i + 1))
    done
    answers || skip "dockerd does not answer after 60 s: $(tail -n 3 "$log" | tr '\n' ' ')"
    echo started
}

stop() {
    drop_user "${1:-$PPID}" || return 0
    p=$(engine_pid)
    [ -n "$p" ] || { rm -f "$pidf"; return 0; }
    # containers the tests left: removed by id (only this engine's)
    ids=$("$docker" ps -aq 2>/dev/null || true)
    [ -z "$ids" ] || "$docker" rm -f $ids >/dev/null 2>&1 || true
    kill "$p"
    i=0
    while [ $i -lt 300 ] && kill -0 "$p" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
    kill -0 "$p" 2>/dev/null && kill -9 "$p"
    rm -f "$pidf"
}

image() {
    name=$1 dir=$2 stamp=${3:-}
    have=$("$docker" image inspect --format '{{index .Config.Labels "scry.stamp"}}' "$name" \
           2>/dev/null || true)
    if [ -n "$have" ] && [ "$have" = "stamp:$stamp" ]; then
        echo "$name"
        return 0
    fi
    echo "scry: importing $dir as image $name (once per machine)" >&2
    # the tests' scratch directories under the root's /tmp are not part of the image
    tar -C "$dir" --exclude=./tmp/* --exclude=./proc/* --exclude=./sys/* -c . |
        "$docker" import -c "LABEL scry.stamp=stamp:$stamp" - "$name" >/dev/null
    echo "$name"
}

case "${1:-}" in
start) start "${2:-}" ;;
stop) stop "${2:-}" ;;
env) echo "DOCKER_HOST=$DOCKER_HOST" ;;
image) shift; [ $# -ge 2 ] || { echo "usage: $0 image NAME DIR [STAMP]" >&2; exit 1; }
       image "$@" ;;
*) echo "usage: $0 start|stop|env|image NAME DIR [STAMP]" >&2; exit 1 ;;
esac
