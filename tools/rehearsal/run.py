"""The homework's two-VM path, rehearsed on one machine: `python -m tools.rehearsal` (or `make rehearsal`).

Two hosts reached over real SSH (tools.rehearsal.netns), 2 engines on each started by ipyparallel's SSH launcher
(tools.rehearsal.ssh), then what a student does in notebook 03: preflight (the data is pushed to the host that
lacks it and checked by sha256 over SSH), a short tiny training on 4 ranks, identical weights on every rank, a
monitor log per host; the link measured with a timed transfer (between the namespaces at both tc rates, and by
preflight between engines, recorded in run.json), and the bytes per step that crossed it compared with the
ring-allreduce model. Then the same short run with `train.compression` none and fp16 at each tc rate: the bytes per
step fp16 saves and the step times. Then a `kill -9` of a remote engine and the resume (--no-kill skips it). Writes
report.md and report.json into the output directory.
"""
from __future__ import annotations

import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import tools.rehearsal.link as link
import tools.rehearsal.probes as probes
from nmtkit import config, runs
from nmtkit.cluster.link import steady_traffic
from nmtkit.files import atomic_write_json, atomic_write_text, read_jsonl
from nmtkit.ring import ring_bytes
from tools.rehearsal.netns import CounterLog, TwoHosts
from tools.rehearsal.ssh import launcher_traits, start_cluster

CODE_ROOT = Path(__file__).resolve().parents[2]
TINY = {"data.train_size": 2000, "data.dev_size": 20, "data.test_size": 20, "data.vocab_size": 300,
        "model.d_model": 256, "model.encoder_layers": 1, "model.decoder_layers": 1, "model.num_heads": 4,
        "model.d_ff": 512, "data.batch_sentences": 16, "train.log_every": 2, "train.ckpt_every": 0, "eval.every": 0,
        "eval.dev_sentences": 2, "eval.test_sentences": 2, "eval.beam_size": 1, "eval.max_extra_len": 3,
        "monitor.enabled": True, "monitor.interval": 1.0}


@dataclass
class Options:
    out: Path
    rate: str = "1gbit"                       # the data link's tc rate during training
    measure_rates: tuple[str, ...] = ("1gbit", "200mbit")
    steps: int = 12                           # the short run's steps
    kill: bool = True                         # kill -9 a remote engine, then resume (--no-kill skips it)
    slots: int = 2
    compressions: tuple[str, ...] = ("none", "fp16")  # train.compression, each run at every measure_rates rate


def remote_sha(net: TwoHosts, host: str, d: Path) -> str:
    """sha256 of a data directory on a host, computed there (over SSH): the check that the push arrived intact."""
    return net.ssh(host, *probes.command(sys.executable, "sha", str(d))).stdout.strip()


class Rehearsal:
    job_timeout = 900  # seconds a training launch may take

    def __init__(self, opts: Options):
        self.o = opts
        self.r: dict = {"ok": False, "checks": {}}
        self.t0 = time.time()

    def check(self, name: str, ok: bool, detail: str = "") -> None:
        self.r["checks"][name] = {"ok": bool(ok), "detail": detail}
        print(f"[{time.time() - self.t0:5.0f}s] {'ok  ' if ok else 'FAIL'} {name}: {detail}", flush=True)

    def mark(self, what: str) -> None:
        self.r.setdefault("timings_s", {})[what] = round(time.time() - self.t0, 1)

    def cfg(self, data: Path, steps: int, compression: str = "none"):
        return config.load("tiny", dict(TINY, **{"data.dir": str(data), "train.steps": steps,
                                                 "train.compression": compression}))

    def run(self) -> dict:
        o = self.o
        node = o.out / "node"              # hidden on the second host: it holds the data like VM1's disk
        data, run_dir, profile = node / "data", o.out / "run", o.out / "ipython"
        node.mkdir(parents=True, exist_ok=True)
        from nmtkit.data.prepare import prepare
        prepare(self.cfg(data, o.steps), progress=False)
        self.mark("data_prepared")
        with TwoHosts(rate=o.rate, hide=node) as net:
            self.r["hosts"] = [{"name": h.name, "ssh": h.ctl_addr, "data_addr": h.data_addr} for h in net.hosts]
            names = [net.ssh(h.name, "hostname").stdout.strip() for h in net.hosts]
            self.check("ssh reaches each host by name", names == [h.name for h in net.hosts], ", ".join(names))
            self.measure_link(net)
            traits = launcher_traits(net.ssh_config, CODE_ROOT, node / "ipython")
            cluster, how = start_cluster(self.cfg(data, o.steps), {h.name: o.slots for h in net.hosts}, traits,
                                         listen_ip=net.listen_ip, iface=net.data_iface, profile_dir=profile)
            self.r["launch"] = how
            self.mark("engines_up")
            try:
                self.plan(cluster)
                self.preflight(net, cluster, data)
                self.train(net, cluster, data, run_dir)
                self.compression(net, cluster, data)
                if o.kill:
                    self.kill_and_resume(net, cluster, data, run_dir)
            finally:
                cluster.stop()
        self.r["ok"] = all(c["ok"] for c in self.r["checks"].values())
        self.r["seconds"] = round(time.time() - self.t0, 1)
        return self.r

    def measure_link(self, net: TwoHosts) -> None:
        a, b = net.hosts
        rows = []
        for rate in self.o.measure_rates:
            net.set_rate(rate)
            nominal = _mbit(rate)
            m = link.measure_netns(b.ns, a.ns, b.data_addr, expect_mbit=nominal)
            rows.append({"tc_rate": rate, "tc_mbit_s": nominal, "measured_mbit_s": round(m["mbit_s"], 1),
                         "ratio": round(m["mbit_s"] / nominal, 3), "tries_mbit_s": m["tries"]})
            self.check(f"link at {rate} within 15%", abs(m["mbit_s"] / nominal - 1) <= 0.15,
                       f"{m['mbit_s']:.0f} Mbit/s measured, best of {m['tries']} (64 MiB {a.name} -> {b.name})")
        net.set_rate(self.o.rate)
        self.r["link"] = rows
        self.mark("link_measured")

    def link_by_preflight(self, cluster) -> None:
        """The timed transfer preflight ran between an engine on each host (what it does on real VMs)."""
        m = cluster.link
        nominal = _mbit(self.o.rate)
        self.r["link_engines"] = None if m is None else {"tc_rate": self.o.rate, "measured_mbit_s": m["mbit_s"],
                                                         "from": m["from"], "to": m["to"], "at": m["at"],
                                                         "tries_mbit_s": m["pairs"][0]["tries_mbit_s"]}
        self.check(f"preflight measured the link between engines at {self.o.rate} within 15%",
                   m is not None and abs(m["mbit_s"] / nominal - 1) <= 0.15,
                   "nothing measured" if m is None else f"{m['mbit_s']:.0f} Mbit/s {m['from']} -> {m['to']}, "
                                                        f"best of {m['pairs'][0]['tries_mbit_s']}")

    def plan(self, cluster) -> None:
        engines = cluster.engines(refresh=True)
        self.r["ranks"] = [{"rank": e.slot.rank, "host": e.host, "local_rank": e.slot.local_rank,
                            "cross_rank": e.slot.cross_rank, "engine": e.id, "pid": e.pid} for e in engines]
        per_host: dict[str, list[int]] = {}
        for e in engines:
            per_host.setdefault(e.host, []).append(e.slot.local_rank)
        self.check("4 ranks, local ranks 0 and 1 on each host",
                   len(engines) == 2 * self.o.slots and all(v == list(range(self.o.slots)) for v in per_host.values())
                   and len(per_host) == 2, str(per_host))

    def preflight(self, net: TwoHosts, cluster, data: Path) -> None:
        second = net.hosts[1].name
        before = remote_sha(net, second, data)
        t = time.time()
        table = cluster.preflight(data)
        self.r["preflight"] = table.reset_index()[["rank", "host", "host_addr", "data_ok", "rendezvous_ok",
                                                   "iface"]].to_dict("records")
        self.r["push_seconds"] = round(time.time() - t, 1)
        after, local = remote_sha(net, second, data), probes.dir_sha(data)
        self.check("preflight table shows both hosts", sorted(set(table["host"])) == sorted(h.name for h in net.hosts),
                   ", ".join(sorted(set(table["host"]))))
        self.check("data pushed to the host lacking it, sha256 equal", before == "missing" and after == local,
                   f"{second}: before {before[:12]}, after {after[:12]}, driver {local[:12]}")
        self.link_by_preflight(cluster)
        self.mark("preflight_done")

    def launch(self, net, cluster, data, run_dir, steps: int, idle: float = 0.0, compression: str = "none"):
        """One training launch; returns the summaries and the data link's counter logs (one per host), which run
        on for `idle` s after the job: Horovod stays initialised in the engines, so that window holds its
        coordination traffic alone (a few messages per cycle, gradients or not)."""
        t = time.time()
        logs = [CounterLog(h.ns, net.data_iface, python=sys.executable) for h in net.hosts]
        with logs[0], logs[1]:
            job = cluster.launch(self.cfg(data, steps, compression), run_dir, data_dir=data, preflight=False)
            results = job.wait(timeout=self.job_timeout)
            wall = time.time() - t
            time.sleep(idle + 0.3)
        return [r.value for r in results], logs, wall

    def trial(self, net, cluster, data, run_dir: Path, compression: str, rate: str) -> tuple[dict, list[dict]]:
        """One short run at a tc rate with a compression: the bytes each host sent per step on the data link in
        steady state (from the end of step 2 to the end of the last, by rank 0's log: the initial broadcast, the
        trace and the final evaluation stay out), against the ring model, and the step time."""
        net.set_rate(rate)
        summaries, logs, wall = self.launch(net, cluster, data, run_dir, self.o.steps, idle=3.0,
                                            compression=compression)
        for h, c in zip(net.hosts, logs):  # the evidence behind the figures
            atomic_write_text(self.o.out / f"counters-{run_dir.name}-{h.name}.tsv",
                              "".join(f"{t:.3f}\t{tx}\t{rx}\n" for t, tx, rx in c.samples))
        ends = {r["step"]: r["wall_time"] for r in read_jsonl(runs.rank_log(run_dir, 0))}
        per_host = [steady_traffic(c.samples, ends) for c in logs]
        sent = [t["bytes_per_step"] for t in per_host]
        idle = [(c.samples[-1][1] - c.tx_at(c.samples[-1][0] - 3.0)) / 3.0 for c in logs]  # B/s, no gradients
        params, n, value_bytes = summaries[0]["params"], len(summaries), 2 if compression == "fp16" else 4
        model = ring_bytes(params, n, value_bytes)
        step = per_host[0]["step_time_s"]
        return {"compression": compression, "tc_rate": rate, "run": run_dir.name, "params": params, "ranks": n,
                "gradient_bytes": value_bytes * params, "ring_model_bytes_per_rank": round(model),
                "measured_steps": per_host[0]["steps"], "tx_bytes_per_step_per_host": [round(x) for x in sent],
                "ratio_to_model": [round(x / model, 3) if model else None for x in sent],  # 1 rank: no ring
                "coordination_bytes_per_s_per_host": [round(i) for i in idle],
                "tx_minus_coordination_per_step": [round(x - i * step) for x, i in zip(sent, idle)],
                "ratio_minus_coordination": [round((x - i * step) / model, 3) if model else None
                                             for x, i in zip(sent, idle)],
                "link_time_per_step_s": round(max(sent) * 8 / (_mbit(rate) * 1e6), 4) if rate else None,
                "step_time_s": round(step, 3), "wall_time_s": round(wall, 1),
                "load_avg_1m": round(os.getloadavg()[0], 1),  # step times on a shared machine follow its load
                "finished": [s["status"] for s in summaries] == ["finished"] * n,
                "same_weights": len({s["weights_checksum"] for s in summaries}) == 1}, summaries

    def train(self, net, cluster, data, run_dir) -> None:
        t, summaries = self.trial(net, cluster, data, run_dir, "none", self.o.rate)
        self.mark("training_done")
        self.check("a short run finished on 4 ranks", t["finished"] and len(summaries) == 4,
                   f"{summaries[0]['step']} steps in {t['wall_time_s']:.0f} s")
        sums = {s["weights_checksum"] for s in summaries}
        self.check("identical weights on all 4 ranks", len(sums) == 1 and None not in sums, str(sorted(sums)))
        hosts = {h.name for h in net.hosts}
        names = sorted(p.name for p in (run_dir / runs.MONITOR_DIR).glob("*.jsonl"))
        self.check("a monitor log per host", all(any(x.startswith(h) for x in names) for h in hosts), ", ".join(names))
        status = runs.read_status(run_dir)
        self.check("run.json holds the link preflight measured", status.get("link_measured_mbit_s") ==
                   (cluster.link or {}).get("mbit_s", -1), f"link_measured_mbit_s {status.get('link_measured_mbit_s')}"
                   f" ({(status.get('link_measured') or {}).get('from')} -> "
                   f"{(status.get('link_measured') or {}).get('to')})")
        self.r["traffic"] = t
        self.check("bytes per step on the link within 25% of the ring model",
                   all(abs(x - 1) <= 0.25 for x in t["ratio_to_model"]),
                   f"{t['tx_bytes_per_step_per_host']} B/step sent per host vs {t['ring_model_bytes_per_rank']} B "
                   f"(2(N-1)/N x 4 B x {t['params']} params, N={t['ranks']}); Horovod's coordination alone "
                   f"{t['coordination_bytes_per_s_per_host']} B/s")

    def compression(self, net, cluster, data) -> None:
        """The short run with every train.compression at every tc rate (the main run is none at --rate)."""
        rows = [self.r["traffic"]]
        for rate in self.o.measure_rates:
            for comp in self.o.compressions:
                if (comp, rate) != ("none", self.o.rate):
                    rows.append(self.trial(net, cluster, data, self.o.out / f"run-{comp}-{rate}", comp, rate)[0])
        net.set_rate(self.o.rate)
        self.r["compression"] = rows
        self.mark("compression_done")
        self.check("every compression run finished with identical weights on all ranks",
                   all(r["finished"] and r["same_weights"] for r in rows),
                   ", ".join(f"{r['compression']}@{r['tc_rate']}" for r in rows))
        by = {(r["compression"], r["tc_rate"]): r for r in rows}
        for rate in self.o.measure_rates:
            none, fp16 = by.get(("none", rate)), by.get(("fp16", rate))
            if none and fp16:
                cut = [1 - f / n for f, n in zip(fp16["tx_bytes_per_step_per_host"],
                                                 none["tx_bytes_per_step_per_host"])]
                fp16["cut_vs_none"] = [round(c, 3) for c in cut]
                self.check(f"fp16 cuts the measured bytes per step by 40-60% at {rate}",
                           all(0.40 <= c <= 0.60 for c in cut),
                           f"{fp16['tx_bytes_per_step_per_host']} vs {none['tx_bytes_per_step_per_host']} B/step "
                           f"per host: cut {[f'{c:.0%}' for c in cut]}")

    def kill_and_resume(self, net, cluster, data, run_dir) -> None:
        """kill -9 (over SSH) the engine of the last rank on the second host once the job has checkpointed past the
        short run; the error must name that rank and host within 60 s. The relaunch starts fresh engines over SSH
        (Cluster restarts them lazily, after the error) and resumes from that checkpoint to a few steps on."""
        from nmtkit.errors import RankFailedError
        victim = [e for e in cluster.engines() if e.host == net.hosts[1].name][-1]
        start = last_checkpoint(run_dir)
        cfg = self.cfg(data, 60 * self.o.steps).with_overrides({"train.ckpt_every": 2})
        job = cluster.launch(cfg, run_dir, data_dir=data, preflight=False)
        deadline = time.time() + 600
        while last_checkpoint(run_dir) <= start and not job.done and time.time() < deadline:
            time.sleep(0.5)  # a checkpoint of this job: the resume must start from it, not from the short run's
        net.ssh(victim.host, "kill", "-9", str(victim.pid))
        t = time.time()
        err = None
        try:
            job.wait(timeout=120)
        except RankFailedError as e:
            err = str(e)
        seconds = time.time() - t
        while {e.id for e in job.engines} & set(cluster.client.ids) and time.time() < t + 60:
            time.sleep(0.2)  # the other ranks are released (killed); rank 0 may have saved once more meanwhile
        ckpt = last_checkpoint(run_dir)
        self.r["kill"] = {"rank": victim.slot.rank, "host": victim.host, "pid": victim.pid,
                          "error_after_s": round(seconds, 1), "error": err, "checkpoint": ckpt}
        named = err is not None and f"rank {victim.slot.rank} " in err and victim.host in err
        self.check("kill -9 of a remote engine: error names rank and host within 60 s", named and seconds <= 60,
                   f"{seconds:.1f} s: {(err or 'no error')[:160]}")
        self.mark("kill_error")
        old = {e.pid for e in job.engines}
        s3, _, w3 = self.launch(net, cluster, data, run_dir, ckpt + 4)
        fresh = cluster.engines()
        steps = [r["step"] for r in read_jsonl(runs.rank_log(run_dir, 0))][-4:]
        self.check("the run resumes after the kill: fresh engines, from the checkpoint, identical weights",
                   [s["status"] for s in s3] == ["finished"] * 4 and len({s["weights_checksum"] for s in s3}) == 1
                   and steps == list(range(ckpt + 1, ckpt + 5)) and not old & {e.pid for e in fresh}
                   and len(fresh) == 2 * self.o.slots,
                   f"{len(fresh)} new engines; from checkpoint {ckpt} to step {s3[0]['step']} in {w3:.0f} s "
                   f"(engine restart included)")
        self.mark("kill_resume_done")


def last_checkpoint(run_dir: Path) -> int:
    """The step of the checkpoint a resume starts from: TensorFlow's state file, renamed into place only after the
    checkpoint is complete (a rank killed while saving leaves a partial ckpt-* but not a state file naming it)."""
    state = run_dir / runs.CHECKPOINTS / "checkpoint"
    m = re.search(r'^model_checkpoint_path: ".*ckpt-(\d+)"', state.read_text(), re.M) if state.exists() else None
    return int(m.group(1)) if m else 0


def _mbit(rate: str) -> float:
    units = {"kbit": 1e-3, "mbit": 1.0, "gbit": 1e3}
    for u, f in units.items():
        if rate.endswith(u):
            return float(rate[: -len(u)]) * f
    raise ValueError(f"tc rate {rate!r}: write it like 1gbit or 200mbit")


def report_md(r: dict) -> str:
    lines = [f"# nmtkit rehearsal: two SSH-reached hosts, {len(r.get('ranks', []))} ranks",
             "", f"Result: **{'green' if r['ok'] else 'RED'}** in {r.get('seconds')} s. Launch: {r.get('launch')}.", ""]
    lines += ["| host | reached by SSH at | data-link address |", "|---|---|---|"]
    lines += [f"| {h['name']} | {h['ssh']} | {h['data_addr']} |" for h in r.get("hosts", [])]
    lines += ["", "| rank | host | local rank | cross rank |", "|---|---|---|---|"]
    lines += [f"| {x['rank']} | {x['host']} | {x['local_rank']} | {x['cross_rank']} |" for x in r.get("ranks", [])]
    lines += ["", "| tc rate | measured (Mbit/s) | measured / rate |", "|---|---|---|"]
    lines += [f"| {x['tc_rate']} | {x['measured_mbit_s']} | {x['ratio']} |" for x in r.get("link", [])]
    if r.get("link_engines"):
        e = r["link_engines"]
        lines += ["", f"Measured by preflight between engines ({e['from']} -> {e['to']}, {e['at']}) at {e['tc_rate']}: "
                      f"{e['measured_mbit_s']} Mbit/s (best of {e['tries_mbit_s']}); recorded in run.json."]
    t = r.get("traffic")
    if t:
        lines += ["", f"Bytes per step on the data link ({t['ranks']} ranks, {t['params']:,} parameters, gradient "
                      f"{t['gradient_bytes']:,} B), steps {t['measured_steps']}: measured "
                      f"{t['tx_bytes_per_step_per_host']} B sent per host per step "
                      f"vs the ring-allreduce model 2(N-1)/N x gradient bytes = {t['ring_model_bytes_per_rank']:,} B "
                      f"per rank (ratio {t['ratio_to_model']}; TCP/IP/Ethernet headers add ~4.5%). Horovod's "
                      f"coordination traffic with no gradients (3 s after the job, Horovod still initialised): "
                      f"{t['coordination_bytes_per_s_per_host']} B/s per host; subtracting that rate for a whole "
                      f"step (an upper bound: during a step the background thread is busy reducing) leaves "
                      f"{t['tx_minus_coordination_per_step']} B (ratio {t['ratio_minus_coordination']}). "
                      f"Step time {t['step_time_s']} s (steps {t['measured_steps']})."]
    lines += _compression_md(r.get("compression") or [])
    if r.get("kill"):
        k = r["kill"]
        lines += ["",
                  f"kill -9 of rank {k['rank']} on {k['host']} (pid {k['pid']}): error after {k['error_after_s']} s:",
                  "", f"> {k['error']}"]
    lines += ["", "| check | ok | detail |", "|---|---|---|"]
    lines += [f"| {k} | {'yes' if v['ok'] else 'NO'} | {v['detail']} |" for k, v in r["checks"].items()]
    return "\n".join(lines) + "\n"


def _compression_md(rows: list[dict]) -> list[str]:
    """The compression runs: bytes per step against the ring model, the fp16 cut, and step time by rate."""
    if not rows:
        return []
    lines = ["", f"Short runs ({rows[0]['ranks']} ranks, {rows[0]['params']:,} parameters, steps "
                 f"{rows[0]['measured_steps']} measured) with `train.compression` none and fp16 at each tc rate:", "",
             "| compression | tc rate | B/step sent per host (measured) | ring model 2(N-1)/N x gradient B | "
             "measured / model | fp16 cut vs none | link time per step at the rate | step time | load average |",
             "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {x['compression']} | {x['tc_rate']} | {', '.join(f'{b:,}' for b in x['tx_bytes_per_step_per_host'])} "
              f"| {x['ring_model_bytes_per_rank']:,} | {x['ratio_to_model']} | "
              f"{', '.join(f'{c:.0%}' for c in x['cut_vs_none']) if 'cut_vs_none' in x else ''} | "
              f"{1000 * x['link_time_per_step_s']:.0f} ms | {1000 * x['step_time_s']:.0f} ms | "
              f"{x.get('load_avg_1m', '')} |" for x in rows]
    rates = list(dict.fromkeys(x["tc_rate"] for x in rows))
    step = {(x["compression"], x["tc_rate"]): f"{1000 * x['step_time_s']:.0f} ms" for x in rows}
    lines += ["", "Step time (mean of the measured steps, rank 0's log; on a shared machine it follows the load "
                  "average, so compare it with the link time the measured bytes need at each rate):", "",
              "| compression | " + " | ".join(rates) + " |", "|---" * (len(rates) + 1) + "|"]
    lines += [f"| {c} | " + " | ".join(step.get((c, rt), "") for rt in rates) + " |"
              for c in dict.fromkeys(x["compression"] for x in rows)]
    return lines


def rehearse(opts: Options, kind: type | None = None, record: dict | None = None) -> dict:
    """Run a Rehearsal (or a subclass, `kind`) and write report.json/.md in opts.out, also when it fails; `record`
    adds fields to the report."""
    opts.out = Path(opts.out).resolve()  # the hosts see the same absolute paths (their ssh sessions start in ~)
    opts.out.mkdir(parents=True, exist_ok=True)
    reh = (kind or Rehearsal)(opts)
    try:
        return reh.run()
    except BaseException as e:
        reh.r["error"] = f"{type(e).__name__}: {e}"
        raise
    finally:
        reh.r.update(record or {})
        atomic_write_json(opts.out / "report.json", reh.r)
        atomic_write_text(opts.out / "report.md", report_md(reh.r))


def default_out() -> Path:
    """runs/rehearsal-<time> under the current directory (the repository root under `make rehearsal`)."""
    return Path("runs") / f"rehearsal-{time.strftime('%Y%m%d-%H%M%S')}"
