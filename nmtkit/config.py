"""The typed config tree, the named profiles and the `--set a.b=value` overrides. One `Config` describes a run end
to end, saved as `config.json` beside every run (analysis reads it without the training code). Each field declares
its rule (`rule(default, choices=..., ge=..., gt=..., lt=..., doc=...)`): the one source for `validate()`, for the
choices other modules offer (`choices(key)`) and for docs/config.md (`rules()`, `markdown()`)."""
from __future__ import annotations

import dataclasses
import json
import os
import typing
from dataclasses import dataclass, field
from pathlib import Path

from nmtkit.errors import ConfigError
from nmtkit.fieldrules import Rule, RuleRow, Settled, rule
from nmtkit.files import atomic_write_text, read_json
from nmtkit.lr import SCALINGS

PROFILE_ENV = "NMTKIT_PROFILE"
DEFAULT_PROFILE = "tiny"


@dataclass
class DataConfig(Settled):
    source: str = rule("synthetic", choices=("synthetic", "wmt16", "files"), doc="synthetic: the embedded grammar; "
                       "wmt16: the homework's corpus; files: your own parallel text (data.train_src ...)")
    dir: str = rule("data/tiny", doc="where prepared data lives (relative to the working directory)")
    train_size: int = rule(50_000, ge=1, doc="synthetic only: training sentence pairs")
    dev_size: int = rule(1_000, ge=1, doc="synthetic only: dev sentence pairs")
    test_size: int = rule(1_000, ge=1, doc="synthetic only: test sentence pairs")
    seed: int = rule(1234, doc="preparation's seed: the synthetic corpus, the BPE sample, the training-set order")
    vocab_size: int = rule(1_000, ge=8, doc="joint sentencepiece BPE vocabulary")
    bpe_sample: int = rule(100_000, ge=1, doc="sentences (both sides together) the BPE is learnt from")
    min_len: int = rule(1, ge=0, doc="cleaning: shortest sentence kept, in whitespace tokens (Moses clean-corpus-n)")
    max_len: int = rule(80, ge=1, doc="cleaning: longest sentence kept, in whitespace tokens; >= data.min_len")
    max_len_ratio: float = rule(3.0, ge=1, doc="cleaning: drop pairs whose token-count ratio exceeds this")
    max_tokens: int = rule(56, ge=1, doc="training examples longer than this many BPE tokens are dropped")
    base_url: str = rule("", doc="WMT16 mirror (URL or local folder); empty: the official URLs in nmtkit.data.wmt")
    batch_tokens: int = rule(0, ge=0, doc="> 0: token-based batching (OpenNMT-tf's batch_type=tokens): sentences x "
                                          "the bucket's longest length <= batch_tokens; 0: data.batch_sentences")
    batch_sentences: int = rule(64, ge=1, doc="sentences per batch per rank (OpenSeq2Seq's batch_size_per_gpu)")
    bucket_width: int = rule(8, ge=1, doc="length-bucket width in tokens (OpenNMT-tf's length_bucket_width); training "
                             "batches share both sides' buckets; under train.xla, padded to their bucket's length")
    train_src: str = rule("", doc="source=files: training source text, one sentence per line")
    train_tgt: str = rule("", doc="source=files: training target text, line i translates line i of train_src")
    dev_src: str = rule("", doc="source=files: dev source text")
    dev_tgt: str = rule("", doc="source=files: dev target text")
    test_src: str = rule("", doc="source=files: test source text; empty: dev is also the test set")
    test_tgt: str = rule("", doc="source=files: test target text")
    tokenized: str = rule("auto", choices=("auto", "yes", "no"),
                          doc="is the input Moses-tokenized (then detokenized)? auto: detect per file")
    src_lang: str = rule("en", doc="source language, for the Moses detokenizer")
    tgt_lang: str = rule("de", doc="target language, for the Moses detokenizer")


@dataclass
class ModelConfig(Settled):
    d_model: int = rule(128, ge=2, doc="width of every layer; even (sin/cos position pairs), a multiple of "
                                       "model.num_heads")
    encoder_layers: int = rule(1, ge=1, doc="encoder blocks")  # tiny: 1+1, 0.68x 2+2's time (bench/README.md)
    decoder_layers: int = rule(1, ge=1, doc="decoder blocks")
    num_heads: int = rule(4, ge=1, doc="attention heads; divides model.d_model")
    d_ff: int = rule(512, ge=1, doc="inner width of each feed-forward layer")
    dropout: float = rule(0.1, ge=0, lt=1, doc="dropout rate")
    label_smoothing: float = rule(0.1, ge=0, lt=1, doc="probability mass spread over the other tokens")
    max_positions: int = rule(256, ge=2, doc="longest sequence the sinusoidal position table covers")
    attention_bias: bool = rule(True, doc="biases on the q/k/v/output projections (OpenSeq2Seq's have none)")


@dataclass
class TrainConfig(Settled):
    steps: int = rule(300, ge=1, doc="optimizer steps")
    lr_scale: float = rule(2.0, gt=0, doc="lr = lr_scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)")
    warmup_steps: int = rule(100, ge=1, doc="steps of linear warm-up to the peak learning rate")
    lr_scaling: str = rule("none", choices=SCALINGS, doc="what N ranks do to the learning rate: none (the "
                                                         "homework's), x sqrt(N) or x N (linear)")
    beta1: float = rule(0.9, ge=0, lt=1, doc="Adam's first-moment decay")
    beta2: float = rule(0.997, ge=0, lt=1, doc="Adam's second-moment decay")
    epsilon: float = rule(1e-9, gt=0, doc="Adam's epsilon")
    precision: str = rule("auto", choices=("auto", "float32", "mixed_float16", "mixed_bfloat16"),
                          doc="auto: mixed_float16 on GPUs with tensor cores, mixed_bfloat16 on CPUs with "
                              "avx512_bf16/amx_bf16 while training/bf16_quality.json allows it and training/bf16_speed"
                              ".json measured it faster at the nearest shape on such a CPU, else float32")
    xla: bool = rule(False, doc="compile the step with XLA, one program per length bucket: one process on a GPU (no "
                                "Horovod: its ops have no XLA kernel); refused on a CPU (slower: bench/README.md)")
    grad_accum: int = rule(0, ge=0, doc="equal micro-batches the per-device batch is split into (rounded up: 3 x 86 "
                                        "for 256); 0: auto, the fewest that fit the GPU's memory (1 on a CPU)")
    compression: str = rule("none", choices=("none", "fp16"), doc="gradient allreduce on the wire: none (float32) "
                                                                  "or fp16 (Horovod's, half the bytes)")
    loss_scale_start: float = rule(2.0**15, gt=0, doc="mixed_float16: the dynamic loss scale's first value (Keras')")
    loss_scale_growth: int = rule(2000, ge=1, doc="mixed_float16: steps in a row without overflow before it doubles")
    seed: int = rule(42, doc="initial weights, dropout and the batch order")
    log_every: int = rule(20, ge=1, doc="steps between log lines")
    ckpt_every: int = rule(200, ge=0, doc="steps between checkpoints (0: only at the end)")
    keep_checkpoints: int = rule(3, ge=1, doc="newest checkpoints kept (the best is kept apart)")
    max_hours: float = rule(0.0, ge=0, doc="budget in hours of training, all sessions of the run (0: none)")
    max_cost: float = rule(0.0, ge=0, doc="budget in USD at monitor.price_per_node_hour x nodes (0: none)")


@dataclass
class EvalConfig(Settled):
    every: int = rule(75, ge=0, doc="dev BLEU every this many steps (0: only at the end)")
    beam_size: int = rule(4, ge=1, doc="beam search width (1: greedy)")
    length_penalty: float = rule(0.6, ge=0, doc="beam search's length penalty alpha (GNMT's)")
    max_extra_len: int = rule(10, ge=0, doc="decode at most source length + this many tokens")
    dev_sentences: int = rule(200, ge=0, doc="dev sentences for dev BLEU and the dev loss (first N, 0: all)")
    test_sentences: int = rule(0, ge=0, doc="test sentences translated for BLEU (0: all)")
    early_stopping: int = rule(0, ge=0, doc="stop after this many dev evaluations without improvement (0: off)")
    min_improvement: float = rule(0.0, ge=0, doc="dev BLEU points over the best that count as improvement")
    at_end: bool = rule(True, doc="the last step's dev and test evaluation (false: none, e.g. timing trials)")


@dataclass
class ClusterConfig(Settled):
    engines: int = rule(2, ge=1, doc="local engines (\"nodes\") when cluster.hosts is empty")
    hosts: str = rule("", doc="remote nodes and their slots, e.g. 10.0.0.5:2,10.0.0.6:2")
    iface: str = rule("", doc="NIC carrying Horovod traffic; empty: lo locally, else detected")
    listen: str = rule("", doc="address the controller and rendezvous listen on; empty: 127.0.0.1 for local "
                               "engines, else the local address that routes to the hosts")
    rendezvous_timeout: int = rule(60, ge=1, doc="seconds the ranks have to meet")
    start_timeout: int = rule(120, ge=1, doc="seconds to wait for engines")
    launcher: str = rule("auto", choices=("auto", "local", "ssh", "manual", "slurm"),
                         doc="how engines start: auto (local, or ssh when cluster.hosts is set), local processes, over "
                             "ssh, by hand (manual), or as a Slurm job (in your allocation when SLURM_JOB_ID is set)")
    logical_hosts: bool = rule(True, doc="local engines pose as nodes node0, node1, ... (one rank per \"node\")")
    cycle_time_ms: float = rule(0.0, ge=0, doc="Horovod's negotiation cycle (HOROVOD_CYCLE_TIME); 0: 10 on CPU "
                                               "ranks (Gloo), Horovod's own 1 on GPU ranks (NCCL)")
    slurm_partition: str = rule("", doc="launcher slurm: the partition (sbatch --partition); empty: the default")
    slurm_account: str = rule("", doc="launcher slurm: the account charged (sbatch --account); empty: yours")
    slurm_minutes: int = rule(0, ge=0, doc="launcher slurm: time limit, minutes (sbatch --time; 0: the partition's); "
                                           "runs stop at a checkpoint before it")
    slurm_gpus_per_node: int = rule(0, ge=0, doc="launcher slurm: GPUs per node, one engine each "
                                                 "(--gpus-per-task=1); 0: CPU tasks")
    slurm_sbatch: str = rule("", doc="launcher slurm: more #SBATCH options, ';' between, "
                                     "e.g. --qos=short;--constraint=a100")


@dataclass
class MonitorConfig(Settled):
    enabled: bool = rule(True, doc="sample CPU, memory, GPU and network on every rank")
    interval: float = rule(1.0, gt=0, doc="seconds between samples")
    link_gbps: float = rule(1.0, gt=0, doc="inter-node link capacity assumed when none was measured; a verdict "
                                           "that rests on it says so (measure the link: preflight does)")
    price_per_node_hour: float = rule(0.0, ge=0, doc="USD per node-hour of the VMs the run uses, for the cost "
                                      "projection (0: no price, no cost shown; local processes have none)")


@dataclass
class Config(Settled):
    profile: str = DEFAULT_PROFILE
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    monitor: MonitorConfig = field(default_factory=MonitorConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)

    def save(self, path: str | os.PathLike) -> Path:
        """Write config.json atomically (a crash never leaves half a file)."""
        path = Path(path)
        if path.is_dir() or path.suffix != ".json":
            path = path / "config.json"
        return atomic_write_text(path, self.to_json() + "\n")

    @classmethod
    def from_dict(cls, d: dict, where: str = "config") -> "Config":
        return _build(cls, d, where).validate()

    def validate(self) -> "Config":
        """Range-check every value (ConfigError naming the first bad key); returns self."""
        _validate(self)
        return self

    @classmethod
    def load_json(cls, path: str | os.PathLike) -> "Config":
        path = Path(path)
        if path.is_dir():
            path = path / "config.json"
        d = read_json(path, ConfigError, hint="a run directory holds the config.json written at its start")
        return cls.from_dict(d, where=str(path))

    def with_overrides(self, overrides: typing.Iterable[str] | dict | None) -> "Config":
        """A copy with `section.key=value` overrides applied (strings, as from `--set`, or a dict)."""
        cfg = _build(Config, self.to_dict(), "config")  # checked once, after the overrides
        items = overrides.items() if isinstance(overrides, dict) else (_split(o) for o in overrides or ())
        for key, value in items:
            _set(cfg, key, value)
        return cfg.validate()


def _split(item: str) -> tuple[str, str]:
    if "=" not in item:
        raise ConfigError(f"override {item!r}: expected section.key=value, e.g. train.steps=200")
    key, value = item.split("=", 1)
    return key.strip(), value.strip()


def _fields(obj) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(obj)}


def _set(cfg: Config, key: str, value) -> None:
    parts = key.split(".")
    if len(parts) != 2:
        raise ConfigError(f"unknown config key {key!r}: keys look like section.name, e.g. train.steps "
                          f"(sections: {', '.join(n for n in _fields(cfg) if n != 'profile')})")
    section, name = parts
    sections = _fields(cfg)
    if section not in sections or section == "profile":
        raise ConfigError(f"unknown config key {key!r}: no section {section!r} "
                          f"(sections: {', '.join(n for n in sections if n != 'profile')})")
    sub = getattr(cfg, section)
    fields = _fields(sub)
    if name not in fields:
        raise ConfigError(f"unknown config key {key!r}: section {section!r} has {', '.join(fields)}")
    setattr(sub, name, _coerce(key, _type_of(type(sub), name), value))


def _type_of(cls, name: str):
    return typing.get_type_hints(cls)[name]


_EXPECTED = {bool: "a boolean (true/false)", int: "an integer", float: "a number"}
_BOOLS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


def _coerce(key: str, typ, value):
    """Turn a value (a string from the command line, or JSON) into the field's type, or say why not."""
    if isinstance(value, str) and typ is not str:
        try:
            return _BOOLS[value.lower()] if typ is bool else typ(value.replace("_", ""))
        except (KeyError, ValueError):
            raise ConfigError(f"{key}: expected {_EXPECTED[typ]}, got {value!r}") from None
    if typ is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)  # JSON writes 1.0 as 1
    if isinstance(value, typ) and not (typ is int and isinstance(value, bool)):
        return value
    raise ConfigError(f"{key}: expected {typ.__name__}, got {value!r} ({type(value).__name__})")


REMOVED_KEYS = {"data.shuffle_buffer"}  # read by nothing; ignored in old config.json files


def _build(cls, d, where: str):
    if not isinstance(d, dict):
        raise ConfigError(f"{where}: expected an object, got {type(d).__name__}")
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for name, value in d.items():
        if any(f"{where}.{name}".endswith(k) for k in REMOVED_KEYS):
            continue  # a run's config.json from before the key was removed still loads (and resumes)
        if name not in hints:
            raise ConfigError(f"{where}: unknown config key {name!r} (known: {', '.join(hints)})")
        typ = hints[name]
        if dataclasses.is_dataclass(typ):
            kwargs[name] = _build(typ, value, f"{where}.{name}" if where != "config" else name)
        else:
            key = f"{where}.{name}" if where != "config" else name
            kwargs[name] = _coerce(key, typ, value)
    return cls(**kwargs)


# --- rules ---------------------------------------------------------------------------------------

def _leaves() -> typing.Iterator[tuple[str, type, dataclasses.Field]]:
    """(section.name, type, field) of every value in a Config, in declaration order."""
    for section, cls in typing.get_type_hints(Config).items():
        if dataclasses.is_dataclass(cls):
            types = typing.get_type_hints(cls)
            yield from ((f"{section}.{f.name}", types[f.name], f) for f in dataclasses.fields(cls))


def _validate(cfg: Config) -> None:
    def get(key):
        section, name = key.split(".")
        return getattr(getattr(cfg, section), name)

    def bad(key, rule):
        raise ConfigError(f"{key}={get(key)!r}: {rule}; set another value (--set {key}=... or cfg.{key} = ...)")

    for key, _, f in _leaves():
        problem = f.metadata.get("rule", Rule()).problem(get(key))
        if problem:
            bad(key, problem)
    m = cfg.model  # the rules between fields
    if m.d_model % 2:
        bad("model.d_model", "must be even (the sinusoidal position table pairs sin and cos)")
    if m.d_model % m.num_heads:
        bad("model.num_heads", f"must divide model.d_model={m.d_model} (each head gets d_model / num_heads "
                               f"dimensions), e.g. {', '.join(str(h) for h in (1, 2, 4, 8, 16) if m.d_model % h == 0)}")
    if cfg.data.max_len < cfg.data.min_len:
        bad("data.max_len", f"must be >= data.min_len={cfg.data.min_len}")
    for opt in (o.strip() for o in cfg.cluster.slurm_sbatch.split(";") if o.strip()):
        if not opt.startswith("-") or "\n" in opt:
            bad("cluster.slurm_sbatch", f"{opt!r} is no sbatch option: write it as on sbatch's command line "
                                        "(--qos=short)")


def rules() -> list[RuleRow]:
    """Every config value with its type, default, rule and meaning: what docs/config.md is made of."""
    return [RuleRow(key, typ.__name__, f.default, f.metadata["rule"].text(), f.metadata["doc"])
            for key, typ, f in _leaves()]


def choices(key: str) -> tuple:
    """The allowed values of a key that has choices, e.g. choices("cluster.launcher") for the CLI's --launcher."""
    found = {k: f.metadata["rule"].choices for k, _, f in _leaves() if f.metadata["rule"].choices}
    if key not in found:
        raise ConfigError(f"{key!r} has no choices (keys with choices: {', '.join(found)})")
    return found[key]


# --- profiles ------------------------------------------------------------------------------------

def _tiny() -> Config:
    """CPU practice: the embedded synthetic corpus and a small Transformer; the whole course in minutes."""
    # lr_scale 0.5 (peak lr 4.4e-3 at d_model 128, warmup 100): the homework's 2.0 stalls this small model; 300
    # steps, 4 evaluations (the defaults) reach dev BLEU ~65, every verdict as at 400 steps (bench/README.md)
    return Config(profile="tiny", train=TrainConfig(lr_scale=0.5))


def _wmt16_base() -> Config:
    """The homework: OpenSeq2Seq's transformer-base on WMT16 en-de, 2 nodes x 2 GPUs."""
    return Config(
        profile="wmt16-base",
        data=DataConfig(source="wmt16", dir="data/wmt16", vocab_size=32_768, bpe_sample=2_000_000,
                        min_len=1, max_len=80, max_len_ratio=9.0, max_tokens=56,
                        batch_sentences=256, batch_tokens=0, bucket_width=8),
        model=ModelConfig(d_model=512, encoder_layers=6, decoder_layers=6, num_heads=8, d_ff=2048,
                          dropout=0.1, label_smoothing=0.1, max_positions=256, attention_bias=False),
        train=TrainConfig(steps=300_000, lr_scale=2.0, warmup_steps=8_000, lr_scaling="none",
                          beta1=0.9, beta2=0.997, epsilon=1e-9, precision="auto",
                          log_every=100, ckpt_every=4_000, keep_checkpoints=5),
        eval=EvalConfig(every=4_000, beam_size=4, length_penalty=0.6, max_extra_len=50,
                        dev_sentences=0, test_sentences=0),
        cluster=ClusterConfig(engines=2, hosts="", iface="", logical_hosts=False),
        monitor=MonitorConfig(link_gbps=1.0),
    )


PROFILES: dict[str, typing.Callable[[], Config]] = {"tiny": _tiny, "wmt16-base": _wmt16_base}


def profile(name: str) -> Config:
    """A fresh Config of the profile `name` (one of PROFILES). Introduced in notebook 02_single_gpu_baseline."""
    try:
        return PROFILES[name]()
    except KeyError:
        raise ConfigError(f"unknown profile {name!r}: choose one of {', '.join(PROFILES)}") from None


def load(profile_name: str | None = None, overrides: typing.Iterable[str] | dict | None = None,
         env: typing.Mapping[str, str] | None = None) -> Config:
    """The config a command or notebook runs with: --profile, else $NMTKIT_PROFILE, else tiny; then overrides."""
    env = os.environ if env is None else env
    name = profile_name or env.get(PROFILE_ENV) or DEFAULT_PROFILE
    return profile(name).with_overrides(overrides)


def table(cfg: Config) -> list[tuple[str, str]]:
    """(key, value) rows for display; deterministic order."""
    rows = []
    for section, value in cfg.to_dict().items():
        if isinstance(value, dict):
            rows.extend((f"{section}.{k}", repr(v) if isinstance(v, str) else str(v)) for k, v in value.items())
        else:
            rows.append((section, str(value)))
    return rows


def markdown() -> str:
    """docs/config.md: every key's type, each profile's value, rule and meaning, from rules()."""
    profiles = {name: make().to_dict() for name, make in PROFILES.items()}
    out = ["# Config reference", "",
           "Generated from the rules declared at each field of `nmtkit/config.py` (`python -m nmtkit.config > "
           "docs/config.md`; a test fails when this file is stale). Set a value with `--set section.key=value` "
           "or, in a notebook, `cfg.section.key = value`. `Config.validate()` checks every value against its "
           "*allowed* column, model.d_model against model.num_heads and data.max_len against data.min_len. "
           f"The columns {', '.join(f'`{p}`' for p in profiles)} are the profiles' values (`--profile`)."]
    section = None
    for r in rules():
        sec, name = r.key.split(".")
        if sec != section:
            section = sec
            out += ["", f"## {sec}", "", f"| key | type | {' | '.join(profiles)} | allowed | meaning |",
                    "|---" * (len(profiles) + 4) + "|"]
        values = " | ".join(f"`{json.dumps(p[sec][name])}`" for p in profiles.values())
        doc = r.doc.replace("|", "&#124;").replace("*", r"\*")  # literal, not table cells or emphasis
        out.append(f"| `{r.key}` | {r.type} | {values} | {r.rule} | {doc} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
