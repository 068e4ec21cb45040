"""Towers: a micro-batch's sentences cut in parts that run side by side (nmtkit.training.trainer `_micro_step`) give
the micro-batch's own loss and gradient, whatever the cut, with a part that holds no sentence too."""
import numpy as np
import pytest

from nmtkit.data.bpe import Tokenizer
from nmtkit.data.pipeline import make_dataset
from nmtkit.training.trainer import Trainer

from conftest import small_config

pytestmark = pytest.mark.long  # the long tier (tests/conftest.py): make test leaves it out


def _stepped(cfg, vocab, towers, batch):
    trainer = Trainer(cfg, vocab)  # the same seed: the same initial weights every time
    trainer.towers = towers  # read when the step is traced, at its first call
    out = trainer.run_step([batch]).numpy()
    return out, [v.numpy() for v in trainer.variables]


@pytest.mark.parametrize("sentences", [32, 3, 1])
def test_towers_train_the_weights_one_tower_trains(nmt_data, sentences):
    cfg = small_config(**{"model.dropout": 0.0, "model.label_smoothing": 0.1})  # no masks: the same sums
    vocab = Tokenizer.from_data_dir(nmt_data).vocab_size
    src, tgt = next(iter(make_dataset(nmt_data, "train", cfg.data, seed=1)))
    batch = (src[:sentences], tgt[:sentences])
    one, w1 = _stepped(cfg, vocab, 1, batch)
    for towers in (2, 3):
        out, w = _stepped(cfg, vocab, towers, batch)
        np.testing.assert_allclose(out, one, rtol=1e-5)  # [mean loss, source tokens, target tokens]
        assert max(float(np.max(np.abs(a - b))) for a, b in zip(w, w1)) < 1e-5


def test_towers_draw_their_own_dropout_masks(nmt_data):
    cfg = small_config()
    vocab = Tokenizer.from_data_dir(nmt_data).vocab_size
    src, tgt = next(iter(make_dataset(nmt_data, "train", cfg.data, seed=1)))
    (one, w1), (two, w2), (again, w3) = (_stepped(cfg, vocab, t, (src, tgt)) for t in (1, 2, 2))
    assert one[1:].tolist() == two[1:].tolist()  # the same tokens
    assert not np.allclose(one[0], two[0], rtol=1e-7, atol=0)  # other masks, another loss
    assert all((a == b).all() for a, b in zip(w2, w3))  # and the same ones again: deterministic
