"""The typed config tree: profiles, overrides, bad keys and types, round trip through config.json."""
import json
import re
from pathlib import Path

import pytest

from nmtkit import config
from nmtkit.cli import main as cli_main
from nmtkit.errors import ConfigError, NmtkitError
from nmtkit.lr import SCALINGS


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
    with pytest.raises(ConfigError) as e:
        config.load("tiny", [item], env={})
    for w in words:
        assert w in str(e.value)


@pytest.mark.parametrize("item, words", [
    ("train.steps=ten", ["train.steps", "integer", "'ten'"]),
    ("model.dropout=high", ["model.dropout", "number"]),
    ("train.xla=maybe", ["train.xla", "boolean"]),
])
def test_wrong_types_are_named(item, words):
    with pytest.raises(ConfigError) as e:
        config.load("tiny", [item], env={})
    for w in words:
        assert w in str(e.value)


def test_unknown_profile():
    with pytest.raises(ConfigError, match="unknown profile 'huge'.*tiny, wmt16-base"):
        config.load("huge", env={})


def test_json_round_trip_and_bad_files(tmp_path):
    c = config.load("wmt16-base", ["train.steps=5"], env={})
    path = c.save(tmp_path)
    assert path.name == "config.json" and not list(tmp_path.glob("*.tmp"))
    assert config.Config.load_json(tmp_path) == c
    d = json.loads(path.read_text())
    d["model"]["d_modle"] = 3
    path.write_text(json.dumps(d))
    with pytest.raises(ConfigError, match="d_modle"):
        config.Config.load_json(path)
    d["model"].pop("d_modle")
    d["train"]["steps"] = "many"
    path.write_text(json.dumps(d))
    with pytest.raises(ConfigError, match="train.steps"):
        config.Config.load_json(path)
    path.write_text('{"profile": "tiny",\n "data": {')
    with pytest.raises(ConfigError, match="line 2"):
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


@pytest.mark.parametrize("item, words", [
    ("train.steps=-5", ["train.steps=-5", "must be >= 1"]),
    ("train.log_every=0", ["train.log_every=0", "must be >= 1"]),
    ("model.num_heads=3", ["model.num_heads=3", "must divide model.d_model=128", "e.g. 1, 2, 4, 8, 16"]),
    ("model.d_model=130", ["model.num_heads=4", "must divide model.d_model=130"]),
    ("model.d_model=127", ["model.d_model=127", "even"]),
    ("model.dropout=1", ["model.dropout=1.0", "[0, 1)"]),
    ("train.ckpt_every=-1", ["train.ckpt_every=-1", ">= 0"]),
    ("eval.every=-1", ["eval.every=-1", ">= 0"]),
    ("eval.beam_size=0", ["eval.beam_size=0", ">= 1"]),
    ("data.batch_sentences=0", ["data.batch_sentences=0", ">= 1"]),
    ("train.warmup_steps=0", ["train.warmup_steps=0", ">= 1"]),
    ("train.keep_checkpoints=0", ["train.keep_checkpoints=0", ">= 1"]),
    ("train.lr_scaling=cubic", ["train.lr_scaling='cubic'", "none, sqrt, linear"]),
    ("train.precision=fp8", ["train.precision='fp8'", "auto, float32, mixed_float16"]),
    ("cluster.launcher=pbs", ["cluster.launcher='pbs'", "auto, local, ssh, manual, slurm"]),
    ("cluster.slurm_minutes=-1", ["cluster.slurm_minutes=-1", ">= 0"]),
    ("data.source=europarl", ["data.source='europarl'", "synthetic, wmt16"]),
    ("train.lr_scale=0", ["train.lr_scale=0.0", "> 0"]),
])
def test_out_of_range_values_are_one_line_naming_the_key(item, words):
    with pytest.raises(ConfigError) as e:
        config.load("tiny", [item], env={})
    msg = str(e.value)
    assert "\n" not in msg and f"--set {words[0].split('=')[0]}=" in msg  # which key, and how to set it
    for w in words:
        assert w in msg


def test_ranges_are_checked_on_every_path_in(tmp_path):
    good = config.load("tiny", ["model.num_heads=8", "train.ckpt_every=0", "eval.every=0"], env={})
    assert good.model.num_heads == 8  # 128 / 8: fine, and 0 means "only at the end" where documented
    d = good.to_dict()
    d["train"]["log_every"] = 0
    with pytest.raises(ConfigError, match=r"^train.log_every=0: must be >= 1"):
        config.Config.from_dict(d)
    (tmp_path / "config.json").write_text(json.dumps(d))
    with pytest.raises(ConfigError, match="train.log_every=0"):
        config.Config.load_json(tmp_path)
    good.train.steps = -5  # set by hand in a notebook: validate() is what train() calls
    with pytest.raises(ConfigError, match="train.steps=-5"):
        good.validate()
    # a bad value fixed later in the same override list is fine: the check runs once, at the end
    assert config.load("tiny", ["train.steps=-1", "train.steps=3"], env={}).train.steps == 3


def test_every_value_declares_its_meaning_and_the_rule_at_its_field_is_what_validate_checks():
    rows = config.rules()
    assert [r.key for r in rows] == [k for k, _ in config.table(config.Config()) if k != "profile"]
    assert all(r.doc for r in rows), [r.key for r in rows if not r.doc]
    for r in rows:  # one step outside each declared rule fails, naming the key and the rule's words
        if r.rule.startswith("one of"):
            bad = "nope"
        elif r.rule.startswith(">= "):
            bad = float(r.rule[3:]) - 1 if r.type == "float" else int(r.rule[3:]) - 1
        elif r.rule.startswith("> ") or r.rule.startswith("in ["):
            bad = -1 if r.type == "int" else -1.0
        else:
            assert r.rule == "", r
            continue
        with pytest.raises(ConfigError, match=rf"^{r.key}=.*: (must be|choose) {re.escape(r.rule)}; set"):
            config.load("tiny", {r.key: bad}, env={})
    assert config.load("tiny", {"train.lr_scale": 1e-9, "model.dropout": 0.0}, env={}).model.dropout == 0.0


def test_choices_are_read_from_the_fields():
    assert config.choices("cluster.launcher") == ("auto", "local", "ssh", "manual", "slurm")
    assert config.choices("train.compression") == ("none", "fp16")
    assert config.choices("train.lr_scaling") == SCALINGS  # the LR formula's own list, declared at the field
    with pytest.raises(ConfigError, match="'train.steps' has no choices.*cluster.launcher"):
        config.choices("train.steps")


def test_a_wrong_type_set_by_hand_is_a_config_error():
    cfg = config.load("tiny", env={})
    cfg.train.steps = "5"
    with pytest.raises(ConfigError, match=r"^train.steps='5': must be a number >= 1"):
        cfg.validate()
    assert issubclass(ConfigError, NmtkitError) and issubclass(ConfigError, ValueError)


def test_docs_config_md_is_what_the_rules_render():
    doc = Path(__file__).resolve().parents[1] / "docs" / "config.md"
    assert doc.read_text() == config.markdown(), "stale: python -m nmtkit.config > docs/config.md"
    row = "| `cluster.launcher` | str | `\"auto\"` | `\"auto\"` | one of auto, local, ssh, manual, slurm |"
    assert row in doc.read_text()
