"""What the rehearsal runs inside a host (a network namespace, or over SSH), as a module rather than source strings:

    python -m tools.rehearsal.probes sha DIR                 sha256 over a data directory's files ("missing" if none)
    python -m tools.rehearsal.probes counters DEV INTERVAL    "<time> <tx_bytes> <rx_bytes>" every INTERVAL s, forever

Standard library only: it runs with the venv's python from the repo root (ROOT on PYTHONPATH).
"""
import hashlib
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout: `python -m tools.rehearsal.probes` needs it on the path


def dir_sha(d: Path) -> str:
    """sha256 over the (name, bytes) of the visible files of `d`, in name order; "missing" if `d` is no directory."""
    if not d.is_dir():
        return "missing"
    h = hashlib.sha256()
    for p in sorted(d.iterdir()):
        if p.is_file() and not p.name.startswith("."):
            h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def counters(dev: str, interval: float) -> None:
    stats = Path("/sys/class/net") / dev / "statistics"
    while True:
        tx, rx = (stats / "tx_bytes").read_text().strip(), (stats / "rx_bytes").read_text().strip()
        print(f"{time.time():.3f} {tx} {rx}", flush=True)
        time.sleep(interval)


def command(python: str, *args: str) -> list[str]:
    """The argv that runs this module with `python` from any working directory."""
    return ["env", f"PYTHONPATH={ROOT}", python, "-m", "tools.rehearsal.probes", *args]


if __name__ == "__main__":
    if sys.argv[1:2] == ["sha"]:
        print(dir_sha(Path(sys.argv[2])))
    elif sys.argv[1:2] == ["counters"]:
        counters(sys.argv[2], float(sys.argv[3]))
    else:
        sys.exit(__doc__)
