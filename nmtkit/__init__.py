"""nmtkit: a Jupyter course kit for distributed Transformer training (WMT16 en->de) with Horovod.

Students reach the kit through one name, `import nmtkit as nk`:

    set-up       nk.setup(run_name=...) -> (cfg, run), nk.workspace(), nk.profile(name), nk.config_table(cfg, ...)
    data         nk.prepare(cfg), nk.read_split(dir, split), nk.Tokenizer, nk.make_dataset(dir, split, cfg.data)
    model        nk.build_model(cfg.model, vocab), nk.count_params(model | cfg.model, vocab),
                 nk.transformer_lr(step, d_model, ...)
    training     nk.train(cfg, run) -> summary, nk.restore(run) -> Restored(model, tokenizer, config, checkpoint),
                 nk.checkpoint_files(run), nk.Translator(model, tokenizer, beam_size=...)
    many nodes   nk.Cluster(cfg).start() (.preflight, .check_ranks, .launch -> Job, .stop), nk.panel(job),
                 nk.attach(run), nk.assign_slots(nodes), nk.rank_env(slot, ...), nk.compression_trials(...)
    analysis     nk.analyse(["baseline", "horovod"]) -> Analysis (.figure, .evidence, .comparison, .run, .write;
                 .verdict for instructors), nk.check(rep, "qN", **figures), nk.check_plan(plan)
    bottleneck   nk.lab_runs() (one row per run: the shipped lab runs, or yours), nk.link_samples(run[, iface=])
                 (a link's samples; notebook 04)
    ablation     nk.warmup_runs(): the two shipped runs that differ only in their warm-up (notebook 05, question 6)
    variant      nk.variant([student_id=]): which shipped runs this student's graded figures come from (04, 05)
    exercises    nk.check_file_size (01), nk.check_schedule (02), nk.check_link_share (03),
                 nk.check_sample_ceiling (04), nk.check_batching (06)
    prose        nk.wmt16_facts(), nk.measured_link(), nk.homework_exchange(), nk.draw_ring(trials): the figures
                 the notebooks' text states, computed; nk.link_table(trials, gbps) (the instructor's kit)
    summaries    nk.lab_summary(lab) (04), nk.monitoring_summary(run, ref, ...) (05): the closing bullets;
                 nk.memory_readings(device_mib) (05): a GPU's projected memory against its card's
    serving      nk.export(run) -> path, nk.load_export(path), nk.translate_in_fresh_process(path, sentences),
                 nk.latency(fn, sentences), nk.translation_box(fn)
    errors       nk.NmtkitError: the root of every error the kit raises on purpose

Names load on first use, so `import nmtkit` stays light (no TensorFlow until a name needs it). Importing nmtkit
selects the Keras 2 API (tf-keras) for this process: Horovod 0.28.1 fails under Keras 3, and TensorFlow reads
TF_USE_LEGACY_KERAS when tf.keras is first touched.
"""
import importlib
import os
import shutil

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
# One process must not take every GPU's memory (notebook 02's kernel would starve notebook 03's engines).
os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
# Quiet TensorFlow's C++ start-up banner on CPU machines unless the user asked for it. Not where a GPU driver is
# installed: there its warnings ("Cannot dlopen some GPU libraries") are the clue to a broken CUDA set-up.
if shutil.which("nvidia-smi") is None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

__version__ = "0.1.0"

# name -> (module, attribute): the student namespace (see the docstring for what each is for)
_FRONT = {
    "setup": ("nmtkit.notebook", "setup"), "workspace": ("nmtkit.runs", "workspace"),
    "profile": ("nmtkit.config", "profile"), "config_table": ("nmtkit.notebook", "config_table"),
    "prepare": ("nmtkit.data.prepare", "prepare"), "read_split": ("nmtkit.data.pipeline", "read_split"),
    "Tokenizer": ("nmtkit.data.bpe", "Tokenizer"), "make_dataset": ("nmtkit.data.pipeline", "make_dataset"),
    "build_model": ("nmtkit.model.transformer", "build"), "count_params": ("nmtkit.model.size", "count_params"),
    "transformer_lr": ("nmtkit.lr", "transformer_lr"),
    "train": ("nmtkit.notebook", "train"), "restore": ("nmtkit.training.checkpoints", "load_model"),
    "checkpoint_files": ("nmtkit.training.checkpoints", "checkpoint_files"),
    "Translator": ("nmtkit.model.decode", "Translator"),
    "Cluster": ("nmtkit.cluster.engines", "Cluster"), "panel": ("nmtkit.notebook", "panel"),
    "attach": ("nmtkit.notebook", "attach"), "assign_slots": ("nmtkit.cluster.plan", "assign_slots"),
    "rank_env": ("nmtkit.cluster.plan", "rank_env"),
    "compression_trials": ("nmtkit.cluster.link", "compression_trials"),
    "analyse": ("nmtkit.notebook", "analyse"), "check": ("nmtkit.course.exercises", "check"),
    "check_plan": ("nmtkit.course.exercises", "check_plan"),
    "lab_runs": ("nmtkit.analysis.lab", "lab_runs"), "link_samples": ("nmtkit.analysis.lab", "link_samples"),
    "warmup_runs": ("nmtkit.analysis.ablation", "warmup_runs"), "variant": ("nmtkit.course.variant", "variant"),
    "align_steps_to_network": ("nmtkit.analysis.machines", "align_steps_to_network"),
    "export": ("nmtkit.serving", "export"), "load_export": ("nmtkit.serving", "load"),
    "translate_in_fresh_process": ("nmtkit.serving", "translate_in_fresh_process"),
    "latency": ("nmtkit.serving", "latency"), "translation_box": ("nmtkit.notebook", "translation_box"),
    "NmtkitError": ("nmtkit.errors", "NmtkitError"),
    # notebooks 01, 02, 03, 05: their exercises' checks, and the figures their prose quotes, computed
    "check_file_size": ("nmtkit.course.practice", "check_file_size"),
    "check_schedule": ("nmtkit.course.practice", "check_schedule"),
    "check_link_share": ("nmtkit.course.practice", "check_link_share"),
    "check_batching": ("nmtkit.course.practice", "check_batching"),
    "check_sample_ceiling": ("nmtkit.course.practice", "check_sample_ceiling"),
    "wmt16_facts": ("nmtkit.course.prose", "wmt16_facts"), "link_table": ("nmtkit.course.prose", "link_table"),
    "measured_link": ("nmtkit.course.prose", "measured_link"),
    "homework_exchange": ("nmtkit.course.prose", "homework_exchange"),
    "draw_ring": ("nmtkit.course.prose", "draw_ring"),
    # notebooks 04, 05: their closing summaries, worded from the figures the notebook computed
    "lab_summary": ("nmtkit.course.summaries", "lab_summary"),
    "monitoring_summary": ("nmtkit.course.summaries", "monitoring_summary"),
    "memory_readings": ("nmtkit.course.summaries", "memory_readings"),
}
__all__ = sorted(_FRONT)
# Each name's docstring, in its source, says which notebook introduces it (as d2l's "Defined in");
# tests/test_front_door.py checks it against the notebooks' first use.


def __getattr__(name: str):
    if name in _FRONT:
        module, attr = _FRONT[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value  # the next lookup is a plain attribute
        return value
    raise AttributeError(f"module 'nmtkit' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_FRONT))
