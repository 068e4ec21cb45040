"""Data-parallel scaling: (a) 1 vs 2 ranks on this machine; (b) 2 "hosts" (network namespaces) over a shaped link.

    python bench/scaling.py [--quick] [--steps 30] [--rounds 3] [--skip-netns]

(a) Local engines (nmtkit.cluster.Cluster), the same per-rank batch (2048 tokens), one intra-op thread per rank:
    tokens/s of 1 rank and of 2 ranks, and the scaling efficiency tokens/s(2) / (2 x tokens/s(1)); target >= 90%.
    With a control without Horovod: the same training as one process alone and as two independent processes at
    once (what the machine alone costs two ranks). Rounds of all four, back to back; medians over the rounds.
    Round 0 also runs one rank confined to one core.
(b) Two hosts (tools.rehearsal.netns.TwoHosts: network namespaces reached over SSH, joined by a veth pair that
    carries Horovod's traffic), one hand-started engine on each, tc tbf at 1 Gbit/s and 200 Mbit/s, each with
    train.compression none and fp16. The compute time is the 2-rank step time with the link unshaped; the model
    predicts step = compute + 2(N-1)/N x gradient bytes / rate (gradient bytes = 4 x trainable parameters with
    none, 2 x with fp16); printed against the measured step, target within 25%. Skipped, with the reason, when not
    root or without `ip netns` or sshd.
Step times come from the rank logs (runs/<run>/ranks/rank<r>.jsonl), warm-up steps left out. --quick: fewer steps
(< 3 minutes). Figures only: nothing is asserted.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

# one intra-op thread per rank: local engines inherit this environment (the kit's own engine environment may set
# TF_NUM_INTRAOP_THREADS from the cores; _one_thread() below pins it to 1 as well)
os.environ.update(OMP_NUM_THREADS="1", TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the kit of this checkout

import nmtkit  # noqa: F401  (Keras 2 API before TensorFlow)
from nmtkit import config, runs
from nmtkit.cluster import Cluster
from nmtkit.data.prepare import prepare
from nmtkit.files import read_jsonl
from tools.rehearsal.netns import TwoHosts, unavailable

RATES = {"1gbit": 1e9, "200mbit": 200e6}  # tc's units are SI: bits per second
COMPRESSIONS = {"none": 4, "fp16": 2}      # train.compression -> bytes per gradient value on the wire
ROOT = Path(__file__).resolve().parents[1]


def _one_thread(cluster: Cluster) -> Cluster:
    """Local engines get one intra-op thread whatever the core count (the kit gives cores / engines)."""
    base = getattr(cluster, "_engine_env", None)
    if callable(base):
        cluster._engine_env = lambda: {**base(), "TF_NUM_INTRAOP_THREADS": "1", "OMP_NUM_THREADS": "1"}
    return cluster


def measure(cluster: Cluster, cfg, run: Path, ranks: int, warmup: int) -> dict:
    """Train on `ranks` ranks; per-step time (mean over ranks of each step's time) and tokens/s of all ranks."""
    results = cluster.launch(cfg, run, preflight=False, ranks=ranks).wait(timeout=1800)
    summary = results[0].value
    logs = [[r for r in read_jsonl(runs.rank_log(run, k)) if r["step"] > warmup] for k in range(ranks)]
    n = min(len(log) for log in logs)
    step_times = [statistics.mean(log[i]["step_time"] for log in logs) for i in range(n)]
    tokens = sum(r["tokens"] for log in logs for r in log[:n])
    seconds = sum(step_times)
    return {"step_ms": 1000 * seconds / n, "median_ms": 1000 * statistics.median(step_times),
            "tokens_per_sec": tokens / seconds, "tokens_per_step": tokens / n, "steps": n,
            "params": summary["params"], "step_times": step_times}


def sync_cap(step_times: list[float]) -> float:
    """What waiting for the slower rank alone leaves of 1 rank's speed: mean step / E[max of two steps drawn
    independently from 1 rank's step times] (each rank draws its own batch, and every step ends at the slower)."""
    return statistics.mean(step_times) / statistics.mean(max(a, b) for a in step_times for b in step_times)


def allreduce_ms(cluster: Cluster, params: int, reps: int = 15) -> float:
    """Median time of a 2-rank allreduce of `params` float32 values on the otherwise idle engines (ms)."""
    from nmtkit.cluster.link import allreduce_seconds
    return 1000 * allreduce_seconds(cluster, params, reps)


def _confine(cluster: Cluster, cpus: set) -> list:
    """Confine the first engine, every thread of it, to `cpus` (Linux affinity is per thread; threads started
    later inherit it); returns the CPUs it had."""
    def confine(cpus):
        import os
        before = sorted(os.sched_getaffinity(0))
        for tid in os.listdir("/proc/self/task"):
            try:
                os.sched_setaffinity(int(tid), cpus)
            except OSError:  # a thread that ended meanwhile
                pass
        return before
    return cluster.client[cluster.engines()[0].id].apply_sync(confine, set(cpus))


SOLO = """
import json, sys, time
import nmtkit
from nmtkit.config import Config
from nmtkit.data.bpe import Tokenizer
from nmtkit.data.pipeline import make_dataset
from nmtkit.training.trainer import Trainer
cfg = Config.from_dict(json.loads(sys.argv[1]))
warmup, steps, data = int(sys.argv[2]), int(sys.argv[3]), cfg.data.dir
trainer = Trainer(cfg, Tokenizer.from_data_dir(data).vocab_size)
batches = iter(make_dataset(data, "train", cfg.data, seed=cfg.train.seed))
for _ in range(warmup):
    trainer.run_step([next(batches)]).numpy()
t0 = time.perf_counter()
for _ in range(steps):
    trainer.run_step([next(batches)]).numpy()
print(1000 * (time.perf_counter() - t0) / steps)
"""


def independent(cfg, warmup: int, steps: int) -> tuple[float, float]:
    """The control for (a): the same one-thread training as independent processes without Horovod, one alone, then
    two at once: (ms/step alone, mean ms/step of the two). Their ratio is what the machine alone lets two ranks keep
    (shared caches, memory bandwidth, the hypervisor), before any allreduce."""
    import json
    import subprocess
    env = {**os.environ, "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-c", SOLO, json.dumps(cfg.to_dict()), str(warmup), str(steps)]

    def run(n: int) -> list[float]:
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
                 for _ in range(n)]
        return [float(p.communicate()[0].split()[-1]) for p in procs]
    return run(1)[0], statistics.mean(run(2))


def local(cfg, work: Path, warmup: int, steps: int, rounds: int) -> None:
    """Rounds of: 1 rank, 2 ranks, the control alone, the control two at once. This host's speed drifts by tens of
    percent within minutes, so each round's efficiency compares runs made back to back, and the medians are kept."""
    cluster = _one_thread(Cluster(cfg, engines=2, profile_dir=work / "ipython-local"))
    t = time.time()
    cluster.start()
    print(f"(a) 2 local engines started in {time.time() - t:.0f} s; {rounds} rounds", flush=True)
    effs, ctrls, caps, steps_1 = [], [], [], []
    try:
        for r in range(rounds):
            one = measure(cluster, cfg, work / f"local-1-r{r}", 1, warmup)
            if r == 0:
                # one rank with one intra-op thread still has the other core for its input pipeline, Horovod's
                # and the engine's threads: confined to one core it is what each of the 2 ranks gets
                cores = _confine(cluster, {0})
                one_core = measure(cluster, cfg, work / "local-1-one-core", 1, warmup)
                _confine(cluster, set(cores))
                print(f"(a) round 0, 1 rank confined to one core: {one_core['tokens_per_sec']:,.0f} tokens/s, "
                      f"{one_core['step_ms']:.0f} ms/step (unconfined {one['step_ms']:.0f})", flush=True)
            two = measure(cluster, cfg, work / f"local-2-r{r}", 2, warmup)
            # an engine keeps Horovod up between jobs, its background thread negotiating every cycle: shut it down
            # on both at once, so the idle engines cost the next runs nothing
            cluster.client[cluster.ids].execute("import horovod.tensorflow as hvd; hvd.shutdown()", block=True)
            alone, pair = independent(cfg, warmup, steps)
            effs.append(two["tokens_per_sec"] / (2 * one["tokens_per_sec"]))
            ctrls.append(alone / pair)
            caps.append(sync_cap(one["step_times"]))
            steps_1.append(one["step_ms"])
            print(f"(a) round {r}: 1 rank {one['tokens_per_sec']:,.0f} tokens/s ({one['step_ms']:.0f} ms/step, "
                  f"{one['tokens_per_step']:,.0f} tokens/step); 2 ranks {two['tokens_per_sec']:,.0f} tokens/s "
                  f"({two['step_ms']:.0f} ms/step, {two['tokens_per_step']:,.0f} tokens/step): efficiency "
                  f"{100 * effs[-1]:.0f}% | control without Horovod: alone {alone:.0f} ms/step, two at once "
                  f"{pair:.0f}: {100 * ctrls[-1]:.0f}%", flush=True)
        ar = allreduce_ms(cluster, one["params"])
    finally:
        cluster.stop()
    eff, ctrl = statistics.median(effs), statistics.median(ctrls)
    print(f"(a) scaling efficiency 2 ranks vs 1, median of {rounds} rounds: {100 * eff:.0f}% (target >= 90%; "
          f"rounds {', '.join(f'{100 * e:.0f}' for e in effs)})", flush=True)
    print(f"(a) control: two independent processes without Horovod keep {100 * ctrl:.0f}% of their speed (median; "
          f"the ceiling this machine puts on (a)); Horovod's own share: {100 * eff / ctrl:.0f}% of that ceiling",
          flush=True)
    one_ms = statistics.median(steps_1)
    print(f"(a) where 2 ranks lose against 1 (1 rank: {one_ms:.0f} ms/step, median): the allreduce of the "
          f"{one['params']:,}-parameter gradient takes {ar:.0f} ms on idle cores ({100 * ar / one_ms:.0f}% of a "
          f"step); waiting for the slower rank's batch alone would leave {100 * statistics.median(caps):.0f}% (from "
          f"1 rank's step times); the rest is Horovod's background thread and each rank's input pipeline and "
          f"Python sharing the two cores that 1 rank had to itself", flush=True)


def netns(cfg, work: Path, warmup: int) -> None:
    total_steps = cfg.train.steps
    why = unavailable()
    if why:
        print(f"(b) skipped: {why}")
        return
    rows = []
    with TwoHosts(rate=None) as net:
        cluster = net.manual_cluster(cfg, work / "ipython-netns", ROOT)
        try:
            for comp in COMPRESSIONS:
                for rate in (None, *RATES):
                    net.set_rate(rate)
                    before = net.counters(0)
                    m = measure(cluster, cfg.with_overrides({"train.compression": comp}),
                                work / f"netns-{comp}-{rate or 'unshaped'}", 2, warmup)
                    sent = net.counters(0)["tx_bytes"] - before["tx_bytes"]
                    rows.append((comp, rate, m, sent))
                    print(f"(b) {comp:4} link {rate or 'unshaped'}: {m['step_ms']:.0f} ms/step (median "
                          f"{m['median_ms']:.0f}), {m['tokens_per_sec']:,.0f} tokens/s, rank 0 sent "
                          f"{sent / 1e6:,.1f} MB", flush=True)
        finally:
            cluster.stop()
    n = 2
    for comp, value_bytes in COMPRESSIONS.items():
        mine = [r for r in rows if r[0] == comp]
        compute, params = mine[0][2]["step_ms"] / 1000, mine[0][2]["params"]
        grad_bytes = value_bytes * params
        print(f"(b) {comp}: compute time (2 ranks, unshaped link) {1000 * compute:.0f} ms/step; {params:,} "
              f"parameters -> gradient {grad_bytes / 1e6:.2f} MB on the wire")
        for _, rate, m, sent in mine[1:]:
            comm = 2 * (n - 1) / n * grad_bytes * 8 / RATES[rate]
            predicted, measured = compute + comm, m["step_ms"] / 1000
            print(f"(b) {comp} {rate}: measured {1000 * measured:.0f} ms/step vs predicted {1000 * predicted:.0f} "
                  f"(compute {1000 * compute:.0f} + allreduce {1000 * comm:.0f}): ratio {measured / predicted:.2f} "
                  f"(target within 25%: 0.75-1.25)")
            # what really crossed the link: the first step adds the broadcast of weights and optimizer state
            wire = sent / total_steps
            by_wire = compute + wire * 8 / RATES[rate]
            print(f"(b) {comp} {rate}: with the bytes rank 0 really sent ({wire / 1e6:.2f} MB/step, broadcast "
                  f"included) the prediction is {1000 * by_wire:.0f} ms/step: ratio {measured / by_wire:.2f}")
    for rate in (None, *RATES):
        none, fp16 = (next(r for r in rows if r[0] == c and r[1] == rate) for c in COMPRESSIONS)
        print(f"(b) {rate or 'unshaped'}: fp16 sent {1 - fp16[3] / none[3]:.0%} fewer bytes than none; step "
              f"{none[2]['step_ms']:.0f} -> {fp16[2]['step_ms']:.0f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="few steps: checks the bench works (< 3 minutes)")
    ap.add_argument("--steps", type=int, default=30, help="measured steps per run (after warm-up)")
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3, help="(a): rounds of 1 rank, 2 ranks and the control")
    ap.add_argument("--skip-netns", action="store_true", help="only (a)")
    ap.add_argument("--workdir", default=None, help="keep data and runs here (default: a temp dir)")
    args = ap.parse_args()
    steps, warmup = (8, 3) if args.quick else (args.steps, args.warmup)
    args.rounds = 1 if args.quick else args.rounds
    with tempfile.TemporaryDirectory(prefix="nmtkit-bench-scaling-") as tmp:
        work = Path(args.workdir or tmp)
        # the tiny profile's model; 2048-token batches per rank; no evaluation or checkpoints in the timed part
        cfg = config.load("tiny", {
            "data.dir": str(work / "data"), "data.batch_tokens": 2048, "train.steps": warmup + steps,
            "train.log_every": warmup + steps, "train.ckpt_every": 0, "train.precision": "float32",
            "eval.every": 0, "eval.dev_sentences": 1, "eval.test_sentences": 1, "eval.beam_size": 1,
            "eval.max_extra_len": 1, "monitor.enabled": False})
        prepare(cfg, progress=False)
        local(cfg, work, warmup, steps, args.rounds)
        if args.skip_netns:
            print("(b) skipped: --skip-netns")
        else:
            netns(cfg, work, warmup)


if __name__ == "__main__":
    main()
