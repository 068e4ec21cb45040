"""The rubric's form: a question's rubric is a list of items, each with what a full answer holds, its points and the
misconception it targets (the wrong answers the original submissions showed), if any. The items themselves are in
each question's record (nmtkit.course.instructor.book); the instructor's copy of notebook 05 and `nmtkit report
--instructor` print them beside the kit's verdict. Student copies and a plain `nmtkit report` never do."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Item:
    text: str                 # what a full answer holds
    points: int
    misconception: str = ""   # the wrong answer this item catches, if any


def render(items) -> str:
    """The items in words, one line: 'Full marks (N points): a (p); b (p). Wrong: x; y.'"""
    total = sum(i.points for i in items)
    full = "; ".join(f"{i.text} ({i.points} pt{'s' if i.points != 1 else ''})" for i in items)
    wrong = "; ".join(i.misconception for i in items if i.misconception)
    return f"Full marks ({total} points): {full}." + (f" Wrong: {wrong}." if wrong else "")


# the verdicts' words on what utilisation cannot show (nmtkit.course.instructor.verdicts, question 4)
NVML_MEANING = ("(NVML's 'utilization' is the share of time at least one kernel ran on the GPU, not how much of the "
                "GPU worked: a GPU at 100% can leave most of its cores idle. Model FLOPs utilisation, MFU, says how "
                "much of the peak arithmetic the model used.)")
NCCL_WAIT = ("A wait for the gradient exchange does not show as idle: NCCL's kernels run on the GPU while the "
             "network is slow, so even 100% does not rule out a network bottleneck; question 5 decides that.")
