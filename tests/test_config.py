"""The typed config tree: profiles, overrides, bad keys and types, round trip through config.json."""
import json

import pytest

from nmtkit import config
from nmtkit.cli import main as cli_main


def test_default_profile_is_tiny_and_env_selects_another():
    assert config.load(env={}).profile == "tiny"
    assert config.load(env={"NMTKIT_PROFILE": "wmt16-base"}).profile == "wmt16-base"
    # --profile beats the environment
    assert config.load("tiny", env={"NMTKIT_PROFILE": "wmt16-base"}).profile == "tiny"


def test_wmt16_base_is_the_homeworks_transformer_base():
    c = config.profile("wmt16-base")
    assert (c.model.d_model, c.model.encoder_layers, c.model.decoder_layers) == (512, 6, 6)
    assert (c.model.num_heads, c.model.d_ff, c.model.dropout, c.model.label_smoothing) == (8, 2048, 0.1, 0.1)
    assert c.data.vocab_size == 32_768 and c.data.batch_sentences == 256 and c.data.max_tokens == 56
    assert c.data.max_len_ratio == 9.0 and c.model.attention_bias is False   # clean-corpus-n's ratio; use_bias=False
    assert config.profile("tiny").model.attention_bias is True   # the tiny course model keeps its biases
    assert (c.train.lr_scale, c.train.warmup_steps, c.train.steps) == (2.0, 8000, 300_000)
    assert (c.train.beta1, c.train.beta2, c.train.epsilon) == (0.9, 0.997, 1e-9)
    assert (c.eval.every, c.eval.beam_size, c.eval.length_penalty) == (4000, 4, 0.6)


def test_overrides_coerce_to_the_field_type():
    c = config.load("tiny", ["train.steps=1_234", "model.dropout=0", "train.xla=true", "data.dir=/x"], env={})
    assert c.train.steps == 1234 and isinstance(c.train.steps, int)
    assert c.model.dropout == 0.0 and isinstance(c.model.dropout, float)
    assert c.train.xla is True and c.data.dir == "/x"
    # a dict works the same from a notebook cell, and the original is untouched
    base = config.load("tiny", env={})
    c2 = base.with_overrides({"train.steps": 7})
    assert c2.train.steps == 7 and base.train.steps != 7


@pytest.mark.parametrize("item, words", [
    ("train.stepz=3", ["train.stepz", "section 'train' has", "steps"]),
    ("trian.steps=3", ["trian.steps", "no section 'trian'"]),
    ("steps=3", ["'steps'", "section.name"]),
    ("train.steps", ["section.key=value"]),
])
def test_unknown_keys_are_named(item, words):
    with pytest.raises(config.ConfigError) as e:
        config.load("tiny", [item], env={})
    for w in words:
        assert w in str(e.value)


@pytest.mark.parametrize("item, words", [
    ("train.steps=ten", ["train.steps", "integer", "'ten'"]),
    ("model.dropout=high", ["model.dropout", "number"]),
    ("train.xla=maybe", ["train.xla", "boolean"]),
])
def test_wrong_types_are_named(item, words):
    with pytest.raises(config.ConfigError) as e:
        config.load("tiny", [item], env={})
    for w in words:
        assert w in str(e.value)


def test_unknown_profile():
    with pytest.raises(config.ConfigError, match="unknown profile 'huge'.*tiny, wmt16-base"):
        config.load("huge", env={})


def test_json_round_trip_and_bad_files(tmp_path):
    c = config.load("wmt16-base", ["train.steps=5"], env={})
    path = c.save(tmp_path)
    assert path.name == "config.json" and not list(tmp_path.glob("*.tmp"))
    assert config.Config.load_json(tmp_path) == c
    d = json.loads(path.read_text())
    d["model"]["d_modle"] = 3
    path.write_text(json.dumps(d))
    with pytest.raises(config.ConfigError, match="d_modle"):
        config.Config.load_json(path)
    d["model"].pop("d_modle")
    d["train"]["steps"] = "many"
    path.write_text(json.dumps(d))
    with pytest.raises(config.ConfigError, match="train.steps"):
        config.Config.load_json(path)
    path.write_text('{"profile": "tiny",\n "data": {')
    with pytest.raises(config.ConfigError, match="line 2"):
        config.Config.load_json(path)


def test_table_lists_every_field():
    rows = dict(config.table(config.load("tiny", env={})))
    assert rows["train.steps"] == str(config.TrainConfig().steps)
    assert rows["data.source"] == "'synthetic'"
    assert len(rows) == 1 + sum(len(v) for v in config.Config().to_dict().values() if isinstance(v, dict))


def test_cli_reports_bad_override_in_one_line(capsys):
    rc = cli_main(["prepare", "--set", "train.stepz=3"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "config error" in err and "train.stepz" in err and "Traceback" not in err
