#!/usr/bin/env bash
# Question 2's long run (issue 70): the tiny profile trained long enough to stop improving, then frozen into
# nmtkit/reference/plateau-tiny/ with only its scalars and the per-sentence BLEU statistics of its evaluations
# (python -m tools.rehearsal.plateau). Wall time on 2 cores: bench/README.md ("Question 2's long run").
#   scripts/plateau-run.sh [OUT]      # OUT: where the data and the run go (default runs/plateau)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-runs/plateau}
py=${PYTHON:-.venv/bin/python}
mkdir -p "$out"
start=$(date +%s)
$py -m nmtkit.cli prepare --profile tiny --data "$out/data"
# every 150 steps on the dev split's 1,000 sentences: the paired bootstrap's interval then narrow enough (about
# +-0.6 BLEU near convergence, +-1.4 on the default 200) to show a difference within question 2's 1 BLEU margin
$py -m nmtkit.cli train --profile tiny --data "$out/data" --logdir "$out/plateau-tiny" --fresh \
  --set train.steps=3000 --set train.log_every=50 --set train.ckpt_every=0 --set eval.every=150 \
  --set eval.dev_sentences=1000
wall=$(( $(date +%s) - start ))
$py -m tools.rehearsal.plateau --run "$out/plateau-tiny" --data "$out/data" --wall-s "$wall"
echo "[plateau-run] prepare + train: $wall s on $(nproc) cores"
