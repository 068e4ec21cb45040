"""make_dataset(): token budget, sentence batches, exactly-once epochs across ranks, determinism."""
import numpy as np
import pytest

from nmtkit import config
from nmtkit.data import bpe
from nmtkit.data.pipeline import bucket_plan, example_lengths, load_encoded, make_dataset, read_split
from nmtkit.data.prepare import prepare
from nmtkit.errors import DataError

SMALL = {"data.train_size": 1500, "data.dev_size": 50, "data.test_size": 50, "data.vocab_size": 300,
         "data.bpe_sample": 3000}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    cfg = config.load("tiny", SMALL)
    d = tmp_path_factory.mktemp("data")
    prepare(cfg, data_dir=d, progress=False)
    return d, cfg


def _examples(ds):
    """Unpadded (src, tgt) tuples of one pass over a finite dataset."""
    out = []
    for src, tgt in ds:
        for s, t in zip(src.numpy(), tgt.numpy()):
            out.append((tuple(s[s != 0]), tuple(t[t != 0])))
    return out


def test_batches_have_the_documented_format(data):
    d, cfg = data
    src, tgt = next(iter(make_dataset(d, "train", cfg.data, seed=1)))
    assert src.dtype.name == "int32" and tgt.dtype.name == "int32"
    assert src.shape[0] == tgt.shape[0] == cfg.data.batch_sentences
    tok = bpe.Tokenizer.from_data_dir(d)
    s, t = src[0].numpy(), tgt[0].numpy()
    assert t[0] == bpe.BOS
    assert list(s[s != 0])[-1] == bpe.EOS and list(t[t != 0])[-1] == bpe.EOS
    assert tok.decode(s) and tok.decode(t)


def test_token_budget_is_never_exceeded_and_epoch_is_complete(data):
    d, cfg = data
    dc = cfg.with_overrides({"data.batch_tokens": 300, "data.bucket_width": 4}).data
    total, sizes = 0, set()
    for src, tgt in make_dataset(d, "train", dc, seed=3, repeat=False):
        assert src.shape[0] * max(src.shape[1], tgt.shape[1]) <= 300
        total += src.shape[0]
        sizes.add(src.shape[0])
    enc = load_encoded(d, "train")
    assert total == len(enc["en"][1]) - 1  # nothing over max_tokens in this corpus: every pair, once
    assert len(sizes) > 2  # short sentences come in bigger batches


def test_training_batches_share_both_sides_buckets_so_width_1_pads_neither_side(data):
    d, cfg = data
    dc = cfg.with_overrides({"data.batch_tokens": 300, "data.bucket_width": 1}).data
    shapes = set()
    for src, tgt in make_dataset(d, "train", dc, seed=3).take(40):
        s, t = src.numpy(), tgt.numpy()
        assert (s != 0).all() and (t != 0).all()  # 0 is padding: every row as long as the batch on both sides
        assert src.shape[0] == 300 // max(s.shape[1], t.shape[1])  # a full batch: the longer side sets its size
        shapes.add((s.shape[1], t.shape[1]))
    assert len({sl for sl, _ in shapes}) > 2 and len({sl - tl for sl, tl in shapes}) > 2  # many cells, not one
    finite = [(s.numpy(), t.numpy()) for s, t in make_dataset(d, "train", dc, seed=3, repeat=False).take(40)]
    assert any((s == 0).any() or (t == 0).any() for s, t in finite)  # a finite pass groups by the longer side only


def test_a_limit_keeps_the_splits_first_examples(data):
    d, cfg = data
    whole = _examples(make_dataset(d, "dev", cfg.data, shuffle=False, repeat=False))
    first = _examples(make_dataset(d, "dev", cfg.data, shuffle=False, repeat=False, limit=7))
    assert len(first) == 7 and set(first) <= set(whole) and len(whole) > 7
    src, _ = read_split(d, "dev")
    tok = bpe.Tokenizer.from_data_dir(d)
    assert {tuple(tok.encode(s)) + (bpe.EOS,) for s in src[:7]} == {s for s, _ in first}


def test_every_example_once_per_epoch_across_ranks(data):
    d, cfg = data
    per_rank = [_examples(make_dataset(d, "train", cfg.data, rank=r, size=3, seed=7, repeat=False))
                for r in range(3)]
    enc = load_encoded(d, "train")
    (ei, eo), (di, do) = enc["en"], enc["de"]
    expected = sorted((tuple(ei[eo[i]:eo[i + 1]]) + (bpe.EOS,), (bpe.BOS,) + tuple(di[do[i]:do[i + 1]]) + (bpe.EOS,))
                      for i in range(len(eo) - 1))
    assert sorted(x for part in per_rank for x in part) == expected
    sizes = [len(p) for p in per_rank]
    assert max(sizes) - min(sizes) <= 1
    assert not (set(per_rank[0]) & set(per_rank[1]))


def test_deterministic_with_a_seed_and_reshuffled_each_epoch(data):
    d, cfg = data
    a = [x.numpy().tolist() for x, _ in make_dataset(d, "train", cfg.data, seed=5).take(6)]
    b = [x.numpy().tolist() for x, _ in make_dataset(d, "train", cfg.data, seed=5).take(6)]
    c = [x.numpy().tolist() for x, _ in make_dataset(d, "train", cfg.data, seed=6).take(6)]
    assert a == b and a != c
    unshuffled = _examples(make_dataset(d, "dev", cfg.data, shuffle=False, repeat=False))
    assert unshuffled == _examples(make_dataset(d, "dev", cfg.data, shuffle=False, repeat=False))


def test_long_examples_are_left_out_of_training_only(data):
    d, cfg = data
    enc = load_encoded(d, "train")
    src_len, tgt_len = example_lengths(enc)
    limit = int(np.median(tgt_len - 2))
    dc = cfg.with_overrides({"data.max_tokens": limit}).data
    got = _examples(make_dataset(d, "train", dc, shuffle=False, repeat=False))
    want = int(np.sum((src_len - 1 <= limit) & (tgt_len - 2 <= limit)))
    assert len(got) == want < len(src_len)
    assert all(len(s) - 1 <= limit and len(t) - 2 <= limit for s, t in got)
    dev = load_encoded(d, "dev")
    assert len(_examples(make_dataset(d, "dev", dc, repeat=False))) == len(dev["en"][1]) - 1


def test_bucket_plan_and_bad_budget():
    dc = config.load("tiny").data
    dc.batch_tokens, dc.bucket_width = 100, 8
    boundaries, sizes = bucket_plan(30, dc)
    assert boundaries == [9, 17, 25] and sizes == [100 // 8, 100 // 16, 100 // 24, 100 // 30]
    dc.batch_tokens = 20
    with pytest.raises(DataError, match="batch_tokens"):
        bucket_plan(30, dc)
    dc.batch_tokens, dc.batch_sentences = 0, 16
    assert set(bucket_plan(30, dc)[1]) == {16}
