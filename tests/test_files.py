"""Atomic writes and JSON lines: what every module uses to leave nothing half-written."""
import os
import stat

import pytest

from nmtkit import files


def test_atomic_write_leaves_no_temp_and_normal_permissions(tmp_path):
    p = files.atomic_write_text(tmp_path / "sub" / "a.txt", "hello\n")
    assert p.read_text() == "hello\n"
    assert [x.name for x in p.parent.iterdir()] == ["a.txt"]
    mode = stat.S_IMODE(os.stat(p).st_mode)
    assert mode == 0o666 & ~files._UMASK  # like open(), not mkstemp's owner-only 0600


def test_failed_write_keeps_the_old_file(tmp_path):
    p = files.atomic_write_text(tmp_path / "a.json", "old")


    with pytest.raises(TypeError):
        files.atomic_write_bytes(p, "not bytes")  # fails inside the write
    assert p.read_text() == "old" and len(list(tmp_path.iterdir())) == 1


def test_jsonl_skips_only_a_torn_last_line(tmp_path):
    p = tmp_path / "log.jsonl"
    files.append_jsonl(p, {"step": 1})
    files.append_jsonl(p, {"step": 2})
    with open(p, "a") as f:
        f.write('{"step": 3, "lo')  # the writer was killed mid-line
    assert [r["step"] for r in files.read_jsonl(p)] == [1, 2]
    p.write_text('{"step": 1}\nnot json\n{"step": 3}\n')
    with pytest.raises(ValueError, match="log.jsonl: line 2"):
        list(files.read_jsonl(p))


def test_atomic_path_streams_then_renames_or_leaves_nothing(tmp_path):
    target = tmp_path / "big.bin"
    with files.atomic_path(target) as tmp:
        assert tmp.parent == tmp_path and tmp.name.startswith(".big.bin.") and not target.exists()
        with open(tmp, "wb") as f:
            for _ in range(4):
                f.write(b"x" * 1000)
    assert target.read_bytes() == b"x" * 4000 and [p.name for p in tmp_path.iterdir()] == ["big.bin"]
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o666 & ~files._UMASK
    with pytest.raises(RuntimeError):
        with files.atomic_path(target) as tmp:
            tmp.write_bytes(b"half")
            raise RuntimeError("the writer died")
    assert target.read_bytes() == b"x" * 4000 and [p.name for p in tmp_path.iterdir()] == ["big.bin"]
