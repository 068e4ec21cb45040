"""OpenNMT-tf 2.32 side of bench/throughput.py: its own virtualenv, the same text, the same shapes, one run.

OpenNMT-tf 2.32 needs TensorFlow <= 2.13, so it lives in a bench-only venv (.cache/onmt-venv, gitignored), built
on first use with python3.11 ($NMTKIT_ONMT_VENV points at another one). It is never a dependency of the kit.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import textwrap
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = Path(os.environ.get("NMTKIT_ONMT_VENV") or ROOT / ".cache" / "onmt-venv")  # env: share one venv
PACKAGES = ["OpenNMT-tf==2.32.0", "tensorflow-cpu==2.13.1", "tensorflow-addons"]
# "2026-11-22 14:55:01.123000: I training.py:609] Step = 10 ; steps/s = 0.31, tokens/s = 1101 (534 source,
# 567 target) ; Learning rate = ... ; Loss = ...": tokens/s is over the interval since the previous report
STEP_RE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+): .*?Step = (\d+) ; steps/s = [\d.]+, tokens/s = (\d+)",
                     re.M)


class OnmtUnavailable(RuntimeError):
    """OpenNMT-tf could not be installed or run; the message says why."""


def ensure_venv(log) -> Path:
    """The venv's onmt-main, building the venv when missing (a few minutes: TensorFlow 2.13 is ~250 MB)."""
    exe = VENV / "bin" / "onmt-main"
    if exe.exists():
        return exe
    py = shutil.which("python3.11")
    if py is None:
        raise OnmtUnavailable("python3.11 is not on PATH (TensorFlow 2.13 has no wheels for newer Pythons)")
    log(f"building the OpenNMT-tf venv in {VENV} (bench-only, a few minutes) ...")
    try:
        subprocess.run([py, "-m", "venv", str(VENV)], check=True, capture_output=True, text=True)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", *PACKAGES], check=True, capture_output=True,
                       text=True)
    except subprocess.CalledProcessError as e:
        raise OnmtUnavailable(f"`{' '.join(e.cmd[:3])} ...` failed: {(e.stderr or '').strip()[-400:]}") from None
    return exe


def write_corpus(data_dir: Path, out: Path, max_tokens: int) -> dict[str, Path]:
    """The prepared data's train.en/train.de as sentencepiece pieces (what the kit trains on), plus a vocab file.

    Pairs longer than max_tokens pieces on either side are dropped here, as make_dataset does for the kit.
    """
    from nmtkit.data.bpe import Tokenizer
    from nmtkit.data.text import read_parallel
    tok = Tokenizer.from_data_dir(data_dir)
    en, de = read_parallel(data_dir / "train.en", data_dir / "train.de")
    pe, pd = tok.sp.encode(en, out_type=str), tok.sp.encode(de, out_type=str)
    keep = [i for i in range(len(pe)) if len(pe[i]) <= max_tokens and len(pd[i]) <= max_tokens]
    out.mkdir(parents=True, exist_ok=True)
    files = {"src": out / "train.bpe.en", "tgt": out / "train.bpe.de", "vocab": out / "vocab.txt"}
    files["src"].write_text("".join(" ".join(pe[i]) + "\n" for i in keep))
    files["tgt"].write_text("".join(" ".join(pd[i]) + "\n" for i in keep))
    # OpenNMT-tf adds its own <blank>, <s>, </s> (first) and <unk> (last): list the real pieces only
    specials = {tok.sp.pad_id(), tok.sp.unk_id(), tok.sp.bos_id(), tok.sp.eos_id()}
    files["vocab"].write_text("".join(tok.sp.id_to_piece(i) + "\n" for i in range(tok.vocab_size) if i not in specials))
    return files


@dataclass
class OnmtResult:
    tokens_per_sec: float
    ms_per_step: float
    tokens_per_step: float
    steps_measured: int
    log: Path


def _write_config(work: Path, files: dict[str, Path], *, d_model: int, steps: int, report_every: int,
                  batch_tokens: int, max_tokens: int, bucket_width: int) -> Path:
    """OpenNMT-tf's config.yml for run(): nmtkit's optimizer, schedule and batching, in its keys."""
    cfg = work / "config.yml"
    cfg.write_text(textwrap.dedent(f"""\
        model_dir: {work / 'run'}
        data:
          train_features_file: {files['src']}
          train_labels_file: {files['tgt']}
          source_vocabulary: {files['vocab']}
          target_vocabulary: {files['vocab']}
        params:
          optimizer: Adam
          optimizer_params: {{beta_1: 0.9, beta_2: 0.997, epsilon: 1.0e-9}}
          learning_rate: 2.0
          decay_type: NoamDecay
          decay_params: {{model_dim: {d_model}, warmup_steps: 8000}}
          label_smoothing: 0.1
          average_loss_in_time: true
        train:
          batch_size: {batch_tokens}
          batch_type: tokens
          effective_batch_size: null
          max_step: {steps}
          save_checkpoints_steps: 1000000
          keep_checkpoint_max: 1
          save_summary_steps: {report_every}
          maximum_features_length: {max_tokens}
          maximum_labels_length: {max_tokens}
          length_bucket_width: {bucket_width}
          sample_buffer_size: -1
          mixed_precision: false
        """))
    return cfg


def run(files: dict[str, Path], work: Path, *, layers: int, d_model: int, heads: int, d_ff: int, steps: int,
        warmup: int, report_every: int, batch_tokens: int, max_tokens: int, timeout: float,
        bucket_width: int = 1) -> OnmtResult:
    """Train OpenNMT-tf for `steps` steps (fp32, token batches) and parse its step reports.

    Reports come every `report_every` steps and give the average over that interval; those ending at or before
    `warmup` hold the tracing and are skipped.
    """
    exe = VENV / "bin" / "onmt-main"
    if not exe.exists():
        raise OnmtUnavailable(f"{exe} is missing")
    work.mkdir(parents=True, exist_ok=True)
    model_py = work / "model.py"
    model_py.write_text(textwrap.dedent(f"""\
        import opennmt
        def model():
            # pre-norm, one embedding shared by source, target and the output layer: as nmtkit's Transformer
            return opennmt.models.Transformer(
                num_layers={layers}, num_units={d_model}, num_heads={heads}, ffn_inner_dim={d_ff},
                dropout=0.1, attention_dropout=0.1, ffn_dropout=0.1, pre_norm=True,
                share_embeddings=opennmt.models.EmbeddingsSharingLevel.ALL)
        """))
    cfg = _write_config(work, files, d_model=d_model, steps=steps, report_every=report_every,
                        batch_tokens=batch_tokens, max_tokens=max_tokens, bucket_width=bucket_width)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH="")
    env.pop("TF_USE_LEGACY_KERAS", None)
    log = work / "onmt.log"
    with open(log, "w") as f:
        try:
            p = subprocess.run([str(exe), "--model", str(model_py), "--config", str(cfg), "train"],
                               stdout=f, stderr=subprocess.STDOUT, env=env, cwd=work, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise OnmtUnavailable(f"OpenNMT-tf ran past {timeout:.0f} s; see {log}") from None
    text = log.read_text(errors="replace")
    reports = [(datetime.strptime(t, "%Y-%m-%d %H:%M:%S.%f").timestamp(), int(s), int(r))
               for t, s, r in STEP_RE.findall(text)]
    # intervals between consecutive reports, once the previous report is past the warm-up
    kept = [(b[0] - a[0], b[1] - a[1], b[2]) for a, b in zip(reports, reports[1:]) if a[1] >= warmup]
    if p.returncode != 0 or not kept:
        tail = "\n".join(text.strip().splitlines()[-5:])
        raise OnmtUnavailable(f"onmt-main exited {p.returncode} with {len(reports)} step reports; last lines:\n{tail}")
    seconds = sum(dt for dt, _, _ in kept)
    steps_total = sum(n for _, n, _ in kept)
    tokens = sum(dt * rate for dt, _, rate in kept)
    return OnmtResult(tokens_per_sec=tokens / seconds, ms_per_step=1000 * seconds / steps_total,
                      tokens_per_step=tokens / steps_total, steps_measured=steps_total, log=log)
