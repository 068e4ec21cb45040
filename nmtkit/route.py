"""The route of `nmtkit train` (a face, beside cli.py): whether a run needs ranks, and its config settled once.

A one-process run never imports nmtkit.cluster; the config is settled here (budget, cluster, data directory)
and frozen before the loop or the cluster's driver receives it.
"""
from __future__ import annotations

from pathlib import Path

from nmtkit.config import Config

ONE_PROCESS = ("auto", "local")  # with --np 1 and no --hosts: this process alone, no nmtkit.cluster import


def needs_ranks(args) -> bool:
    """More than this process: --np other than 1, --hosts, or a launcher that starts engines."""
    return args.np != 1 or bool(args.hosts) or args.launcher not in ONE_PROCESS


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
