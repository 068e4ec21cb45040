"""A run followed from its files alone: what the live panel shows for a run started anywhere (`nmtkit train --np`
under nohup, another kernel, this kernel before a restart). The same interface as a cluster Job (`done`,
`check()`, `progress()`, `headline()`), so `nmtkit.notebook.panel` shows either.

    nk.attach("workspace/runs/horovod")     # in a notebook; or RunWatch(run).progress() anywhere
"""
from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from nmtkit import runs
from nmtkit.errors import TrainError


class RunWatch:
    def __init__(self, run: str | Path):
        self.run = Path(run)
        self.t0 = time.time()

    def status(self) -> dict:
        return runs.live_status(self.run)

    @property
    def done(self) -> bool:
        return self.status().get("status") in ("finished", "stopped", "failed")

    def check(self) -> None:
        state = self.status()
        if state.get("status") == "failed":
            raise TrainError(f"{self.run.name}: failed at step {state.get('step')}: {state.get('error')}")

    def progress(self) -> pd.DataFrame:
        """The latest step record of every rank: host, step, loss, ms/step, tok/s."""
        rows = [{"rank": r.get("rank"), "host": r.get("host"), "step": r.get("step"), "loss": r.get("loss"),
                 "ms/step": None if r.get("step_time") is None else round(1000 * float(r["step_time"]), 1),
                 "tok/s": (r["tokens"] / r["step_time"]) if r.get("tokens") and r.get("step_time") else None,
                 "age (s)": round(time.time() - float(r["wall_time"]), 1) if r.get("wall_time") else None}
                for r in runs.rank_progress(self.run)]
        cols = ["rank", "host", "step", "loss", "ms/step", "tok/s", "age (s)"]
        return pd.DataFrame(rows, columns=cols).set_index("rank")

    def headline(self) -> str:
        state = self.status()
        return (f"{self.run.name}: {state.get('status', 'not started')}, step {state.get('step', '-')} of "
                f"{state.get('total_steps', '-')}, {state.get('ranks', '?')} rank(s) (pid {state.get('pid', '-')} "
                f"on {state.get('host', '-')})" + (f"; projection: {proj}" if (proj := runs.projection_text(state))
                                                   else ""))
