"""Small file helpers used everywhere: atomic writes (temp file + fsync + rename), JSON read with a domain
error, JSON lines, sha256. No other module writes a file by hand."""
from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Iterable, Iterator

_UMASK = os.umask(0)
os.umask(_UMASK)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """A temp path beside `path` to write (or stream) into; on success it is fsynced and renamed to `path`,
    on an exception removed, so `path` is either the old file or the complete new one, never half of it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDWR)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes owner-only files; data dirs are shared like any other file
        os.replace(tmp, path)
    except BaseException as e:  # noqa: BLE001  any failure (an interrupt too) leaves no temporary file; re-raised
        tmp.unlink(missing_ok=True)
        raise with_path(e, path)


def with_path(e: BaseException, path: Path) -> BaseException:
    """`e`, and if it is an OSError that names no file (a write() on a full disk), naming `path` for os_problem."""
    if isinstance(e, OSError) and e.filename is None:
        e.filename = str(path)
    return e


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write `data` so that `path` is either the old file or the complete new one, never half of it."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def read_json(path: str | os.PathLike, error: type[Exception] = ValueError, *, missing=..., hint: str = ""):
    """Parse a JSON file, or raise `error` with one line naming the file (and the line for bad JSON).

    `missing`: returned when the file does not exist (default: raise). `hint`: what the file should be.
    """
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if missing is not ...:
            return missing
        raise error(f"{path}: no such file" + (f"; {hint}" if hint else "")) from None
    except json.JSONDecodeError as e:
        raise error(f"{path}: line {e.lineno}: not valid JSON ({e.msg})" + (f"; {hint}" if hint else "")) from None
    except UnicodeDecodeError:
        raise error(f"{path}: not UTF-8 text" + (f"; {hint}" if hint else "")) from None


def append_jsonl(path: str | os.PathLike, record: dict) -> None:
    """Append one record as one line; a reader of an unfinished run sees whole lines only (see read_jsonl)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, separators=(",", ":")) + "\n")
    except OSError as e:
        raise with_path(e, path)


def read_jsonl(path: str | os.PathLike) -> Iterator[dict]:
    """Records of a JSONL file; a torn last line (a run killed mid-write) is skipped, other bad lines raise."""
    path = Path(path)
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError as e:
            if i == len(lines) and not line.endswith("\n"):
                return  # the writer died mid-line
            raise ValueError(f"{path}: line {i}: not valid JSON ({e.msg})") from None


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def write_lines_atomic(path: str | os.PathLike, lines: Iterable[str]) -> Path:
    return atomic_write_text(path, "".join(line + "\n" for line in lines))


_OS_ADVICE = {  # errno -> what the user can do about it
    errno.ENOSPC: "the disk is full: free disk space (df -h) or point the command at another disk, then run it "
                  "again (finished steps are kept)",
    errno.EEXIST: "a file where a directory belongs: pass a directory (a new one, or one the kit made)",
    errno.ENOTDIR: "a file where a directory belongs: pass a directory (a new one, or one the kit made)",
    errno.EISDIR: "a directory where a file belongs: pass the file itself",
    errno.EACCES: "permission denied: make it readable/writable for this user, or use another path",
    errno.EPERM: "permission denied: make it readable/writable for this user, or use another path",
    errno.ENOENT: "no such file or directory: check the path",
    errno.EROFS: "use a writable path",
}


def os_problem(e: OSError) -> str:
    """One line for an error of the operating system (a full disk, a file where a directory belongs, ...):
    the path and what to do about it; such an error is the input's or the machine's, not a bug of the kit."""
    path = e.filename or "?"
    what = e.strerror or type(e).__name__
    advice = _OS_ADVICE.get(e.errno)
    return f"{path}: {what}" + (f"; {advice}" if advice else "")
