"""Variants chosen by student id (issue #55): 1,000 ids spread evenly over the graded variants; the same id picks
the same variant whatever asks (the notebook, the grader's environment, a hub); the order of the sources; a bad id
is one clear line; the stored id survives; nk.variant() says which and never blocks where nobody can answer."""
from __future__ import annotations

import collections
import hashlib
import subprocess
import sys

import pytest

from nmtkit.analysis import variants
from nmtkit.course.variant import variant
from nmtkit.errors import AnalysisError

IDS = [f"s{n:05d}" for n in range(1000)] + [f"student{n}@uni.example" for n in range(1_000)]


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    for name in (variants.ENV_VARIANT, variants.ENV_STUDENT, variants.HUB_USER):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NMTKIT_WORKDIR", str(tmp_path))
    return tmp_path


def spread(pool: list[str], ids) -> collections.Counter:
    picked = collections.Counter()
    for sid in ids:
        h = int.from_bytes(hashlib.sha256(sid.encode()).digest()[:8], "big")
        picked[pool[h % len(pool)]] += 1
    return picked


@pytest.mark.parametrize("ids", [IDS[:1000], IDS[1000:]], ids=["numbers", "emails"])
def test_1000_student_ids_spread_over_the_variants_none_above_1_5x_its_share(ids):
    installed = variants.graded()
    assert len(installed) >= 8, installed  # the floor: at least 8 graded variants
    for pool in (installed, [f"variant-{k}" for k in range(1, 9)]):
        got = collections.Counter(variants.variant_of(s) for s in ids) if pool is installed else spread(pool, ids)
        share = len(ids) / len(pool)
        assert set(got) == set(pool), got  # every variant gets students
        assert max(got.values()) <= 1.5 * share and min(got.values()) >= 0.5 * share, got


def test_the_practice_variant_is_never_a_graded_one_and_each_id_keeps_its_variant():
    assert variants.PRACTICE not in variants.graded()
    assert all(variants.variant_of(s) == variants.variant_of(s) for s in IDS[:50])
    assert variants.variant_of(" alice ") == variants.variant_of("alice")  # as typed, spaces aside


def test_the_sources_in_order_env_variant_then_grader_then_hub_then_stored(clean_env, monkeypatch):
    assert variants.active() == variants.PRACTICE  # no id anywhere
    variants.store_id("stored-id")
    assert variants.active() == variants.variant_of("stored-id") and variants.stored_id() == "stored-id"
    monkeypatch.setenv(variants.HUB_USER, "hub-user")
    assert variants.active() == variants.variant_of("hub-user")
    monkeypatch.setenv(variants.ENV_STUDENT, "graded-id")  # the grader's sandbox: the submission's id wins
    assert variants.active() == variants.variant_of("graded-id")
    monkeypatch.setenv(variants.ENV_VARIANT, variants.graded()[-1])
    assert variants.active() == variants.graded()[-1]


def test_a_bad_id_or_variant_is_one_clear_line(clean_env, monkeypatch):
    for bad in ("", "two words", "../etc", "x" * 200):
        with pytest.raises(AnalysisError, match="student id .*use the id your course gave you"):
            variants.store_id(bad)
    assert not (clean_env / variants.ID_FILE).exists()  # nothing written
    monkeypatch.setenv(variants.ENV_VARIANT, "variant-99")
    with pytest.raises(AnalysisError, match="variant 'variant-99' is not installed: choose one of practice, variant-1"):
        variants.active()


def test_nk_variant_stores_the_id_says_which_and_reads_that_variants_runs(clean_env, capsys):
    v = variant(student_id="s00042", ask=False)
    assert v.name == variants.variant_of("s00042") and v.graded and v.student_id == "s00042"
    assert (clean_env / variants.ID_FILE).read_text().strip() == "s00042"
    assert f"variant {v.name}" in capsys.readouterr().out
    assert v.reference == variants.run_dir(variants.info(v.name)["reference"], v.name)
    again = variant(ask=False)  # the next notebook: the stored id, not asked again
    assert again.name == v.name and "stored in the workspace" in again.source
    from nmtkit.analysis.lab import shipped
    assert all(p.parent == variants.directory(v.name) for p in shipped())  # never the practice variant's runs


def test_where_nobody_can_answer_it_uses_practice_and_says_how_to_give_the_id(clean_env):
    code = "import nmtkit as nk; v = nk.variant(); print('NAME', v.name)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-1500:]
    assert "NAME practice" in out.stdout and 'nk.variant(student_id="...")' in out.stdout
    assert not (clean_env / variants.ID_FILE).exists()
