"""Horovod across ipyparallel engines, driven from one process (the *driver*: a notebook's kernel or
`nmtkit train --np`). No horovodrun and no mpirun; the driver may reach the nodes over SSH to start their engines
(`cluster.launcher=ssh`), but the nodes never SSH each other: Horovod's ranks meet through the driver's rendezvous.

    cluster = Cluster(cfg).start()          # (a) local engines, (b) SSH hosts, (c) by hand, (d) a Slurm job
    cluster.preflight(data_dir)             # same software and data on every node? (a DataFrame; refuses mismatches)
    cluster.check_ranks()                   # Horovod across the nodes: an allreduce, each rank's view
    job = cluster.launch(cfg, run_dir)      # Horovod rendezvous here, HOROVOD_* env on each engine, train() on each
    job.progress(); job.wait()              # per-rank progress; RankResults ordered by Horovod rank
    cluster.stop()

How Horovod starts without horovodrun: the driver runs Horovod's HTTP rendezvous server and plans the slots (rank,
local rank, cross rank per engine) from the engines' host names with horovod.runner's own helpers; each engine
receives the variables horovodrun's Gloo launcher would have exported (listed, with why, in docs/architecture.md,
"What a rank's environment holds") and calls hvd.init(). Engine ids are not ranks: results come in Horovod rank order.

Local engines standing for nodes share one real host name; with `cluster.logical_hosts` each engine gets its own
logical host name node0, node1, ... so that Horovod's local and cross ranks look like N single-rank nodes, as on
the homework's VMs. On a real multi-GPU machine turn it off, so the engines of one machine share a host and pin
distinct GPUs.

Modules:
    plan.py        host list, slots, each rank's environment, the listen address; the Engine record (no TensorFlow)
    preflight.py   the facts every node reports, compared; the data copy to a node that lacks it
    link.py        the measured link between nodes, and the compression trials
    remote.py      what runs on the engines (rank_main, rank_check, train_rank)
    rendezvous.py  the store Gloo meets in
    connfiles.py   the controller's connection files, owner-only, and the command that joins a hand-started engine
    engines.py     Cluster: controller + engines, preflight, submit, launch; the EngineControl its Jobs use
    jobs.py        Job (results, stop, failures, progress) and RankResult; knows engines only via EngineControl
    lifeline.py    no orphans: engines and controller end when the driver dies, however it dies
    seam.py        Launcher, the neutral seam every launcher sits behind (no SSH, no host by default), and
                   RemoteLauncher, the host list of engines on other nodes
    launchers.py   one object per launcher: LocalLauncher, SshLauncher, ManualLauncher, and slurm.py's
                   SlurmLauncher, made by make_launcher (the one place that reads cluster.launcher)
    slurm.py       SlurmLauncher: the engines as a Slurm job (sbatch, or srun in an allocation), its end and time limit
    driver.py      `nmtkit train --np N`: the same path in the foreground, for nohup and days-long runs
"""
from nmtkit.cluster.engines import Cluster
from nmtkit.cluster.jobs import Job, RankResult
from nmtkit.errors import ClusterError, RankFailedError

__all__ = ["Cluster", "ClusterError", "Job", "RankFailedError", "RankResult"]
