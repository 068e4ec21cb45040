#!/usr/bin/env bash
# The Dockerfile's default base, debian:bookworm-slim, built from Debian's own packages where no image registry is
# reachable: debootstrap (minbase) from the Debian mirror apt already uses, made an image and tagged with exactly that
# name, so the same Dockerfile builds here and anywhere (elsewhere `docker pull debian:bookworm-slim` gives it).
# Idempotent: an existing image of that name is kept (FORCE=1 rebuilds). Needs root, debootstrap and docker.
#   BASE=debian:bookworm-slim  ARCH=amd64|arm64 (another arch needs qemu-user-static and binfmt-support)
set -euo pipefail
BASE=${BASE:-debian:bookworm-slim}
DOCKER=${DOCKER:-/usr/bin/docker}   # Debian's docker.io client (the one first on PATH may lack buildx)
ARCH=${ARCH:-$(dpkg --print-architecture 2>/dev/null || echo amd64)}
say() { echo "[base-image] $*"; }
die() { echo "[base-image] ERROR: $*" >&2; exit 1; }
[ -x "$DOCKER" ] || DOCKER=$(command -v docker) || die "no docker client: sudo apt-get install -y docker.io"
if [ "${FORCE:-0}" != 1 ] && "$DOCKER" image inspect "$BASE" >/dev/null 2>&1 &&
   [ "$("$DOCKER" image inspect -f '{{.Architecture}}' "$BASE")" = "$ARCH" ]; then
  say "$BASE ($ARCH) is already here; FORCE=1 rebuilds it"; exit 0
fi
if "$DOCKER" pull --platform "linux/$ARCH" "$BASE" >/dev/null 2>&1; then say "pulled $BASE"; exit 0; fi
[ "$(id -u)" = 0 ] || die "debootstrap needs root: sudo $0"
command -v debootstrap >/dev/null 2>&1 || die "no debootstrap: sudo apt-get install -y debootstrap"
# the mirror apt uses here (a deb822 or a one-line source), else Debian's CDN
MIRROR=${MIRROR:-$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -1)}
MIRROR=${MIRROR:-$(awk '$1=="deb" && $0 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SUITE=${SUITE:-${BASE##*:}}; SUITE=${SUITE%%-*}   # debian:bookworm-slim(-arm64) -> bookworm
root=$(mktemp -d /tmp/nmtkit-base.XXXXXX)
trap 'rm -rf "$root"' EXIT
say "debootstrap --variant=minbase --arch=$ARCH $SUITE from $MIRROR (about a minute)"
debootstrap --variant=minbase --arch="$ARCH" "$SUITE" "$root" "$MIRROR" > "$root.log" 2>&1 ||
  { tail -5 "$root.log" >&2; die "debootstrap failed (log: $root.log)"; }
rm -f "$root.log"
# as the slim image: no apt lists, caches or docs; the same sources as Debian's image
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/usr/share/doc/* "$root"/usr/share/man/*
printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\nTypes: deb\nURIs: http://deb.debian.org/debian-security\nSuites: %s-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
  "$SUITE" "$SUITE" "$SUITE" > "$root/etc/apt/sources.list.d/debian.sources"
rm -f "$root/etc/apt/sources.list"
# a BuildKit build FROM scratch, not `docker import`: dockerd 20.10's import drops --platform (a foreign base came out
# labelled amd64, and the Dockerfile's build then looked for the base on a registry)
ctx=$(mktemp -d /tmp/nmtkit-base-ctx.XXXXXX)
trap 'rm -rf "$root" "$ctx"' EXIT
tar -C "$root" -cf "$ctx/rootfs.tar" .
printf 'FROM scratch\nADD rootfs.tar /\nCMD ["bash"]\n' |
  DOCKER_BUILDKIT=1 "$DOCKER" build -q --platform "linux/$ARCH" -t "$BASE" -f - "$ctx" >/dev/null
got=$("$DOCKER" image inspect -f '{{.Architecture}}' "$BASE")
[ "$got" = "$ARCH" ] || die "$BASE came out as $got, not $ARCH"
say "tagged $BASE ($got, $("$DOCKER" image inspect -f '{{.Size}}' "$BASE") bytes)"
