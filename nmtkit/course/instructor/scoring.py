"""The grader's half of a check cell: what the locked cell asks (its function and arguments, from the instructor's
notebook, never from the run), the cell that records them where the notebook runs, and the score from what it
recorded, decided here, in the instructor's process, by the instructor's checks.

A check cell's call `nk.<function>(<args>)` becomes a `Call`: the function, and per parameter either a literal of
the instructor's cell (a question's name: the run cannot change it) or an expression the notebook evaluates (the
student's figures). `recorder(call)` is the cell the sandbox runs; `decide(call, text, decoder)` scores its figures
file: passed with the check's own line, failed with the reason (a figure missing, not of its form, or wrong), or
"manual" for a question graded by hand. Nothing the notebook did beyond the figures it wrote reaches this.
"""
from __future__ import annotations

import ast
import contextlib
import dataclasses
import inspect
import io
import json

from nmtkit.course import exercises, practice
from nmtkit.course.figures import Decoder
from nmtkit.errors import CourseError

FUNCTIONS = {f.__name__: f for f in (exercises.check, exercises.check_plan, practice.check_file_size,
                                     practice.check_schedule, practice.check_link_share, practice.check_batching,
                                     practice.check_sample_ceiling)}


@dataclasses.dataclass
class Call:
    grade_id: str
    function: str
    literals: dict   # parameter -> value written in the instructor's cell
    exprs: dict      # parameter -> the expression's source, evaluated by the notebook

    @property
    def question(self) -> str | None:
        return self.literals.get("question")


def parse(grade_id: str, source: str) -> Call:
    """The check cell's one call `nk.<function>(...)`, by parameter name."""
    tree = ast.parse(source)
    calls = [n.value for n in tree.body if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)]
    if len(calls) != 1 or not (isinstance(calls[0].func, ast.Attribute) and calls[0].func.attr in FUNCTIONS):
        raise CourseError(f"{grade_id}: a check cell must be one call of {', '.join(sorted(FUNCTIONS))}")
    call, fn = calls[0], calls[0].func.attr
    params = list(inspect.signature(FUNCTIONS[fn]).parameters)
    named = {params[i]: a for i, a in enumerate(call.args)}
    named.update({k.arg: k.value for k in call.keywords})
    literals, exprs = {}, {}
    for name, node in named.items():
        if isinstance(node, ast.Constant):
            literals[name] = node.value
        else:
            exprs[name] = ast.unparse(node)
    return Call(grade_id, fn, literals, exprs)


def recorder(call: Call) -> str:
    """The source of the cell that records `call`'s figures where the notebook runs."""
    thunks = ", ".join(f"{name!r}: lambda: {expr}" for name, expr in call.exprs.items())
    return ("from nmtkit.course.figures import record as _nmtkit_record\n"
            f"_nmtkit_record({call.grade_id!r}, {call.function!r}, {{{thunks}}})")


def hand_graded(call: Call) -> str | None:
    """Why `call`'s question is graded by hand for now (its record: nmtkit.course.instructor.book), else None."""
    from nmtkit.course.instructor.book import hand_graded as why
    return why(call.question or "", grader=True)


def decide(call: Call, text: str | None, decoder: Decoder, pin=None) -> dict:
    """{status, message, figures}: the check's verdict on the figures file's `text` (None: never written); a
    question graded by hand for now is "manual" whatever its figures, with what the check found beside it. `pin`
    (nmtkit.course.instructor.pinning.Pin): the runs the figures may be about, the grader's, never the notebook's."""
    got = _decide(call, text, decoder, pin)
    why = hand_graded(call)
    if why:
        found = "" if got["status"] == "passed" else f"; the check found: {got['message']}"
        got.update(status="manual", message=f"graded by hand ({why}){found}")
    return got


def numbers(args: dict, names) -> dict:
    """The recorded figures of `names` as numbers, for the class report's copy flag: a number typed as text
    ("0.514") is the same figure, though its check fails it for its form."""
    out = {}
    for k, v in args.items():
        if k not in names or isinstance(v, bool):
            continue
        if isinstance(v, str):
            try:
                v = float(v.strip())
            except ValueError:
                continue
        if isinstance(v, (int, float)):
            out[k] = v
    return out


def form(call: Call, values: dict) -> str | None:
    """Why a figure is not of the form its check's parameter declares (text for a number or a yes/no), else None:
    "0.514" is the student's text, not a figure, though a check's arithmetic would read it as one."""
    params = inspect.signature(FUNCTIONS[call.function]).parameters
    for name in call.exprs:
        kind = str(params[name].annotation) if name in params else ""
        if kind in ("float", "bool", "int") and isinstance(values.get(name), (str, bytes)):
            return f"{name}: not of its form (text, {values[name]!r:.40}, where a {kind} is asked for)"
    return None


def _decide(call: Call, text: str | None, decoder: Decoder, pin=None) -> dict:
    if text is None:
        return {"status": "failed", "message": "no figures recorded (the notebook never ran this check)",
                "figures": {}}
    try:
        data = json.loads(text)
        args = data["args"] if isinstance(data, dict) and isinstance(data.get("args"), dict) else None
        if args is None:
            raise ValueError("no args")
    except (ValueError, TypeError) as e:
        return {"status": "failed", "message": f"the figures file is not one ({e})", "figures": {}}
    figures = numbers(args, call.exprs)
    values = dict(call.literals)
    for name in call.exprs:
        if name not in args:
            return {"status": "failed", "message": f"{name}: missing from the figures", "figures": figures}
        try:
            values[name] = decoder(args[name])
        except CourseError as e:
            return {"status": "failed", "message": f"{name}: {e}", "figures": figures, "name_error":
                    str(e).startswith("NameError")}
        except Exception as e:  # noqa: BLE001  a claimed run that does not load, a table of another shape
            return {"status": "failed", "message": f"{name}: not of its form ({type(e).__name__}: "
                    f"{' '.join(str(e).split())[:200]})", "figures": figures}
    why = form(call, values) or (pin.problem(call, values) if pin is not None else None)
    if why:
        return {"status": "failed", "message": why, "figures": figures}
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            FUNCTIONS[call.function](**values)
    except Exception as e:  # noqa: BLE001  the instructor's check raised: that is its verdict
        return {"status": "failed", "message": f"{type(e).__name__}: {' '.join(str(e).split())}", "figures": figures}
    printed = out.getvalue().strip()
    return {"status": "passed", "message": printed.splitlines()[-1] if printed else "", "figures": figures}
