"""The kit's errors: the root `NmtkitError` and one class per wing.

An `NmtkitError`'s message is the whole story for a user (which file, line or key, and what to do), so the CLI
prints it as one line; anything else escaping the kit is a bug and is reported as one, with the log path.
A wing raises its own class; a caller that must tell two causes apart reads the message's subject, not a class
of its own (OpenNMT-tf gets by with a few plain errors that carry advice).
"""


class NmtkitError(Exception):
    """An error the kit raised on purpose; its message names the file, line or key and what to do.

    Used by no notebook's cells (the kit's own and the CLI's)."""


class StackError(NmtkitError, RuntimeError):
    """The installed stack or the devices: TensorFlow, Keras 2, Horovod, GPUs, threads set too late."""


class ConfigError(NmtkitError, ValueError):
    """A config key, profile, `--set` override or CLI option that cannot be used; names the key and the fix."""


class DataError(NmtkitError, ValueError):
    """A corpus, data directory or download: names the file (and line) and what to do."""


class RunDirError(NmtkitError, RuntimeError):
    """A run directory: its files, its lock, its state; names the directory and what to do."""


class TrainError(NmtkitError, RuntimeError):
    """Training, checkpoints, evaluation and the monitor: names the run or checkpoint and what to do."""


class ClusterError(NmtkitError, RuntimeError):
    """Engines, hosts, preflight, rendezvous and jobs: names the host or engine and what to do."""


class RankFailedError(ClusterError):
    """A rank died or raised during a distributed job; the message names its rank, host and engine."""


class AnalysisError(NmtkitError, ValueError):
    """Reading runs' files into measurements: names the file or the figure the logs cannot give."""


class CourseError(NmtkitError, ValueError):
    """The course wing: notebooks run headless, student copies, releases, grading."""


class ExerciseError(CourseError, AssertionError):
    """A wrong exercise answer; the message says which figure and what idea to revisit."""


class ExportError(NmtkitError):
    """A SavedModel export or its load; names the path and what to do."""
