"""What the sandbox costs a grader: notebook 05 (the instructor's solutions as the submission) graded in a container of
the students' image and in this kit's own kernel (--trust-submissions), alternating, then a class of N copies with
--jobs J both ways, all in one run on one host. Prints each time and the ratios; the sandbox's cost per submission is
the class's difference over N.

    python bench/grading.py [--image nmtkit-students:latest] [--repeat 3] [--class-size 20] [--jobs 2]

Needs Docker and the students' image of this commit (nmtkit release --out DIR; make -C DIR image) and a clean
checkout (the image must be this commit's release). Figures go to bench/README.md, dated, with the host.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
NB05 = "05_monitoring_analysis.ipynb"


def main() -> int:
    from nmtkit.course.instructor.classgrade import grade_class
    from nmtkit.course.instructor.container import Sandbox, ready
    from nmtkit.course.instructor.grade import grade
    from nmtkit.course.student import NOTEBOOKS_DIR
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--image", default=Sandbox.image)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--class-size", type=int, default=20)
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    ways = {"sandbox": Sandbox(image=a.image), "trusted": Sandbox(trusted=True)}
    ready(ways["sandbox"])
    with tempfile.TemporaryDirectory(prefix="nmtkit-bench-grading-") as d:
        d = Path(d)
        sub = d / "sub"
        sub.mkdir()
        shutil.copy(NOTEBOOKS_DIR / NB05, sub / NB05)
        grade(sub, sandbox=ways["sandbox"])  # warm: the image's files in the page cache, the grading data cached
        single: dict = {w: [] for w in ways}
        points = {}
        for _ in range(a.repeat):
            for w, sb in ways.items():
                t0 = time.perf_counter()
                [r] = grade(sub, sandbox=sb)
                single[w].append(time.perf_counter() - t0)
                points[w] = f"{r['points']:g}/{r['max_points']:g}"
        cls = d / "class"
        for i in range(a.class_size):
            shutil.copytree(sub, cls / f"student{i:02d}")
        whole = {}
        for w, sb in ways.items():
            t0 = time.perf_counter()
            frame, _ = grade_class(cls, d / f"out-{w}", jobs=a.jobs, sandbox=sb)
            whole[w] = time.perf_counter() - t0
            assert (frame["points"] == frame["max_points"]).all(), frame[frame["points"] != frame["max_points"]]
    med = {w: statistics.median(v) for w, v in single.items()}
    print(f"notebook 05, one submission (median of {a.repeat}, alternating):")
    for w in ways:
        print(f"  {w:8s} {med[w]:6.1f} s   ({', '.join(f'{t:.1f}' for t in single[w])}; {points[w]} points)")
    print(f"  sandbox / trusted: {med['sandbox'] / med['trusted']:.2f}x, +{med['sandbox'] - med['trusted']:.1f} s")
    print(f"a class of {a.class_size}, --jobs {a.jobs}:")
    for w in ways:
        print(f"  {w:8s} {whole[w]:6.1f} s   ({whole[w] / a.class_size:.1f} s a submission)")
    extra = (whole["sandbox"] - whole["trusted"]) / a.class_size
    print(f"  sandbox / trusted: {whole['sandbox'] / whole['trusted']:.2f}x, {extra:+.1f} s a submission")
    return 0


if __name__ == "__main__":
    sys.exit(main())
