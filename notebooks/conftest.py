"""nbval settings the grader needs that nbval has no option for.

nbval waits a hard-coded 5 s for each iopub message after a cell's reply (nbval issues #136, #231). On a busy
2-core grading machine a long training cell's last messages can take longer, and the cell fails with
"Timeout of 5 seconds exceeded waiting for output" although it ran. 120 s per message keeps a hung kernel
failing, only later.
"""
import nbval.plugin

OUTPUT_TIMEOUT_S = 120
_init = nbval.plugin.IPyNbCell.__init__


def _patient_init(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    self.output_timeout = OUTPUT_TIMEOUT_S


nbval.plugin.IPyNbCell.__init__ = _patient_init
