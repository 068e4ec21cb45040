"""The students' image, built as course staff build it (`nmtkit release --out DIR`, then `make image` there), and
removed with the build cache entries and dangling images its build made (others' stay).

One build per CI run: scripts/test-all.sh builds it before the heavy suites (`python tests/heavy/imagebuild.py build
DIR`), hands its tag and release to every pytest-xdist worker (NMTKIT_TEST_IMAGE, NMTKIT_TEST_RELEASE) and removes it
when they end (`... remove DIR`); a heavy suite run without them builds its own, once a session (conftest's `image`).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dockertools import docker  # (this file also runs as a script)

ARM64_TAG = "nmtkit-students-arm64:latest"


def dangling_images() -> set[str]:
    return set(docker("images", "-q", "--filter", "dangling=true", check=False).stdout.split())


def build_cache() -> set[str]:
    out = docker("system", "df", "-v", "--format", "{{json .BuildCache}}", check=False).stdout.strip()
    return {e["ID"] for e in json.loads(out or "[]") or []}


def build(where: Path, tag: str, arch: str = "amd64") -> tuple[Path, dict]:
    """A release in `where`/kit and its image tagged `tag` (arm64: under QEMU, `make image ARCH=arm64`): (the release,
    what to leave when removing it)."""
    from nmtkit.course import INSTRUCTOR_KIT
    if not INSTRUCTOR_KIT:  # a release ships this file, and its suites skip before they ask for an image
        raise AssertionError("the students' image is built from a release, which only the instructor's kit makes")
    from nmtkit.course.instructor import release
    rel = release.build(where / "kit")
    start, before = time.time(), {"cache": sorted(build_cache()), "dangling": sorted(dangling_images())}
    venv = Path(sys.executable).parents[1]
    wheelhouse = Path(__file__).resolve().parents[2] / ("wheelhouse" if arch == "amd64" else f"wheelhouse-{arch}")
    out = subprocess.run(["make", "-C", str(rel), "image", f"VENV={venv}", f"IMAGE={tag}", f"ARCH={arch}",
                          f"WHEELHOUSE={wheelhouse}"],
                         capture_output=True, text=True, env={**os.environ, "IMAGE": tag}, timeout=3600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    print(f"[image] {tag} ({arch}) built in {time.time() - start:.0f} s")
    return rel, before


def remove(tag: str, before: dict) -> None:
    """The image, and the build's own cache entries (dozens of GB over many CI runs) and the wheelhouse image it
    replaced (left untagged)."""
    docker("rmi", "-f", tag, check=False)
    for entry in build_cache() - set(before["cache"]):
        docker("builder", "prune", "-af", "--filter", f"id={entry}", check=False)
    for old in dangling_images() - set(before["dangling"]):
        docker("rmi", old, check=False)


def main(argv: list[str]) -> int:
    action, where = argv[0], Path(argv[1])
    state = where / "image.json"
    if action == "build":
        tag = f"nmtkit-students-ci-{os.getpid()}:latest"
        rel, before = build(where, tag)
        state.write_text(json.dumps({"tag": tag, "release": str(rel), **before}))
        print(f"NMTKIT_TEST_IMAGE={tag}\nNMTKIT_TEST_RELEASE={rel}")
        return 0
    if action == "build-arm64":  # kept between CI runs, with its build cache: a warm rebuild redoes the last layers
        before = dangling_images()
        rel, _ = build(where, ARM64_TAG, "arm64")
        for old in dangling_images() - before:  # the image the tag named before
            docker("rmi", old, check=False)
        print(f"NMTKIT_TEST_ARM64_IMAGE={ARM64_TAG}\nNMTKIT_TEST_ARM64_RELEASE={rel}")
        return 0
    if action == "remove" and state.exists():
        saved = json.loads(state.read_text())
        remove(saved["tag"], saved)
        state.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
