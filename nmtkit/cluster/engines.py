"""The Cluster: an ipyparallel controller plus engines, one engine per Horovod rank, owned by the driver (the
notebook's process). Start and stop, the rank plan of the engines, preflight, data push, and jobs. It is the
EngineControl its Jobs use (alive ids, signal, release, is-local)."""
from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any, Callable

import ipyparallel as ipp
import pandas as pd

from nmtkit.cluster.connfiles import connection_files, engine_command, secure
from nmtkit.cluster.jobs import Job, end_session, take_session
from nmtkit.cluster.launchers import make_launcher
from nmtkit.cluster.lifeline import Lifeline, hold
from nmtkit.cluster.plan import (
    Engine,
    assign_slots,
    bound_hosts,
    check_listen,
    device_indices,
    iface_for,
    parse_hosts,
    rank_env,
)
from nmtkit.cluster.preflight import (
    copy_to_node,
    gather_facts,
    link_status,
    measure_link,
    preflight_problems,
    preflight_table,
    reachability_listener,
)
from nmtkit.cluster.remote import engine_identity, rank_check, rank_main, train_rank
from nmtkit.cluster.rendezvous import Rendezvous
from nmtkit.config import ClusterConfig, Config
from nmtkit.errors import ClusterError
from nmtkit.runs import RunDir


class Cluster:
    """Modes (cfg.cluster): `hosts` empty -> local engines (`engines` of them); `hosts` set and `launcher` "auto"
    or "ssh" -> engines started over SSH on those hosts; `launcher` "manual" -> only the controller starts,
    students run engine_command() on each node; "slurm" -> `engines` engines as a Slurm job (cluster.slurm). The
    controller and rendezvous listen on `cluster.listen` (or `listen_ip=`), else on 127.0.0.1 for local engines and
    the one local address that routes to the hosts.

    Introduced in notebook 03_horovod_multinode."""

    def __init__(self, cfg: Config | ClusterConfig | None = None, *, engines: int | None = None,
                 hosts: str | None = None, launcher: str | None = None, listen_ip: str | None = None,
                 logical_hosts: bool | None = None, profile_dir: str | os.PathLike | None = None,
                 start_timeout: int | None = None, gloo_timeout: int | None = None, iface: str | None = None,
                 heartbeat_ms: int = 1000):
        cc = cfg.cluster if isinstance(cfg, Config) else (cfg or ClusterConfig())
        self.n = engines if engines is not None else cc.engines
        self.hosts = parse_hosts(hosts if hosts is not None else cc.hosts)
        self.backend = make_launcher(launcher or cc.launcher, self.hosts, cc)  # the seam: see launchers.py
        self.launcher = self.backend.name  # its name, for messages
        self.n = self.backend.engine_count(self.n)
        self.logical_hosts = cc.logical_hosts if logical_hosts is None else logical_hosts
        if self.backend.logical_hosts is not None and logical_hosts is None:
            self.logical_hosts = self.backend.logical_hosts
        self.iface = cc.iface if iface is None else iface
        self.backend.check_iface(self.iface)
        self.listen_ip = check_listen(listen_ip if listen_ip is not None else (cc.listen or self.backend.listen_ip()))
        self.start_timeout = start_timeout or cc.start_timeout
        self.gloo_timeout = gloo_timeout or cc.rendezvous_timeout
        self.cycle_time_ms = cc.cycle_time_ms
        self.profile_dir = str(profile_dir) if profile_dir else None
        self.heartbeat_ms = heartbeat_ms
        self._ipp: ipp.Cluster | None = None
        self.client: ipp.Client | None = None
        self.ids: list[int] = []                 # the engines this cluster uses (dead engines' ids excluded)
        self._engines: list[Engine] | None = None
        self.facts: list[dict] = []              # the last preflight's per-rank facts (submit reads the builds)
        self.link: dict | None = None            # the last preflight's measured link (launch records it in run.json)
        self.timings: dict[str, float] = {}
        self._lifeline: Lifeline | None = None   # ends what this driver started when it dies (no orphans)

    # lifecycle

    def start(self) -> Cluster:
        t0 = time.time()
        kwargs: dict[str, Any] = dict(
            controller_ip=self.listen_ip, engine_timeout=self.start_timeout, shutdown_atexit=True, log_level=40,
            # Notice a dead engine in a few seconds (the default is 30 s): the fault path depends on it.
            controller_args=[f"--HeartMonitor.period={self.heartbeat_ms}", "--HeartMonitor.max_heartmonitor_misses=5"])
        if self.profile_dir:
            Path(self.profile_dir).mkdir(parents=True, exist_ok=True)
            kwargs["profile_dir"] = self.profile_dir
        kwargs.update(self.backend.controller_kwargs())
        self._ipp = ipp.Cluster(**kwargs)
        self._ipp.start_controller_sync()
        self._lifeline = Lifeline(self.listen_ip)
        self._lifeline.reap([self._ipp.controller.pid])
        secure(self._ipp, self.start_timeout)
        self.client = self._ipp.connect_client_sync()
        if self.backend.starts_engines:
            try:
                self._start_engines(self.n)
            except BaseException:  # Ctrl-C while a Slurm job is queued, engines that never came: end what started
                self.stop()
                raise
        self.timings["cluster_start_s"] = time.time() - t0
        return self

    def stop(self) -> None:
        if self._ipp is not None:
            try:
                if self.client is not None:
                    self.client.close()
            finally:
                self.backend.before_stop(self._ipp)
                self._ipp.stop_cluster_sync()
                self._ipp, self.client, self.ids, self._engines = None, None, [], None
                if self._lifeline is not None:
                    self._lifeline.close()
                    self._lifeline = None

    def __enter__(self) -> Cluster:
        return self.start() if self._ipp is None else self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _start_engines(self, n: int) -> None:
        known = set(self.client.ids)
        cls, count, launch = self.backend.engine_set(n, self._ipp.profile_dir)
        if cls is not None:
            self._ipp.engine_launcher_class = cls
        set_id = self._ipp.start_engines_sync(count, environment=self.backend.engine_env(self.n), **launch)
        steps = self.backend.started(self._ipp.engines[set_id], self._lifeline, self._ipp.controller.pid)
        self.ids = self._wait_for_new(known, n)
        # Tie the engines' lives to this driver's (a busy engine never notices a dead controller by itself),
        # and let the reaper end the controller and the local engines if the driver is killed outright.
        pids = self.client[self.ids].apply_sync(hold, self._lifeline.addr, self._lifeline.port)
        self._lifeline.reap([self._ipp.controller.pid] + self.backend.reaped(pids) + steps)

    def restart_engines(self) -> None:
        """Fresh engine processes (the way out of a rank stuck in a Gloo collective): same count, new ids."""
        if not self.backend.owns_engines:
            raise ClusterError("engines started by hand cannot be restarted from here: restart ipengine on each node")
        self._ipp.stop_engines_sync()
        self._lifeline.on_death = []  # that job is gone; the next one arms its own scancel
        self._start_engines(self.n)

    def forget(self, ids: list[int]) -> None:
        """Drop engines a failed job ended; the next engines() (launch, submit, preflight) starts fresh ones."""
        gone = set(ids)
        self.ids = [i for i in self.ids if i not in gone]
        self._engines = None

    # EngineControl: what a Job may do to its engines
    def alive_ids(self) -> set[int]:
        return set(self.client.ids)

    def signal(self, ids: list[int], name: str) -> None:
        self.client.send_signal(name, targets=ids, block=True)

    def cause(self) -> str:
        """What ended the engines, as far as the launcher knows ('' if nothing): a Slurm job's state, lost nodes."""
        silent = lambda: [e.host for e in self._engines or [] if e.id not in self.alive_ids()]  # noqa: E731
        return self.backend.cause(silent, self._end_engines, settle_s=5 * self.heartbeat_ms / 1000 + 1)

    def allocation_ended(self) -> str | None:
        """'Slurm job N was cancelled (...)' when the engines' job ended under them, else None."""
        return self.backend.ended(self._end_engines)

    def _end_engines(self) -> None:
        """Ask the live engines to exit now (their job is ending anyway: its end state shows once they are gone)."""
        live = [i for i in self.ids if i in self.alive_ids()]
        if live:
            self.client.shutdown(targets=live, block=False)

    def release(self, ids: list[int]) -> None:
        """End a failed job's engines at once: SIGKILL via each engine's nanny (it acts while the engine is stuck in
        Gloo; no SSH round trip), then forget them. Hand-started engines are not ours to kill: abort their task."""
        live = [i for i in ids if i in self.alive_ids()]
        if not self.backend.owns_engines:
            self.client.abort(targets=live, block=False)
            return
        if live:
            self.client.send_signal("SIGKILL", targets=live, block=False)
        self.forget(ids)

    def _replace_missing(self) -> None:
        """Restart the engines when fewer than planned are alive. Lazily, at the next use rather than when a rank
        dies: over SSH a restart takes a minute or two, and the error naming the dead rank must not wait for it."""
        if not self.backend.owns_engines or self.client is None or self._ipp is None:
            return
        alive = set(self.client.ids)
        if sum(i in alive for i in self.ids) < self.n:
            self.restart_engines()

    def _wait_for_new(self, known: set, n: int, timeout: float | None = None) -> list[int]:
        timeout = timeout or self.start_timeout
        deadline = time.time() + timeout
        while True:
            new = sorted(set(self.client.ids) - known)
            if len(new) >= n:
                self._engines = None
                return new[:n]
            if time.time() > deadline:
                raise ClusterError(f"only {len(new)} of {n} engines registered within {timeout} s; see the engine "
                                   f"logs in {self._ipp.profile_dir}/log")
            time.sleep(0.2)

    def wait_for_engines(self, n: int | None = None, timeout: float | None = None) -> list[int]:
        """For hand-started engines: wait until n of them have registered (n defaults to the host list's slots)."""
        self.ids = self._wait_for_new(set(), n or self.n, timeout)
        return self.ids

    def engine_command(self, python: str = "ipengine") -> str:
        """The command a student runs on each node to join this controller (nmtkit.cluster.connfiles)."""
        return engine_command(self._ipp, python)

    def connection_files(self) -> dict[str, str]:
        return connection_files(self._ipp)

    # engines and their plan
    def engines(self, refresh: bool = False) -> list[Engine]:
        """The engines in rank order, with their Horovod slots."""
        self._replace_missing()
        if self._engines is not None and not refresh:
            return self._engines
        if not self.ids:
            raise ClusterError("no engines: start() the cluster (or wait_for_engines() for hand-started ones)")
        idents = self.client[self.ids].apply_async(engine_identity).get(timeout=self.start_timeout)
        nodes = [f"node{i}" for i in range(len(self.ids))] if self.logical_hosts else [d["host"] for d in idents]
        hosts, visible = [d["host"] for d in idents], [d.get("cuda_visible") for d in idents]
        uuids = [d.get("gpu_uuids") for d in idents]  # bound by UUID where every task calls its GPU 0
        devices, bound = device_indices(hosts, visible, uuids), bound_hosts(hosts, visible, uuids)
        engines = [Engine(eid, d["host"], node, d["pid"], slot, device_index=device, gpus_bound=d["host"] in bound)
                   for eid, d, node, slot, device in zip(self.ids, idents, nodes, assign_slots(nodes), devices)]
        self._engines = sorted(engines, key=lambda e: e.slot.rank)
        return self._engines

    def is_local(self, engine: Engine) -> bool:
        return engine.host == socket.gethostname() and self.backend.is_local()

    def _first(self, ranks: int | None) -> list[Engine]:
        """The first `ranks` engines (all by default), re-planned as a job of that size."""
        engines = self.engines()
        if ranks is None or ranks == len(engines):
            return engines
        if not 1 <= ranks <= len(engines):
            raise ClusterError(f"ranks={ranks}: this cluster has {len(engines)} engines")
        chosen = engines[:ranks]
        slots = assign_slots([e.node for e in chosen])
        return sorted((Engine(e.id, e.host, e.node, e.pid, s, e.device_index, e.gpus_bound)
                       for e, s in zip(chosen, slots)),
                      key=lambda e: e.slot.rank)

    # preflight and data
    def preflight(self, data_dir: str | os.PathLike | None = None, *, push_data: bool = True,
                  rendezvous: tuple[str, int] | None = None, raise_on_problems: bool = True) -> pd.DataFrame:
        """Check every node before training; returns the per-rank DataFrame, raises ClusterError on a mismatch.

        Local engines share the driver's data directory. Remote nodes that lack the data get it copied through
        their engines (push_data) into the same path. `rendezvous`: the address the nodes must reach (default: a
        throwaway listener on the address the rendezvous server will use).
        """
        engines = self.engines()
        data = str(Path(data_dir).resolve()) if data_dir is not None else None
        if rendezvous is None:
            with reachability_listener(self.listen_ip) as addr:
                facts = self._facts_after_push(engines, data, addr, push_data)
        else:
            facts = self._facts_after_push(engines, data, rendezvous, push_data)
        self.facts = facts
        problems = preflight_problems(facts, self.iface)
        if problems and raise_on_problems:
            raise ClusterError("preflight refused to train:\n  - " + "\n  - ".join(problems))
        self.link = None if problems else measure_link(self.client, engines, facts)
        return preflight_table(facts, self.link)

    def _facts_after_push(self, engines: list[Engine], data: str | None, rendezvous: tuple[str, int],
                          push_data: bool) -> list[dict]:
        facts = gather_facts(self.client, engines, data, rendezvous, self.start_timeout)
        if not (push_data and data is not None and Path(data).is_dir()):
            return facts
        missing = [e for e, f in zip(engines, facts)
                   if not f.get("error") and not f.get("data_ok") and not self.is_local(e)]
        for e in missing:
            copy_to_node(self.client[e.id], data, data)
        return gather_facts(self.client, engines, data, rendezvous, self.start_timeout) if missing else facts

    # jobs
    def submit(self, fn: Callable, *args, ranks: int | None = None, run: RunDir | None = None,
               owns_session: bool = False, **kwargs) -> Job:
        """Run fn(*args, **kwargs) on every engine (or the first `ranks`) as one Horovod job: a fresh rendezvous,
        each engine's HOROVOD_* environment, hvd.init(), then fn. Returns a Job at once, which marks `run`
        failed when a rank fails and, with `owns_session`, releases its session at its end."""
        engines, t0 = self._first(ranks), time.time()
        self.backend.refresh_deadline()  # an administrator may have changed an allocation's limit meanwhile
        rdv = Rendezvous(self.listen_ip, [e.slot for e in engines])
        facts = {f["rank"]: f for f in self.facts}  # NCCL and GPUs per rank, when a preflight ran
        pending = []
        for e in engines:
            f = facts.get(e.slot.rank, {})
            env = rank_env(e.slot, addr=self.listen_ip, port=rdv.port,
                           iface=self.iface or f.get("iface") or iface_for(self.listen_ip),
                           nccl=bool(f.get("nccl_built")) and int(f.get("gpus") or 0) > 0,
                           gloo_timeout=self.gloo_timeout, device_index=e.device_index, gpus_bound=e.gpus_bound,
                           cycle_ms=self.cycle_time_ms)
            env.update(self.backend.rank_env())  # e.g. the allocation's end
            pending.append(self.client[e.id].apply_async(rank_main, env, fn, args, kwargs))
        return Job(self, engines, pending, rdv, t0, run=run, owns_session=owns_session)

    def launch(self, cfg: Config, run_dir: str | os.PathLike | RunDir, *, data_dir: str | os.PathLike | None = None,
               resume: bool = True, preflight: bool = True, ranks: int | None = None) -> Job:
        """Start distributed training in the background: the run directory's session (taken here unless the
        caller holds it; a second job fails at once, naming the holder), preflight, then train() on every rank (or
        the first `ranks`; resumes with any number of ranks) given the session's handle. Returns a Job at once."""
        data = Path(data_dir or cfg.data.dir).resolve()
        run = run_dir if isinstance(run_dir, RunDir) else RunDir(Path(run_dir).resolve())
        took = take_session(run)  # the lock's owner for a notebook job: jobs.py, which releases it at the end
        try:
            if preflight:
                self.preflight(data)
            if self.link:  # before the ranks start: rank 0's "running" transition keeps these fields
                run.record(**link_status(self.link))
            return self.submit(train_rank, cfg.to_dict(), run.handle(), str(data), resume, ranks=ranks, run=run,
                               owns_session=took)
        except BaseException:
            end_session(run, took)
            raise

    def check_ranks(self, timeout: float = 300) -> pd.DataFrame:
        """Horovod across the engines: each rank's node, an allreduce of rank+1 (1+2+...+N on every rank) and
        (rank, size, local rank, local size, cross rank, cross size) as Horovod sees it."""
        rows = [dict(rank=r.rank, node=r.host, allreduce_sum=r.value["allreduce_sum"],
                     hvd_rank_size_local_cross=r.value["hvd"]) for r in self.submit(rank_check).wait(timeout=timeout)]
        return pd.DataFrame(rows).set_index("rank")


def start(cfg: Config) -> Cluster:
    """The notebook's one-liner: the cluster that cfg.cluster describes, started."""
    return Cluster(cfg).start()
