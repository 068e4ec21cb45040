"""The Transformer: shapes, masks (padding never changes the output, the future never leaks), loss masking,
the KV-cached decoding step, stateless dropout (masks fixed by the seed, none at inference), and the homework
model's parameter count."""
import dataclasses

import numpy as np
import pytest

import nmtkit  # noqa: F401
from nmtkit import config
from nmtkit.keras2 import import_tf
from nmtkit.model.decode import Searcher, search
from nmtkit.model.transformer import (
    BOS,
    EOS,
    PAD,
    Attention,
    Dropout,
    LayerNorm,
    build,
    count_params,
    positional_encoding,
    smoothed_loss,
)
from nmtkit.training.metrics import train_flops

tf = import_tf()
VOCAB = 50


@pytest.fixture(scope="module")
def model():
    cfg = config.profile("tiny").model
    cfg.d_model, cfg.d_ff, cfg.num_heads, cfg.dropout = 32, 64, 4, 0.0
    tf.random.set_seed(0)
    return build(cfg, VOCAB)


def test_shapes(model):
    src = tf.constant([[5, 6, 7, EOS], [8, EOS, PAD, PAD]])
    tgt = tf.constant([[BOS, 9, 10], [BOS, 11, PAD]])
    logits = model((src, tgt))
    assert logits.shape == (2, 3, VOCAB)
    assert logits.dtype == tf.float32
    memory, bias = model.encode(src)
    assert memory.shape == (2, 4, 32) and bias.shape == (2, 1, 1, 4)


def test_source_padding_never_changes_output(model):
    tgt = tf.constant([[BOS, 9, 10, 11]])
    short = model((tf.constant([[5, 6, 7, EOS]]), tgt))
    padded = model((tf.constant([[5, 6, 7, EOS, PAD, PAD, PAD]]), tgt))
    np.testing.assert_allclose(short.numpy(), padded.numpy(), atol=1e-5)
    # and a different source does change it (the check above is not vacuous)
    other = model((tf.constant([[5, 6, 8, EOS]]), tgt))
    assert np.abs(other.numpy() - short.numpy()).max() > 1e-4


def test_target_padding_and_batching_never_change_output(model):
    src = tf.constant([[5, 6, 7, EOS]])
    alone = model((src, tf.constant([[BOS, 9, 10]])))
    padded = model((src, tf.constant([[BOS, 9, 10, PAD, PAD]])))
    np.testing.assert_allclose(alone.numpy()[0], padded.numpy()[0, :3], atol=1e-5)
    # batched with a longer pair: row 0 is the same as alone
    batch = model((tf.constant([[5, 6, 7, EOS, PAD, PAD], [4, 5, 6, 7, 8, EOS]]),
                   tf.constant([[BOS, 9, 10, PAD], [BOS, 12, 13, 14]])))
    np.testing.assert_allclose(alone.numpy()[0], batch.numpy()[0, :3], atol=1e-5)


def test_causal_mask(model):
    src = tf.constant([[5, 6, 7, EOS]])
    a = model((src, tf.constant([[BOS, 9, 10, 11]]))).numpy()
    b = model((src, tf.constant([[BOS, 9, 10, 20]]))).numpy()
    np.testing.assert_allclose(a[0, :3], b[0, :3], atol=1e-5)
    assert np.abs(a[0, 3] - b[0, 3]).max() > 1e-4


def _with_dropout(rate):
    cfg = dataclasses.replace(config.profile("tiny").model, d_model=32, d_ff=64, num_heads=4, dropout=rate,
                              encoder_layers=2, decoder_layers=2)  # two blocks a side: indices run across blocks
    tf.keras.utils.set_random_seed(0)
    return build(cfg, VOCAB)


def test_dropout_masks_are_fixed_by_the_seed_and_off_at_inference():
    src, tgt = tf.constant([[5, 6, 7, EOS], [8, EOS, PAD, PAD]]), tf.constant([[BOS, 9, 10], [BOS, 11, PAD]])
    a, b = _with_dropout(0.1), _with_dropout(0.1)  # two models, same weights: as after a resume in a new process
    seed = tf.constant([1234, 7], tf.int64)
    first = a((src, tgt), training=True, seed=seed).numpy()
    np.testing.assert_array_equal(first, b((src, tgt), training=True, seed=seed).numpy())
    other = a((src, tgt), training=True, seed=tf.constant([1234, 8], tf.int64)).numpy()
    assert np.abs(other - first).max() > 1e-3
    # inference: no dropout whatever the seed, the same logits as a model without dropout
    plain = a((src, tgt)).numpy()
    np.testing.assert_array_equal(plain, a((src, tgt), training=False, seed=seed).numpy())
    np.testing.assert_array_equal(plain, _with_dropout(0.0)((src, tgt), training=True, seed=seed).numpy())
    assert np.abs(first - plain).max() > 1e-3
    # no seed (a hand-written loop): Keras-style random dropout, still on
    assert np.abs(a((src, tgt), training=True).numpy() - plain).max() > 1e-3


def test_every_dropout_layer_draws_its_own_mask_at_the_rate():
    model = _with_dropout(0.1)
    indices = [m.index for m in model.submodules if isinstance(m, Dropout)]
    assert sorted(indices) == list(range(len(indices))) and len(indices) == 2 + 4 * 2 + 6 * 2  # 2+2 layers
    x, seed = tf.ones([64, 256]), tf.constant([1, 2], tf.int64)
    one, two = Dropout(0.1), Dropout(0.1)
    two.index = 1
    m1 = one(x, seed, training=True).numpy()
    assert 0.08 < (m1 == 0).mean() < 0.12 and np.allclose(m1[m1 != 0], 1 / 0.9)
    assert (m1 != two(x, seed, training=True).numpy()).mean() > 0.1  # another layer: another mask
    np.testing.assert_array_equal(m1, one(x, seed, training=True).numpy())

    x = tf.random.normal([7, 3, 5])  # an odd number of elements: the last draw's second half unused
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = one(x, seed, training=True)
    g = tape.gradient(y, x, output_gradients=tf.ones_like(x)).numpy()
    np.testing.assert_allclose(g, np.where(y.numpy() == 0, 0.0, 65536 / (65536 - 6554)), rtol=1e-6)


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_layer_norm_matches_keras_forward_and_gradients(policy):
    ours, keras = LayerNorm(epsilon=1e-6, dtype=policy), tf.keras.layers.LayerNormalization(epsilon=1e-6, dtype=policy)
    x, w = tf.random.normal([3, 5, 16]) * 3 + 1, tf.random.normal([3, 5, 16])
    results = []
    for layer in (ours, keras):
        layer.build(x.shape)
        layer.gamma.assign(tf.linspace(0.5, 2.0, 16))
        layer.beta.assign(tf.linspace(-1.0, 1.0, 16))
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x)
            loss = tf.reduce_sum(tf.cast(y, tf.float32) * w)
        results.append([y] + tape.gradient(loss, [x, layer.gamma, layer.beta]))
    for a, b in zip(*results):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(tf.cast(a, tf.float32).numpy(), tf.cast(b, tf.float32).numpy(), atol=1e-5)


def test_fused_projections_equal_the_separate_dense_layers():
    attn = Attention(32, 4, 0.0)
    x, mem, bias = tf.random.normal([2, 5, 32]), tf.random.normal([2, 7, 32]), tf.zeros([2, 1, 1, 5])
    attn(x, x, bias)  # builds q, k, v, o one by one
    q, k, v = attn.project(x, [attn.q, attn.k, attn.v])
    for fused, dense in ((q, attn.q), (k, attn.k), (v, attn.v)):
        np.testing.assert_allclose(fused.numpy(), dense(x).numpy(), atol=1e-5)
    k, v = attn.keys_values(mem)
    np.testing.assert_allclose(k.numpy(), attn.split(attn.k(mem)).numpy(), atol=1e-5)
    np.testing.assert_allclose(v.numpy(), attn.split(attn.v(mem)).numpy(), atol=1e-5)


def test_loss_ignores_padding():
    rng = np.random.default_rng(0)
    logits = tf.constant(rng.normal(size=(2, 4, 7)), tf.float32)
    labels = tf.constant([[3, 4, PAD, PAD], [5, 6, 1, PAD]])
    total, n = smoothed_loss(logits, labels, 0.1)
    assert float(n) == 5.0
    # garbage logits at PAD positions do not matter
    noisy = logits.numpy().copy()
    noisy[0, 2:] = 100.0
    noisy[1, 3] = -50.0
    total2, _ = smoothed_loss(tf.constant(noisy), labels, 0.1)
    assert abs(float(total) - float(total2)) < 1e-4
    # with no smoothing it is the ordinary cross-entropy over the real tokens
    plain, _ = smoothed_loss(logits, labels, 0.0)
    ce = tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True).numpy()
    mask = labels.numpy() != PAD
    assert abs(float(plain) - ce[mask].sum()) < 1e-4


def test_label_smoothing_value():
    # uniform logits: the smoothed cross-entropy is log(V) whatever the smoothing
    logits = tf.zeros([1, 1, 10])
    total, _ = smoothed_loss(logits, tf.constant([[4]]), 0.1)
    assert abs(float(total) - np.log(10)) < 1e-5
    # a confident correct prediction is penalised by smoothing, not by plain CE
    sharp = tf.constant([[[0.0, 20.0] + [0.0] * 8]])
    s, _ = smoothed_loss(sharp, tf.constant([[1]]), 0.1)
    p, _ = smoothed_loss(sharp, tf.constant([[1]]), 0.0)
    assert float(s) > 1.0 > 1e-3 > float(p)


def test_embedding_is_tied_and_positions_are_sinusoids(model):
    names = [v.name for v in model.trainable_variables]
    assert sum("embedding" in n for n in names) == 1  # one matrix for source, target and output
    pe = positional_encoding(10, 8)
    assert pe.shape == (10, 8)
    np.testing.assert_allclose(pe[0], [0, 0, 0, 0, 1, 1, 1, 1], atol=1e-6)
    np.testing.assert_allclose(pe[3, 0], np.sin(3.0), atol=1e-6)


def test_cached_decode_step_matches_full_decoder(model):
    src = tf.constant([[5, 6, 7, EOS], [8, 9, EOS, PAD]])
    tgt = tf.constant([[BOS, 9, 10, 11], [BOS, 12, 13, 14]])
    full = model((src, tgt)).numpy()
    memory, bias = model.encode(src)
    cache = model.init_cache(memory, 6)
    for t in range(4):
        logits, cache = model.decode_step(tgt[:, t], tf.constant(t), cache, bias)
        np.testing.assert_allclose(logits.numpy(), full[:, t], atol=1e-4)


def test_greedy_search_is_argmax_decoding(model):
    src = tf.constant([[5, 6, 7, EOS], [8, 9, EOS, PAD]])
    ids, _ = Searcher(model, beam_size=1)(src, tf.constant(6))
    # the same by re-running the full model on the growing prefix
    prefix = np.full((2, 1), BOS)
    for _ in range(6):
        nxt = model((src, tf.constant(prefix))).numpy()[:, -1]
        nxt[:, [PAD, BOS]] = -1e9
        prefix = np.concatenate([prefix, nxt.argmax(-1)[:, None]], axis=1)
    got = ids.numpy()
    for row, ref in zip(got, prefix[:, 1:]):
        ref = list(ref)
        ref = ref[:ref.index(EOS) + 1] if EOS in ref else ref
        assert list(row[:len(ref)]) == ref


def test_beam_search_scores_at_least_greedy(model):
    src = tf.constant([[5, 6, 7, EOS], [8, 9, EOS, PAD], [10, 11, 12, EOS]])
    _, greedy = search(model, src, tf.constant(6), beam_size=1, alpha=0.0)
    ids, beam = search(model, src, tf.constant(6), beam_size=4, alpha=0.0)
    assert ids.shape == (3, 6)
    assert np.all(beam.numpy() >= greedy.numpy() - 1e-4)


def test_homework_model_has_61M_parameters():
    cfg = config.profile("wmt16-base")
    assert cfg.model.attention_bias is False, "OpenSeq2Seq's attention projections have no biases"
    m = build(cfg.model, 32_000)
    n = count_params(m)
    print(f"wmt16-base transformer: {n:,} parameters")
    # 60,524,544 with biases, less 4 projections x 512 biases x 18 attention layers (6 encoder, 12 decoder)
    assert n == 60_524_544 - 36_864
    with_bias = dataclasses.replace(cfg.model, attention_bias=True)
    assert count_params(build(with_bias, 32_000)) == 60_524_544
    # the homework's 32,768 BPE pieces: 768 more rows of the shared embedding
    assert count_params(build(cfg.model, cfg.data.vocab_size)) == n + 768 * 512
    # counted from the shape alone (notebooks 2 and 3), without building: the same counts
    assert count_params(cfg.model, 32_000) == n and count_params(with_bias, 32_000) == 60_524_544
    assert count_params(cfg.model, cfg.data.vocab_size) == n + 768 * 512
    tiny = config.profile("tiny").model
    assert count_params(tiny, 1000) == count_params(build(tiny, 1000))
    assert train_flops(cfg.model, 32_000, 1000, 1000) > 6 * (n - 32_000 * 512) * 1000
