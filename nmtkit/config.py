"""The typed config tree, the named profiles and the `--set a.b=value` overrides.

One `Config` describes a run end to end; it is saved as `config.json` beside every run so that
analysis can read what was asked for without importing the training code.
"""
from __future__ import annotations

import dataclasses
import json
import os
import typing
from dataclasses import dataclass, field
from pathlib import Path

from nmtkit.files import atomic_write_text, read_json
from nmtkit.lr import SCALINGS

PROFILE_ENV = "NMTKIT_PROFILE"
DEFAULT_PROFILE = "tiny"


class ConfigError(ValueError):
    """A bad key, value or profile; the message names it."""


@dataclass
class DataConfig:
    source: str = "synthetic"          # "synthetic" (embedded grammar), "wmt16" (the homework's corpus) or
                                       # "files" (your own parallel text: data.train_src ... below)
    dir: str = "data/tiny"             # where prepared data lives (relative to the working directory)
    train_size: int = 50_000           # synthetic only: sentence pairs
    dev_size: int = 1_000
    test_size: int = 1_000
    seed: int = 1234
    vocab_size: int = 1_000            # joint sentencepiece BPE vocabulary
    bpe_sample: int = 100_000          # sentences (both sides together) used to learn the BPE
    min_len: int = 1                   # cleaning, in whitespace tokens (Moses clean-corpus-n)
    max_len: int = 80
    max_len_ratio: float = 3.0         # drop pairs whose token-count ratio exceeds this
    max_tokens: int = 56               # training examples longer than this (in BPE tokens) are dropped
    base_url: str = ""                 # WMT16 mirror; empty = the official URLs in nmtkit.data.wmt
    batch_tokens: int = 0              # >0: token-based batching, counted as OpenNMT-tf's batch_type=tokens:
                                       # sentences x the bucket's longest length (the longer side of an example,
                                       # as the model sees it) <= batch_tokens; with bucket_width=1 a batch of
                                       # length-L pairs holds batch_tokens // L of them
    batch_sentences: int = 64          # per rank, like OpenSeq2Seq's batch_size_per_gpu
    bucket_width: int = 8              # length-bucket width in tokens (OpenNMT-tf's length_bucket_width); with
                                       # train.xla batches are padded to their bucket's length (bounded shapes)
    # your own corpus (source="files"): one sentence per line, line i of *_src translates to line i of *_tgt
    train_src: str = ""
    train_tgt: str = ""
    dev_src: str = ""
    dev_tgt: str = ""
    test_src: str = ""                 # optional: without a test split, dev is also the test set
    test_tgt: str = ""
    tokenized: str = "auto"            # Moses-tokenized input: "auto" (detect per file), "yes" or "no"
    src_lang: str = "en"               # languages of the two sides, for the Moses detokenizer
    tgt_lang: str = "de"


@dataclass
class ModelConfig:
    d_model: int = 128
    encoder_layers: int = 2
    decoder_layers: int = 2
    num_heads: int = 4
    d_ff: int = 512
    dropout: float = 0.1
    label_smoothing: float = 0.1
    max_positions: int = 256           # longest sequence the sinusoidal table covers
    attention_bias: bool = True        # biases on the q/k/v/output projections (OpenSeq2Seq's have none)


@dataclass
class TrainConfig:
    steps: int = 600
    lr_scale: float = 2.0              # lr = lr_scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
    warmup_steps: int = 200
    lr_scaling: str = "none"           # multi-rank rule: "none" (the homework's), "sqrt" or "linear" in ranks
    beta1: float = 0.9
    beta2: float = 0.997
    epsilon: float = 1e-9
    precision: str = "auto"            # "auto" (mixed_float16 on GPU, float32 on CPU), "float32", "mixed_float16",
                                       # "mixed_bfloat16" (CPUs with AVX512_BF16/AMX; measured slower here, see
                                       # bench/throughput.py --variant)
    xla: bool = False                  # compile the step with XLA (one process only: Horovod's ops have no XLA
                                       # kernel on CPU; batches then padded to their length bucket, so XLA
                                       # compiles one program per bucket); off: not faster here (bench/throughput.py)
    grad_accum: int = 1                # micro-batches per optimizer step
    compression: str = "none"          # gradient allreduce on the wire: "none" (fp32) or "fp16" (Horovod's)
    seed: int = 42
    log_every: int = 20
    ckpt_every: int = 200
    keep_checkpoints: int = 3


@dataclass
class EvalConfig:
    every: int = 100                   # dev BLEU every this many steps (0 = only at the end)
    beam_size: int = 4
    length_penalty: float = 0.6
    max_extra_len: int = 10            # decode at most source length + this many tokens
    dev_sentences: int = 200           # 0 = the whole dev set
    test_sentences: int = 0            # 0 = the whole test set


@dataclass
class ClusterConfig:
    engines: int = 2                   # local engines ("nodes") when hosts is empty
    hosts: str = ""                    # e.g. "10.0.0.5:2,10.0.0.6:2": remote nodes, SSH-launched
    iface: str = ""                    # NIC carrying Horovod traffic; empty = lo locally, else detected
    listen: str = ""                   # address the controller and rendezvous listen on; empty = 127.0.0.1 for
                                       # local engines, else the local address that routes to the hosts
    rendezvous_timeout: int = 60       # seconds
    start_timeout: int = 120           # seconds to wait for engines
    launcher: str = "auto"             # "auto" (local, or SSH when hosts is set), "local", "ssh", "manual" (by hand)
    logical_hosts: bool = True         # local engines pose as nodes node0, node1, ... (one rank per "node")
    cycle_time_ms: float = 0.0         # Horovod's negotiation cycle (HOROVOD_CYCLE_TIME); 0 = auto: 10 on CPU
                                       # ranks (Gloo), Horovod's own 1 on GPU ranks (NCCL)


@dataclass
class MonitorConfig:
    enabled: bool = True
    interval: float = 1.0              # seconds between samples
    link_gbps: float = 1.0             # inter-node link capacity (the homework's VMs: 1 Gbit/s)
    price_per_node_hour: float = 3.06  # USD; a V100 cloud VM, for the cost projection


@dataclass
class Config:
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
        items = (overrides.items() if isinstance(overrides, dict) else (_split(o) for o in overrides)) if overrides else ()
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


def _coerce(key: str, typ, value):
    """Turn a value (a string from the command line, or JSON) into the field's type, or say why not."""
    if isinstance(value, str):
        text = value
        if typ is bool:
            low = text.lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise ConfigError(f"{key}: expected a boolean (true/false), got {text!r}")
        if typ is int:
            try:
                return int(text.replace("_", ""))
            except ValueError:
                raise ConfigError(f"{key}: expected an integer, got {text!r}") from None
        if typ is float:
            try:
                return float(text)
            except ValueError:
                raise ConfigError(f"{key}: expected a number, got {text!r}") from None
        if typ is str:
            return text
    # JSON values
    if typ is bool and isinstance(value, bool):
        return value
    if typ is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if typ is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if typ is str and isinstance(value, str):
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


# --- ranges ------------------------------------------------------------------------------------

CHOICES = {"data.source": ("synthetic", "wmt16", "files"), "data.tokenized": ("auto", "yes", "no"),
           "train.lr_scaling": SCALINGS,
           "train.precision": ("auto", "float32", "mixed_float16", "mixed_bfloat16"), "train.compression": ("none", "fp16"),
           "cluster.launcher": ("auto", "local", "ssh", "manual")}
AT_LEAST = {  # key -> smallest allowed value (what 0 means, where it is allowed, is in the field's comment)
    "data.train_size": 1, "data.dev_size": 1, "data.test_size": 1, "data.vocab_size": 8, "data.bpe_sample": 1,
    "data.min_len": 0, "data.max_len": 1, "data.max_len_ratio": 1, "data.max_tokens": 1, "data.batch_tokens": 0,
    "data.batch_sentences": 1, "data.bucket_width": 1,
    "model.d_model": 2, "model.encoder_layers": 1, "model.decoder_layers": 1, "model.num_heads": 1,
    "model.d_ff": 1, "model.max_positions": 2,
    "train.steps": 1, "train.warmup_steps": 1, "train.grad_accum": 1, "train.log_every": 1, "train.ckpt_every": 0,
    "train.keep_checkpoints": 1,
    "eval.every": 0, "eval.beam_size": 1, "eval.length_penalty": 0, "eval.max_extra_len": 0,
    "eval.dev_sentences": 0, "eval.test_sentences": 0,
    "cluster.engines": 1, "cluster.rendezvous_timeout": 1, "cluster.start_timeout": 1,
    "monitor.price_per_node_hour": 0}
UNIT_INTERVAL = ("model.dropout", "model.label_smoothing", "train.beta1", "train.beta2")  # in [0, 1)
POSITIVE = ("train.lr_scale", "train.epsilon", "monitor.interval", "monitor.link_gbps")  # > 0


def _validate(cfg: Config) -> None:
    def get(key):
        section, name = key.split(".")
        return getattr(getattr(cfg, section), name)

    def bad(key, rule):
        raise ConfigError(f"{key}={get(key)!r}: {rule}; set another value (--set {key}=... or cfg.{key} = ...)")

    for key, choices in CHOICES.items():
        if get(key) not in choices:
            bad(key, f"choose one of {', '.join(choices)}")
    for key, low in AT_LEAST.items():
        if get(key) < low:
            bad(key, f"must be >= {low}")
    for key in UNIT_INTERVAL:
        if not 0 <= get(key) < 1:
            bad(key, "must be in [0, 1)")
    for key in POSITIVE:
        if not get(key) > 0:
            bad(key, "must be > 0")
    m = cfg.model
    if m.d_model % 2:
        bad("model.d_model", "must be even (the sinusoidal position table pairs sin and cos)")
    if m.d_model % m.num_heads:
        bad("model.num_heads", f"must divide model.d_model={m.d_model} (each head gets d_model / num_heads "
                               f"dimensions), e.g. {', '.join(str(h) for h in (1, 2, 4, 8, 16) if m.d_model % h == 0)}")
    if cfg.data.max_len < cfg.data.min_len:
        bad("data.max_len", f"must be >= data.min_len={cfg.data.min_len}")


# --- profiles ------------------------------------------------------------------------------------

def _tiny() -> Config:
    """CPU practice: the embedded synthetic corpus and a small Transformer; the whole course in minutes."""
    # lr_scale 0.5: the homework's 2.0 peaks at 1.3e-2 for d_model=128/warmup=200 and stalls at loss ~3;
    # 0.5 (peak 3.1e-3) reaches dev BLEU ~89 at 500 steps, ~97 at 1000 (bench/quality.py runs the long schedule)
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
