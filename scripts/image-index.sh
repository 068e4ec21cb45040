#!/usr/bin/env bash
# One name for both architectures: the amd64 and the arm64 image pushed to a registry under NAME-amd64 and NAME-arm64,
# then an OCI index (a manifest list) under NAME pointing at both, made with Debian's buildah (`buildah manifest`;
# `docker buildx` needs its BuildKit image from a registry). `docker pull NAME` then gives each machine its own
# architecture's image, and a Mac's Docker Desktop the arm64 one. Prints the index's digest and each manifest's.
#   NAME=registry/nmtkit-students:latest  AMD64=local amd64 image  ARM64=local arm64 image
#   TLS_VERIFY=false for a registry on localhost without TLS (the heavy suite's)
set -euo pipefail
DOCKER=${DOCKER:-/usr/bin/docker}
: "${NAME:?NAME=registry/name:tag}" "${AMD64:?AMD64=the amd64 image}" "${ARM64:?ARM64=the arm64 image}"
TLS=--tls-verify=${TLS_VERIFY:-true}
say() { echo "[image-index] $*"; }
die() { echo "[image-index] ERROR: $*" >&2; exit 1; }
command -v buildah >/dev/null || die "no buildah: sudo apt-get install -y buildah"
for a in amd64 arm64; do
  local_image=$([ $a = amd64 ] && echo "$AMD64" || echo "$ARM64")
  got=$("$DOCKER" image inspect -f '{{.Os}}/{{.Architecture}}' "$local_image") || die "no image $local_image"
  [ "$got" = "linux/$a" ] || die "$local_image is $got, not linux/$a"
  "$DOCKER" tag "$local_image" "$NAME-$a"
  "$DOCKER" push -q "$NAME-$a" >/dev/null || die "docker push $NAME-$a failed"
  "$DOCKER" rmi "$NAME-$a" >/dev/null   # the tag only; the local image stays
  say "pushed $local_image as $NAME-$a"
done
# buildah's own store (vfs: no overlay mount needed) holds only the list, in a directory removed at the end
store=$(mktemp -d /tmp/nmtkit-buildah.XXXXXX)
trap 'buildah --root "$store/root" --runroot "$store/run" --storage-driver vfs rm -a >/dev/null 2>&1 || true; rm -rf "$store"' EXIT
bh() { buildah --root "$store/root" --runroot "$store/run" --storage-driver vfs "$@"; }
bh manifest create nmtkit-index >/dev/null
for a in amd64 arm64; do bh manifest add "$TLS" nmtkit-index "docker://$NAME-$a" >/dev/null; done
bh manifest push "$TLS" --all --format oci nmtkit-index "docker://$NAME" >/dev/null
skopeo inspect "$TLS" --raw "docker://$NAME" | python3 -c 'import json, sys, hashlib
raw = sys.stdin.buffer.read(); idx = json.loads(raw)
print("index", "sha256:" + hashlib.sha256(raw).hexdigest(), idx.get("mediaType", ""))
for m in idx["manifests"]:
    print(m["platform"]["os"] + "/" + m["platform"]["architecture"], m["digest"])'
