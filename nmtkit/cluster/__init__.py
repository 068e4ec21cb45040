"""Horovod across ipyparallel engines, driven from the notebook: no horovodrun, no mpirun, no SSH between nodes.

The notebook's process (the *driver*) owns an ipyparallel controller and the engines that stand for nodes:

    cluster = Cluster(cfg).start()          # (a) local engines, (b) SSH hosts, or (c) engines started by hand
    cluster.preflight(data_dir)             # same software and data on every node? (a DataFrame; refuses mismatches)
    job = cluster.launch(cfg, run_dir)      # Horovod rendezvous here, HOROVOD_* env on each engine, train() on each
    job.progress(); job.wait()              # per-rank progress; results ordered by Horovod rank
    cluster.stop()

How Horovod starts without horovodrun: the driver runs Horovod's HTTP rendezvous server and plans the slots (rank,
local rank, cross rank per engine) from the engines' host names with horovod.runner's own helpers; each engine
receives the variables horovodrun's Gloo launcher would have exported and calls hvd.init(). Engine ids are not
ranks: everything the driver returns is ordered by Horovod rank.

Local engines standing for nodes share one real host name; with `cluster.logical_hosts` each engine gets its own
logical host name node0, node1, ... so that Horovod's local and cross ranks look like N single-rank nodes, as on
the homework's VMs. On a real multi-GPU machine turn it off, so the engines of one machine share a host and pin
distinct GPUs.

Modules: plan (host list, slots, per-rank environment, listen address), preflight (node facts compared),
remote (what runs on the engines), rendezvous (the store Gloo meets in), engines (Cluster), jobs (Job).
"""
from nmtkit.cluster.engines import Cluster, Engine, start
from nmtkit.cluster.jobs import Job, RankFailedError
from nmtkit.cluster.plan import (LOOPBACK, ClusterError, assign_slots, check_listen, controller_ip, iface_for,
                                 parse_hosts, rank_env, source_address)
from nmtkit.cluster.preflight import PreflightError, preflight_problems, preflight_table, reachability_listener
from nmtkit.cluster.remote import DATA_MARKERS, engine_identity, node_facts, rank_check, rank_main, train_rank
from nmtkit.cluster.rendezvous import Rendezvous

__all__ = ["Cluster", "Engine", "start", "Job", "RankFailedError", "ClusterError", "PreflightError", "LOOPBACK",
           "assign_slots", "check_listen", "controller_ip", "iface_for", "parse_hosts", "rank_env", "source_address",
           "preflight_problems", "preflight_table", "reachability_listener", "DATA_MARKERS", "engine_identity",
           "node_facts", "rank_check", "rank_main", "train_rank", "Rendezvous"]
