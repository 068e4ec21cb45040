"""`nmtkit variant expected` and `nmtkit variant record`: the instructor's half of the variants command (a student's
release has neither: it carries no decisions and no recorder)."""
from __future__ import annotations

import subprocess
import sys

from nmtkit.errors import CourseError

RECORD_HELP = ("record graded variants as root, about 7-11 minutes each on 2 cores with nothing else on the machine "
               "(python -m tools.rehearsal.variant record ...: its --help says more)")


def expected() -> int:
    from nmtkit.course.instructor.variant_answers import write_practice_expected
    print(f"{write_practice_expected()}: the practice variant's expected figures (the release ships them)")
    return 0


def record(rest: list[str]) -> int:
    from nmtkit.course.instructor.release import ROOT
    if not (ROOT / "tools" / "rehearsal" / "variant.py").is_file():
        raise CourseError(f"{ROOT}: no tools/rehearsal/variant.py; record variants from the instructor's checkout")
    return subprocess.run([sys.executable, "-m", "tools.rehearsal.variant", "record", *rest], cwd=ROOT).returncode
