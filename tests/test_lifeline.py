"""No orphans: when the driver dies by SIGKILL, what it started exits (engine lifeline + reaper)."""
import os
import signal
import subprocess
import sys
import time

ENGINE = """
import signal, sys, time
from nmtkit.cluster.lifeline import hold
got = []
signal.signal(signal.SIGTERM, lambda *a: got.append(1))
hold(sys.argv[1], int(sys.argv[2]), grace=float(sys.argv[3]))
print("held", flush=True)
t0 = time.time()
while not got and time.time() - t0 < 60:
    time.sleep(0.05)
print("sigterm" if got else "timeout", flush=True)
time.sleep(60)  # like a rank stuck after the stop: the lifeline's grace ends it
"""

DRIVER = """
import subprocess, sys, time
from nmtkit.cluster.lifeline import Lifeline
line = Lifeline("127.0.0.1")
victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True,
                          stdout=subprocess.DEVNULL)
line.reap([victim.pid], grace=2)
print(line.port, victim.pid, flush=True)
time.sleep(120)
"""


def _dead(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(") ", 1)[1][:1] == "Z"


def test_driver_sigkill_ends_engine_and_reaps_local_processes():
    driver = subprocess.Popen([sys.executable, "-c", DRIVER], stdout=subprocess.PIPE, text=True)
    port, victim = map(int, driver.stdout.readline().split())
    engine = subprocess.Popen([sys.executable, "-c", ENGINE, "127.0.0.1", str(port), "3"], stdout=subprocess.PIPE,
                              text=True, start_new_session=True)
    assert engine.stdout.readline().strip() == "held"
    time.sleep(0.5)
    assert not _dead(victim)
    t0 = time.time()
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    assert engine.stdout.readline().strip() == "sigterm"  # the rank is asked to stop (and checkpoint) first
    assert engine.wait(timeout=20) == 1                     # then ends after its grace, whatever it was doing
    while not _dead(victim) and time.time() - t0 < 20:
        time.sleep(0.2)
    assert _dead(victim), "the reaper did not end the driver's local process"
    assert time.time() - t0 < 20


def test_clean_stop_disarms_the_reaper():
    code = ("import subprocess, sys, time\n"
            "from nmtkit.cluster.lifeline import Lifeline\n"
            "line = Lifeline('127.0.0.1')\n"
            "v = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'], start_new_session=True, "
            "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
            "line.reap([v.pid], grace=1)\n"
            "line.close()\n"
            "print(v.pid)\n")
    pid = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    time.sleep(2)
    try:
        assert not _dead(pid)  # a clean stop kills nothing by itself
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
