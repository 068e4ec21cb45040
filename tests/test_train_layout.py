"""The shape of nmtkit.training the issue asked for: a short train(), and the TF-free ground modules stay TF-free."""
import inspect
import subprocess
import sys

from nmtkit.errors import NmtkitError
from nmtkit.training import loop


def test_train_function_is_short():
    lines = inspect.getsource(loop.train).splitlines()
    assert len(lines) <= 80, f"train() is {len(lines)} lines; move a piece into a helper"


def test_runs_and_lr_do_not_import_tensorflow():
    code = ("import sys, nmtkit.runs, nmtkit.lr; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'tensorflow'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]", out


def test_train_names_are_importable_where_notebooks_look():
    from nmtkit.errors import TrainError
    from nmtkit.lr import transformer_lr  # noqa: F401
    from nmtkit.training.checkpoints import checkpoint_files, load_model  # noqa: F401
    assert issubclass(TrainError, NmtkitError)  # checkpoints raise the training wing's one class
