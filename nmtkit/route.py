"""The route of `nmtkit train` (a face, beside cli.py): whether a run needs ranks, and its config settled once.

A one-process run never imports nmtkit.cluster; the config is settled here (budget, cluster, data directory)
and frozen before the loop or the cluster's driver receives it.
"""
from __future__ import annotations

from pathlib import Path

from nmtkit.config import Config

# Each launcher's own answer (its class's `one_process`: nmtkit/cluster/launchers.py, slurm.py; "auto" is local
# without --hosts): with --np 1 and no --hosts, is the run this process alone? Repeated here because that decision
# comes before any nmtkit.cluster import; tests/test_route.py proves each entry is its class's answer.
ONE_PROCESS = {"auto": True, "local": True, "ssh": False, "manual": False, "slurm": False}


def needs_ranks(args) -> bool:
    """More than this process: --np other than 1, --hosts, or a launcher whose one engine is not this process."""
    return args.np != 1 or bool(args.hosts) or not ONE_PROCESS[args.launcher]


def settled(cfg: Config, args, distributed: bool) -> Config:
    """The run's config, settled once before it starts, then frozen: profile and --set (cfg), budget, cluster
    (ranks, hosts, launcher) and data directory (absolute for ranks, which may run elsewhere; else as config.json
    has it)."""
    over = {k: v for k, v in (("train.max_hours", args.max_hours), ("train.max_cost", args.max_cost)) if v is not None}
    over["data.dir"] = str(Path(cfg.data.dir).resolve() if distributed else Path(cfg.data.dir))
    if distributed:
        over.update({"cluster.engines": args.np, "cluster.launcher": args.launcher})
        over.update({"cluster.hosts": args.hosts} if args.hosts else {})
    return cfg.with_overrides(over).freeze()
