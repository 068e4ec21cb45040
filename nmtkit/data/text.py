"""Reading corpus text files with errors that name the file, the line and the fix."""
from __future__ import annotations

import os
from pathlib import Path

from nmtkit.errors import DataError


def read_lines(path: str | os.PathLike, *, allow_empty: bool = False, hint: str = "") -> list[str]:
    """The lines of a UTF-8 text file, without their newlines (\n or \r\n); NUL bytes are refused."""
    path = Path(path)
    hint = hint or "run `nmtkit prepare` (or prepare(cfg)) to (re)create it"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: no such file; {hint}") from None
    if not data and not allow_empty:
        raise DataError(f"{path}: the file is empty; {hint}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise DataError(f"{path}: line {line}: not valid UTF-8 ({e.reason} at byte {e.start}); "
                        f"re-encode the file as UTF-8 (e.g. iconv -f latin1 -t utf-8) or remove the line") from None
    nul = text.find("\0")
    if nul >= 0:
        raise DataError(f"{path}: line {text.count(chr(10), 0, nul) + 1}: contains a NUL byte (binary data, or UTF-16 "
                        f"text?); remove the line or re-encode the file as UTF-8")
    # Every split the same way: Windows line ends become \n and no \r is left inside a line (cleaning would turn a
    # stray \r into a space in train but not in dev/test, which are not cleaned).
    text = text.replace("\r\n", "\n").replace("\r", " ")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def read_parallel(src: str | os.PathLike, tgt: str | os.PathLike, **kw) -> tuple[list[str], list[str]]:
    """Both sides of a parallel corpus; they must have the same number of lines."""
    a, b = read_lines(src, **kw), read_lines(tgt, **kw)
    if len(a) != len(b):
        raise DataError(f"{src} has {len(a):,} lines but {tgt} has {len(b):,}: a parallel corpus needs one "
                             f"target line per source line; re-extract or re-download these files")
    return a, b
