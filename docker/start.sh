#!/usr/bin/env bash
# The image's entrypoint (docker-stacks' conventions): run as root with NB_UID=<uid> (`docker run --user root -e
# NB_UID=1234 ...`), it gives jovyan that uid, owns the home to it and drops to it; then, unless
# NMTKIT_COPY_NOTEBOOKS=0 (a hub that brings its own), the course's notebooks are copied into ~/work: a missing one is
# copied, an existing one is never overwritten, and one this image changed since the copy was made is put beside it
# as NAME.<commit>.ipynb. The copies are trusted (their saved widgets show), then the command runs.
set -euo pipefail
KIT=/opt/nmtkit
NB_USER=${NB_USER:-jovyan}
if [ "$(id -u)" = 0 ]; then
  want=${NB_UID:-1000}
  if [ "$(id -u "$NB_USER")" != "$want" ]; then
    usermod -u "$want" "$NB_USER"
    chown -R "$want" "/home/$NB_USER"
  fi
  exec setpriv --reuid="$want" --regid="$(id -g "$NB_USER")" --init-groups env HOME="/home/$NB_USER" USER="$NB_USER" "$0" "$@"
fi
work=$HOME/work
mkdir -p "$work"
if [ "${NMTKIT_COPY_NOTEBOOKS:-1}" != 0 ]; then
  commit=$(cat "$KIT/COMMIT" 2>/dev/null || echo new)
  state=$work/.nmtkit-course   # the image's version of each notebook when it was last copied
  mkdir -p "$state"
  for src in "$KIT"/notebooks/[0-9][0-9]_*.ipynb; do
    name=$(basename "$src")
    sum=$(sha256sum < "$src" | cut -c1-16)
    if [ ! -e "$work/$name" ]; then
      cp "$src" "$work/$name.tmp" && mv -n "$work/$name.tmp" "$work/$name"
      echo "$sum" > "$state/$name"
      echo "[nmtkit] copied $name into $work" >&2
    elif [ "$(cat "$state/$name" 2>/dev/null)" != "$sum" ]; then
      beside="$work/${name%.ipynb}.${commit:0:12}.ipynb"
      [ -e "$beside" ] || { cp "$src" "$beside"; echo "[nmtkit] this image changed $name: its version is beside yours, $(basename "$beside")" >&2; }
      echo "$sum" > "$state/$name"
    fi
  done
  for f in "$KIT"/notebooks/*; do  # what the notebooks read beside them (sanitize.cfg, images), never over
    case $f in *.ipynb) continue;; esac
    [ -e "$work/$(basename "$f")" ] || cp -r "$f" "$work/"
  done
  jupyter trust "$work"/[0-9][0-9]_*.ipynb >/dev/null 2>&1 || echo "[nmtkit] could not trust the notebooks" >&2
fi
cd "$work"
exec "$@"
