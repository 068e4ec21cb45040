"""A real Slurm on the rehearsal's two hosts, for tests/instructor/test_slurm.py (by hand:
`SlurmLab(TwoHosts(...)).up()`):
munged and slurmctld on the driver's side of the bridge, one slurmd inside each host's network namespace with its
own UTS host name and 1 CPU, every file under the hosts' temp dir. `lose(i)` kills every process of host i at once,
as a crashed node; `restore(i)` starts its slurmd again. `Output` reads a driver's merged output as it comes.
"""
from __future__ import annotations

import os
import re
import secrets
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


class SlurmLab:
    """munged + slurmctld on the namespaces' bridge (the driver's side) + one slurmd per namespace host; every
    file (key, socket, state, spools, pids, logs) under the hosts' temp dir, ports picked free."""

    def __init__(self, net):
        self.net, self.dir = net, Path(net.tmp) / "slurm"
        self.procs: list[subprocess.Popen] = []
        self.conf = self.dir / "slurm.conf"
        self.env = dict(os.environ, SLURM_CONF=str(self.conf))

    def _start(self, name: str, cmd: list[str]) -> subprocess.Popen:
        log = open(self.dir / f"{name}.out", "ab")
        p = subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        self.procs.append(p)
        return p

    def up(self) -> "SlurmLab":
        d = self.dir
        (d / "state").mkdir(parents=True)
        key, sock = d / "munge.key", d / "munge.sock"
        key.write_bytes(secrets.token_bytes(1024))
        key.chmod(0o400)
        self._start("munged", ["/usr/sbin/munged", "-F", "--force", "--num-threads=10", f"--socket={sock}",
                               f"--key-file={key}",
                               f"--pid-file={d}/munged.pid", f"--log-file={d}/munged.log", f"--seed-file={d}/seed"])
        nodes = "".join(f"NodeName={h.name} NodeAddr={h.ctl_addr} CPUs=1 RealMemory=1000 State=UNKNOWN\n"
                        for h in self.net.hosts)
        self.conf.write_text(
            f"ClusterName=nmtkit\nSlurmctldHost={socket.gethostname()}({self.net.listen_ip})\n"
            f"SlurmctldPort={_free_port()}\nSlurmdPort={_free_port()}\nSlurmUser=root\nSlurmdUser=root\n"
            f"AuthType=auth/munge\nAuthInfo=socket={sock}\nCryptoType=crypto/munge\n"
            f"StateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool-%n\nSlurmctldPidFile={d}/slurmctld.pid\n"
            f"SlurmdPidFile={d}/slurmd-%n.pid\nSlurmctldLogFile={d}/slurmctld.log\nSlurmdLogFile={d}/slurmd-%n.log\n"
            "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSelectType=select/cons_tres\n"
            "SelectTypeParameters=CR_CPU\nMpiDefault=none\nSwitchType=switch/none\nJobCompType=jobcomp/none\n"
            "JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n"
            "ReturnToService=2\nSlurmdParameters=config_overrides\nInactiveLimit=0\nMessageTimeout=10\n"
            # KillWait: Slurm's SIGTERM-to-SIGKILL grace (30 s by default); short here so jobs leave squeue quickly
            # SlurmdTimeout: slurmctld pings each slurmd every third of it, and a failed ping marks a lost node
            "KillWait=2\nSlurmdTimeout=15\nSchedulerParameters=sched_interval=1\n"
            # OverSubscribe: jobs may share a node's CPU, so the one-minute job runs beside the other tests' jobs
            f"{nodes}PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4\n")
        self._start("slurmctld", ["/usr/sbin/slurmctld", "-D", "-i", "-f", str(self.conf)])
        # each slurmd in its host's network namespace, with its own host name and /etc/hosts (nsenter, not
        # `ip netns exec`, which remounts /sys and hides the cgroup mounts slurmd insists on reading)
        for h in self.net.hosts:
            (d / f"spool-{h.name}").mkdir()
            self.slurmd(h)
        self.wait_idle()
        return self

    def slurmd(self, h) -> None:
        script = 'mount --bind "/etc/netns/$3/hosts" /etc/hosts && hostname "$1" && exec /usr/sbin/slurmd -D -f "$2"'
        self._start(h.name, ["nsenter", f"--net=/run/netns/{h.ns}", "unshare", "--uts", "--mount",
                             "--propagation", "private", "sh", "-c", script, "sh", h.name, str(self.conf), h.ns])

    def lose(self, i: int) -> None:
        """Host i goes dark as a crashed node does: every process in its namespace (slurmd, the job's slurmstepd,
        its engines) killed at once; only the rehearsal's sshd, which Slurm never sees, stays."""
        pids = subprocess.run(["ip", "netns", "pids", self.net.hosts[i].ns], capture_output=True, text=True).stdout
        for pid in map(int, pids.split()):
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() != "sshd":
                    os.kill(pid, signal.SIGKILL)
            except (OSError, ValueError):
                pass  # gone already

    def restore(self, i: int) -> None:
        """Host i back (slurmd again): ReturnToService=2 returns it to service as it registers."""
        self.slurmd(self.net.hosts[i])
        self.wait_idle()

    def wait_idle(self, timeout: float = 60) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            r = self.run("sinfo", "-h", "-N", "-o", "%T", check=False)
            if r.returncode == 0 and r.stdout.split() == ["idle"] * len(self.net.hosts):
                return
            time.sleep(0.5)
        logs = {p.name: p.read_text()[-800:] for p in self.dir.glob("*.out")}
        raise AssertionError(f"the Slurm nodes are not idle after {timeout} s: {r.stdout} {r.stderr} {logs}")

    def run(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
        r = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 or not check, r.stderr
        return r

    def queue(self) -> list[str]:
        return self.run("squeue", "-h", "-o", "%i").stdout.split()

    def down(self) -> None:
        for p in reversed(self.procs):  # our own daemons, by pid (their jobs' processes die with the namespaces)
            if p.poll() is None:
                p.terminate()
        for p in self.procs:  # throwaway state: no need to let a slow daemon take its time
            try:
                p.wait(timeout=1)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)


class Output:
    """The driver's merged output, read line by line as it comes, with each line's arrival time."""

    def __init__(self, proc: subprocess.Popen):
        self.proc, self.lines = proc, []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append((time.time(), line.rstrip("\n")))

    @property
    def text(self) -> str:
        return "\n".join(text for _, text in self.lines)

    def wait_for(self, pattern: str, timeout: float = 120) -> re.Match:
        deadline = time.time() + timeout
        while time.time() < deadline:
            done = not self.reader.is_alive()  # the driver ended and every line is in: one last look
            for _, line in list(self.lines):
                m = re.search(pattern, line)
                if m:
                    return m
            if done:
                break
            time.sleep(0.2)
        raise AssertionError(f"no line matching {pattern!r} within {timeout} s:\n{self.text}")

    def end(self, timeout: float = 180, stacks: bool = False) -> int:
        """The driver's exit code. `stacks`: if it has not ended within `timeout`, fail with its output and every
        thread's stack (the CLI dumps them on SIGUSR1), so a slow exit says where it was."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            if not stacks:
                raise
            self.proc.send_signal(signal.SIGUSR1)
            time.sleep(3)
            raise AssertionError(f"the driver had not ended {timeout} s later; its signal state, output and stacks:\n"
                                 f"{self.signal_state()}\n{self.text}")
        self.reader.join(timeout=5)
        return code

    def signal_state(self) -> str:
        """The driver's pending, ignored, caught and per-thread blocked signals (/proc), for an ignored Ctrl-C."""
        proc = Path(f"/proc/{self.proc.pid}")
        try:
            lines = [line for line in (proc / "status").read_text().splitlines() if line.startswith(("Sig", "ShdPnd"))]
            for t in sorted(proc.glob("task/*")):
                blk = [line.split()[1] for line in (t / "status").read_text().splitlines()
                       if line.startswith(("SigPnd", "SigBlk"))]
                lines.append(f"thread {(t / 'comm').read_text().strip()}: pending {blk[0]} blocked {blk[1]}")
        except (OSError, IndexError) as e:
            return f"(no /proc state: {e})"
        return "\n".join(lines)
