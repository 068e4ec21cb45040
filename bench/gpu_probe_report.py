"""bench/gpu_probe.py's comparison and report: what PyTorch measured (gpu-probe.json) beside what the kit projects
for the same shapes, each with its ratio and a verdict. Imports neither torch nor TensorFlow, so `make test` checks
it on a CPU against a recorded JSON (tests/test_gpu_probe.py).

    rep = compare(json.loads(Path("gpu-probe.json").read_text()))
    print(markdown(rep))
"""
from __future__ import annotations

from gpu_fit import KEEP_FLOOR, SHAPES, implied_keep, slope_fit

from nmtkit import config
from nmtkit.model import memory
from nmtkit.model.flops import train_flops
from nmtkit.model.size import count_params
from nmtkit.training.peaks import gpu_peak

GIB = memory.GIB


def shape_of(data: dict):
    """(config, vocabulary, length) the probe measured: the profile with the shape's overrides."""
    cfg = config.load(data["profile"], SHAPES[data["shape"]])
    return cfg, data["vocab"], data["length"]


def memory_rows(cfg, vocab: int, length: int, runs: list[dict]) -> list[dict]:
    """Each measured step beside the kit's projection of it: measured / projected."""
    out = []
    for r in runs:
        proj = memory.project(cfg, vocab, r["batch"], length, r["precision"]).total
        peak = r.get("peak_bytes")
        out.append({**r, "projected_bytes": proj, "ratio": peak / proj if peak else None})
    return out


def slopes(cfg, vocab: int, length: int, runs: list[dict]) -> list[dict]:
    """Per precision and dropout: the slope between the two largest batches measured, the projection's, and the KEEP
    it implies (bench/gpu_fit.py's fit), adoptable only at the profile's dropout and at KEEP >= 1."""
    out = []
    for precision, dropout in sorted({(r["precision"], r["dropout"]) for r in runs}):
        points = sorted((r["batch"], r["peak_bytes"]) for r in runs
                        if (r["precision"], r["dropout"]) == (precision, dropout) and r.get("peak_bytes"))
        if len(points) < 2:
            continue
        slope, fixed = slope_fit(points[-2:])
        proj = memory.project(cfg, vocab, 1, length, precision)
        keep = implied_keep(cfg, vocab, length, precision, slope)
        adoptable = abs(dropout - cfg.model.dropout) < 1e-9 and keep >= KEEP_FLOOR
        out.append({"precision": precision, "dropout": dropout, "slope_bytes": slope, "fixed_bytes": fixed,
                    "projected_slope_bytes": proj.per_sentence, "ratio": slope / proj.per_sentence,
                    "keep_implied": keep, "keep_shipped": memory.KEEP, "adoptable": adoptable})
    return out


def cap_rows(cfg, vocab: int, runs: list[dict]) -> list[dict]:
    """1 x the batch under a memory cap, measured, against the plan fit() makes for a device of that memory."""
    out = []
    for r in runs:
        plan = memory.fit(cfg, vocab, r["cap_bytes"], r["precision"])
        whole = plan.count == 1
        if whole and r["oom"]:
            verdict = f"OOM: fit() plans 1 x {r['batch']} and it ran out of memory"
        elif whole:
            verdict = "agree: fit() plans 1 x the batch, and it fits"
        elif r["oom"]:
            verdict = f"agree: 1 x {r['batch']} runs out of memory; fit() plans {plan.count} x {plan.size}"
        else:
            verdict = f"errs safe: 1 x {r['batch']} fits, fit() plans {plan.count} x {plan.size}"
        out.append({**r, "plan": f"{plan.count} x {plan.size}", "plan_projected_bytes": plan.projection.total,
                    "ok": not (whole and r["oom"]), "verdict": verdict})
    return out


def matmul_rows(device: str, runs: list[dict]) -> list[dict]:
    """The timed matmul against the kit's peak table's entry for this GPU (nmtkit.training.peaks)."""
    out = []
    for r in runs:
        table = gpu_peak(device, r["precision"], tf32=True)
        out.append({**r, "table_flops": table[0] if table else None, "table_source": table[1] if table else
                    "not in the kit's table", "ratio": r["flops_per_s"] / table[0] if table else None})
    return out


def flops_row(cfg, vocab: int, run: dict) -> dict:
    """PyTorch's FLOP counter against the kit's count (nmtkit.model.flops.train_flops) for the same batch."""
    tokens, length = run["batch"] * run["length"], run["length"]
    kit = train_flops(cfg.model, vocab, tokens, tokens, length, length)
    return {**run, "kit_flops": kit, "ratio": run["torch_flops"] / kit}


def compare(data: dict) -> dict:
    """Every comparison the report shows, from the probe's JSON; "ok" False when the kit would run out of memory
    where the probe did not (a plan of 1 x the batch that the measurement refutes)."""
    cfg, vocab, length = shape_of(data)
    rep = {"device": data.get("device") or {}, "errors": data.get("errors", []),
           "memory": memory_rows(cfg, vocab, length, data.get("memory", [])),
           "slopes": slopes(cfg, vocab, length, data.get("memory", [])),
           "cap": cap_rows(cfg, vocab, data.get("cap", [])),
           "matmul": matmul_rows((data.get("device") or {}).get("name", ""), data.get("matmul", [])),
           "flops": flops_row(cfg, vocab, data["flops"]) if data.get("flops") else None}
    if data.get("params"):
        kit = count_params(cfg.model, vocab)
        rep["params"] = {"torch": data["params"], "kit": kit, "ratio": data["params"] / kit}
    rep["ok"] = all(r["ok"] for r in rep["cap"])
    return rep


def _x(v) -> str:
    return f"{v:.2f}x" if v is not None else "-"


def _gib(v) -> str:
    return f"{v / GIB:.2f}" if v is not None else "-"


def markdown(rep: dict) -> str:
    dev = rep["device"]
    lines = [f"# nmtkit GPU probe (PyTorch replica of the kit's graph): {'ok' if rep['ok'] else 'OOM RISK'}", "",
             f"Device: {dev.get('name', '?')}, {_gib(dev.get('total_bytes'))} GiB; torch {dev.get('torch', '?')}.",
             *(f"- error: {e}" for e in rep["errors"]), "", "## Peak memory of a step against the kit's projection",
             "", "| sentences | precision | dropout | measured GiB | projected GiB | measured / projected |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['batch']} | {r['precision']} | {r['dropout']} | {_gib(r.get('peak_bytes'))} | "
              f"{_gib(r['projected_bytes'])} | {_x(r['ratio'])} |" for r in rep["memory"]]
    lines += ["", "| precision | dropout | MiB a sentence measured | projected | ratio | KEEP implied (shipped) |",
              "|---|---|---|---|---|---|"]
    lines += [f"| {s['precision']} | {s['dropout']} | {s['slope_bytes'] / 2**20:.1f} | "
              f"{s['projected_slope_bytes'] / 2**20:.1f} | {_x(s['ratio'])} | {s['keep_implied']:.2f} "
              f"({s['keep_shipped']}){'' if s['adoptable'] else ', not adoptable'} |" for s in rep["slopes"]]
    lines += ["", "## One micro-batch of the whole batch under a memory cap, against fit()", "",
              "| precision | cap GiB | 1 x batch | fit() plans | verdict |", "|---|---|---|---|---|"]
    lines += [f"| {c['precision']} | {_gib(c['cap_bytes'])} | {'out of memory' if c['oom'] else 'fits'} | "
              f"{c['plan']} ({_gib(c['plan_projected_bytes'])} GiB) | {c['verdict']} |" for c in rep["cap"]]
    lines += ["", "## Matmul peak against the kit's table", "", "| precision | n | measured TFLOP/s | table | ratio |",
              "|---|---|---|---|---|"]
    lines += [f"| {m['precision']} | {m['n']} | {m['flops_per_s'] / 1e12:.1f} | "
              f"{m['table_flops'] / 1e12 if m['table_flops'] else '-'} ({m['table_source']}) | {_x(m['ratio'])} |"
              for m in rep["matmul"]]
    if rep["flops"]:
        f = rep["flops"]
        lines += ["", "## FLOPs of a training step", "", f"{f['batch']} sentences x {f['length']} tokens: PyTorch's "
                  f"counter {f['torch_flops']:.4g}, the kit's {f['kit_flops']:.4g}: {_x(f['ratio'])}."]
    if rep.get("params"):
        p = rep["params"]
        lines += ["", f"Parameters: the replica {p['torch']:,}, the kit's count {p['kit']:,} ({_x(p['ratio'])})."]
    return "\n".join(lines) + "\n"
