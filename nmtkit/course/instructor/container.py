"""Where a graded notebook runs: in a container of the students' image (the default), or, with
`--trust-submissions`, in a local process as before. Either way the same driver (nmtkit.course.sandbox) runs it and
reports its figures files, why it stopped and the executed notebook; nothing there can see a verdict.

The container: no network, a read-only root with a size-capped tmpfs scratch (/tmp: the kernel's home, its working
directory, the figures), memory, CPU and pids caps, no capabilities, the graded notebook and the workspace it reads
mounted read-only, and a time limit kept by the driver and, behind it, by this process (`docker kill`). The image must
be the release of this kit's commit (its org.opencontainers.image.revision label, written by `make image`).
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import nmtkit
from nmtkit.course.figures import DIR_ENV
from nmtkit.course.sandbox import MARK
from nmtkit.errors import CourseError

KIT_IN_IMAGE = "/opt/nmtkit/nmtkit"  # the Dockerfile's WORKDIR + the package: where the image's kit sits
WS_IN_IMAGE, IN_DIR = "/grading/workspace", "/grading/in"
WS_COPY = "/tmp/ws"  # the driver's writable copy of the workspace, in the scratch (nmtkit.course.sandbox)
INSTALL = ("Docker is needed to grade in a sandbox: sudo apt-get install docker.io (or Docker Desktop), then build "
           "the students' image (make image in the release); podman's docker-compatible CLI (podman-docker) is "
           "untested with the kit. Or pass --trust-submissions to grade in this kit's own kernel, without a sandbox")


@dataclasses.dataclass
class Sandbox:
    """The limits a submission's notebook runs within (one container a notebook)."""
    image: str = "nmtkit-students:latest"  # `make image` in the release builds this tag
    seconds: float = 600.0                 # the notebook's wall time: notebook 05 reads its runs in about 30 s
    memory: str = "3g"                     # the course peaks at 3.2-3.6 GiB while training; grading trains nothing
    cpus: float = 2.0
    pids: int = 512                        # TensorFlow's and Jupyter's threads count: a kernel holds about 60
    scratch_mb: int = 512                  # /tmp: the kernel's home and working directory, the figures files
    output_bytes: int = 5_000_000          # the notebook's printed output, all cells together
    trusted: bool = False                  # --trust-submissions: a local process, no container

    def __post_init__(self):
        for f in ("seconds", "cpus", "pids", "scratch_mb", "output_bytes"):
            if not getattr(self, f) > 0:
                raise CourseError(f"sandbox {f}={getattr(self, f)}: must be above 0")


@dataclasses.dataclass
class Outcome:
    figures: dict            # grade id -> the figures file's text
    stopped: str | None      # why the notebook stopped before its end (None: it ran to its end)
    notebook: dict | None    # the executed notebook (outputs cut to the output limit), None if it never came back
    seconds: float
    roots: dict              # directory as the notebook saw it -> where the grader holds it (figures' paths)


def docker() -> str | None:
    return shutil.which("docker")


def ready(sandbox: Sandbox) -> None:
    """Refuse in one line when the sandbox cannot run: no Docker, no daemon, no image, or an image of another commit."""
    if sandbox.trusted:
        return
    exe = docker()
    if exe is None:
        raise CourseError(f"no docker command on this machine. {INSTALL}")
    info = subprocess.run([exe, "info"], capture_output=True, text=True)
    if info.returncode != 0:
        raise CourseError(f"docker cannot reach its daemon ({' '.join(info.stderr.split())[:160]}): start it "
                          f"(sudo systemctl start docker, or Docker Desktop), or pass --trust-submissions")
    out = subprocess.run([exe, "image", "inspect", "--format", "{{json .Config.Labels}}", sandbox.image],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise CourseError(f"no image {sandbox.image}: build the students' image from this kit's release "
                          f"(nmtkit release --out DIR; make -C DIR image), or name it with --image")
    from nmtkit.course.instructor.release import kit_commit
    labels = json.loads(out.stdout or "null") or {}
    theirs, ours = labels.get("org.opencontainers.image.revision", "unknown"), kit_commit()
    if theirs != ours or "+changes" in ours:
        raise CourseError(f"image {sandbox.image} is the release of commit {theirs[:12]}, this kit is at "
                          f"{ours[:12]}{' with uncommitted changes' if '+changes' in ours else ''}: make a release "
                          f"of this commit and build its image (nmtkit release --out DIR; make -C DIR image)")


def execute(nb, workspace: Path, sandbox: Sandbox, name: str = "notebook.ipynb", student: str | None = None,
            variant: str | None = None) -> Outcome:
    """Run the graded notebook `nb` (its check cells record figures) over `workspace`; see the module. `student`:
    the student id, set as $NMTKIT_STUDENT_ID where the notebook runs, and `variant` (the grader's, from that id) as
    $NMTKIT_VARIANT, so an honest notebook reads that variant; what a figure may be about is the grader's to decide
    (nmtkit.course.instructor.pinning), whatever the notebook sets."""
    from nmtkit.analysis import variants
    who = {variants.ENV_STUDENT: variants.check_id(student)} if student else {}
    if variant:
        variants.directory(variant)  # installed: one line, else
        who[variants.ENV_VARIANT] = variant
    import nbformat

    from nmtkit.course.student import kernel_name
    work = Path(tempfile.mkdtemp(prefix="nmtkit-sandbox-"))
    try:
        (work / "in").mkdir()
        nbformat.write(nb, work / "in" / name)
        args = ["--time", str(sandbox.seconds), "--output-bytes", str(sandbox.output_bytes), "--token-stdin"]
        kit = str(Path(nmtkit.__file__).resolve().parent)
        if sandbox.trusted:
            env = {**{k: v for k, v in os.environ.items() if k not in (variants.ENV_VARIANT, variants.ENV_STUDENT)},
                   "NMTKIT_WORKDIR": str(workspace), DIR_ENV: str(work / "figures"), "TMPDIR": str(work), **who}
            cmd = [sys.executable, "-m", "nmtkit.course.sandbox", str(work / "in" / name), *args,
                   "--kernel", kernel_name(nb)]
            roots = {str(Path(workspace).resolve()): workspace, kit: kit}
            kill = None
        else:
            cname = f"nmtkit-grade-{uuid.uuid4().hex[:12]}"
            # a copy readable by the image's user (a workspace made by mkdtemp, or a student's, may not be)
            stage = work / "ws"
            shutil.copytree(workspace, stage, symlinks=True)
            for p in [work, *work.rglob("*")]:
                if not p.is_symlink():
                    p.chmod(0o755 if p.is_dir() else 0o644)
            env = None
            cmd = [docker(), "run", "-i", "--rm", "--name", cname, "--network", "none", "--read-only",
                   "--tmpfs", f"/tmp:rw,nosuid,size={sandbox.scratch_mb}m", "--memory", sandbox.memory,
                   "--memory-swap", sandbox.memory, "--cpus", str(sandbox.cpus), "--pids-limit", str(sandbox.pids),
                   "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
                   "-e", "HOME=/tmp/home", "-e", "TMPDIR=/tmp", "-e", "MPLCONFIGDIR=/tmp/home/.mpl",
                   "-e", f"{DIR_ENV}=/tmp/figures", "-e", f"NMTKIT_WORKDIR={WS_IN_IMAGE}",
                   "-e", f"NMTKIT_PROFILE={os.environ.get('NMTKIT_PROFILE', 'tiny')}",
                   *[a for k, v in who.items() for a in ("-e", f"{k}={v}")],
                   "-v", f"{work / 'in'}:{IN_DIR}:ro", "-v", f"{stage}:{WS_IN_IMAGE}:ro",
                   "--entrypoint", "python", sandbox.image, "-m", "nmtkit.course.sandbox", f"{IN_DIR}/{name}",
                   *args, "--scratch", "/tmp", "--kernel", "nmtkit", "--workspace-from", WS_IN_IMAGE]
            roots = {WS_COPY: Path(workspace).resolve(), WS_IN_IMAGE: Path(workspace).resolve(), KIT_IN_IMAGE: kit}
            kill = [docker(), "kill", cname]
        return _follow(cmd, env, sandbox, roots, kill)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # ours: the notebook we wrote, and the local run's scratch


def _follow(cmd, env, sandbox: Sandbox, roots: dict, kill) -> Outcome:
    """Run the driver, read its report lines (at most a few times the output limit), and stop it past its time."""
    import secrets
    t0 = time.monotonic()
    figures, state = {}, {"stopped": None, "notebook": None, "ended": False}
    budget = [3 * sandbox.output_bytes + 20_000_000]
    # the driver's report lines carry this token, which only the driver holds (nmtkit.course.sandbox.seal): a line
    # the notebook's code printed, or wrote into the driver's output, is not the driver's
    token = secrets.token_hex(16)
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    try:
        proc.stdin.write(token.encode() + b"\n")
        proc.stdin.close()
    except OSError:
        pass  # the driver died at once: it reports nothing, and that is what the grades say

    def read():
        for raw in proc.stdout:
            budget[0] -= len(raw)
            if budget[0] < 0:
                continue  # drained, not kept: a driver whose pipe is full would stall
            line = raw.decode("utf-8", "replace")
            if not line.startswith(MARK):
                continue
            try:
                msg = json.loads(line[len(MARK):])
            except ValueError:
                continue
            if not isinstance(msg, dict) or msg.get("token") != token:
                continue
            if isinstance(msg.get("figures"), str) and isinstance(msg.get("text"), str):
                figures.setdefault(msg["figures"], msg["text"])  # the first report of a file is the one kept
            elif "stopped" in msg and not state["ended"]:
                state["stopped"], state["ended"] = msg["stopped"], True
            elif isinstance(msg.get("notebook"), dict) and state["notebook"] is None:
                state["notebook"] = msg["notebook"]
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(sandbox.seconds + 60)  # the driver keeps the time itself; this is the backstop
    timed_out = reader.is_alive() and not state["ended"]
    if reader.is_alive():
        subprocess.run(kill, capture_output=True) if kill else proc.kill()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
    stopped = state["stopped"]
    if timed_out:
        stopped = f"the time limit ({sandbox.seconds:.0f} s)"
    elif not state["ended"]:
        stopped = f"the sandbox ended without a report (exit status {proc.returncode})"
    return Outcome(figures, stopped, state["notebook"], time.monotonic() - t0,
                   {k: Path(v) for k, v in roots.items()})
