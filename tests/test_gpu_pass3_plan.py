"""Issue 69, item 5: nodes with different GPUs. Each rank fitted its micro-batches (and chose its precision) from
its own GPU, so a node with a smaller GPU traced a step with more micro-batches: different allreduces, and Horovod
waits forever. Two ranks, faked: an A100 80GB node and a T4 node (compute capability 7.5, 15 GiB)."""
from nmtkit.model.memory import MARGIN, project
from nmtkit.training import trainer as trainer_module
from nmtkit.training.dist import Single

from conftest import small_config

CFG = small_config(**{"data.batch_sentences": 256, "train.precision": "auto"})
WHOLE = project(CFG, 400, 256, precision="mixed_float16").total
BIG, SMALL = 4 * WHOLE, 0.6 * WHOLE / (1 - MARGIN)  # the whole batch fits one, not the other


class Rank(Single):
    """Rank `rank` of two, whose gather hands back both ranks' facts in rank order (Horovod's allgather)."""

    def __init__(self, rank: int, other):
        super().__init__()
        self.rank, self.size, self.other = rank, 2, other

    def gather(self, obj) -> list:
        return [obj, self.other] if self.rank == 0 else [self.other, obj]


def rank_trainer(monkeypatch, rank: int, mine: tuple, other: tuple):
    caps, memory = mine
    monkeypatch.setattr(trainer_module, "gpu_capabilities", lambda tf: caps)
    monkeypatch.setattr(trainer_module, "gpu_memory", lambda: memory)
    return trainer_module.Trainer(CFG, 400, Rank(rank, other))


def test_ranks_on_different_gpus_trace_the_same_step(monkeypatch):
    a100, t4 = ([(8, 0)], BIG), ([(7, 5)], SMALL)
    assert trainer_module.fit(CFG, 400, BIG, "mixed_float16").count == 1  # alone, each would plan its own
    assert trainer_module.fit(CFG, 400, SMALL, "mixed_float16").count > 1
    first = rank_trainer(monkeypatch, 0, a100, t4)
    second = rank_trainer(monkeypatch, 1, t4, a100)
    assert first.accum == second.accum > 1, "the ranks' steps differ: their allreduces would never meet"
    assert first.micro.size == second.micro.size and first.precision == second.precision == "mixed_float16"
    pascal = ([(6, 0)], BIG)  # no tensor cores: float32 there, so float32 everywhere
    assert rank_trainer(monkeypatch, 0, a100, pascal).precision == "float32"
