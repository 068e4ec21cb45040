"""The real homework data: WMT16 English-German, as in the Transformer / OpenSeq2Seq recipes.

Training: Europarl v7 + CommonCrawl + News Commentary v11; dev: newstest2013; test: newstest2014.
SOURCES below is the one URL table. `data.base_url` replaces the host part: every archive is then fetched
from `<base_url>/<archive name>` (an HTTP mirror), or copied from that directory when base_url is a local path.
Downloads show a progress bar, resume partial files with HTTP Range requests, and are checked against the
size/sha256 in the table where the table has them.
"""
from __future__ import annotations

import hashlib
import http.client
import os
import random
import re
import shutil
import tarfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from nmtkit.data import DataError, LineCountError
from nmtkit.data.clean import clean_pairs
from nmtkit.data.text import read_lines, read_parallel
from nmtkit.files import sha256_file, write_lines_atomic


class DownloadError(DataError):
    """A download failed (after retries); the partial file is kept so a rerun resumes it."""


class ChecksumError(DataError):
    """A downloaded file does not have the expected size or sha256; it was deleted."""


class DiskSpaceError(DataError, OSError):
    """Not enough free disk space to download and prepare the corpus."""


@dataclass(frozen=True)
class Source:
    name: str
    url: str                        # official location
    archive: str                    # file name on disk (and under data.base_url)
    members: dict = field(default_factory=dict)  # role -> file name inside the archive (any folder)
    approx_bytes: int = 0           # archive size, for the disk-space estimate
    size: Optional[int] = None      # exact size in bytes: checked when given
    sha256: Optional[str] = None    # checked when given


# The official sha256 values are not recorded here (the kit was written offline); add them to pin the data.
SOURCES: list[Source] = [
    Source("europarl-v7", "http://www.statmt.org/europarl/v7/de-en.tgz", "europarl-v7-de-en.tgz",
           {"train.en": "europarl-v7.de-en.en", "train.de": "europarl-v7.de-en.de"}, 197_000_000),
    Source("commoncrawl", "http://www.statmt.org/wmt13/training-parallel-commoncrawl.tgz",
           "training-parallel-commoncrawl.tgz",
           {"train.en": "commoncrawl.de-en.en", "train.de": "commoncrawl.de-en.de"}, 918_000_000),
    Source("news-commentary-v11", "http://data.statmt.org/wmt16/translation-task/training-parallel-nc-v11.tgz",
           "training-parallel-nc-v11.tgz",
           {"train.en": "news-commentary-v11.de-en.en", "train.de": "news-commentary-v11.de-en.de"}, 76_000_000),
    Source("newstest", "http://data.statmt.org/wmt16/translation-task/dev.tgz", "dev.tgz",
           {"dev.en": "newstest2013.en", "dev.de": "newstest2013.de",
            "test.en": "newstest2014-deen-src.en.sgm", "test.de": "newstest2014-deen-ref.de.sgm"}, 20_000_000),
]
RETRY_BACKOFF = 2.0  # seconds before the first retry of a failed download; doubles each time
# Archives + extracted text + cleaned copies + encoded ids: about this many times the archives' size.
DISK_FACTOR = 4.0


def url_for(src: Source, base_url: str = "") -> str:
    return f"{base_url.rstrip('/')}/{src.archive}" if base_url else src.url


def disk_free(path: Path) -> int:
    return shutil.disk_usage(path).free


def check_disk(d: Path, sources: list[Source]) -> None:
    """Refuse to start when the disk cannot hold the corpus, saying how much is needed and free."""
    raw = d / "raw"
    present = sum((raw / s.archive).stat().st_size for s in sources if (raw / s.archive).exists())
    need = int(DISK_FACTOR * sum(s.approx_bytes for s in sources)) - present
    free = disk_free(d)
    if need > free:
        raise DiskSpaceError(f"{d}: preparing WMT16 needs about {need / 1e9:.1f} GB free but only "
                             f"{free / 1e9:.1f} GB is free there; free some space or set data.dir to a larger disk")


# --- download ----------------------------------------------------------------------------------------

def _verify(path: Path, url: str, size: Optional[int], sha256: Optional[str]) -> None:
    actual = path.stat().st_size
    bad = None
    if size is not None and actual != size:
        bad = f"{actual:,} bytes, expected {size:,}"
    elif sha256:
        digest = sha256_file(path)
        if digest != sha256.lower():
            bad = f"sha256 {digest}, expected {sha256}"
    if bad:
        path.unlink()
        raise ChecksumError(f"{url}: the downloaded file has {bad}; it was deleted. Check data.base_url (a "
                            f"mirror with other files?) and rerun prepare to download it again")


def download(url: str, dest: str | os.PathLike, *, size: Optional[int] = None, sha256: Optional[str] = None,
             progress: bool = True, retries: int = 3, timeout: float = 60, backoff: Optional[float] = None) -> Path:
    """Fetch url to dest via dest.part, resuming a partial file with a Range request; verify; rename."""
    from tqdm.auto import tqdm
    backoff = RETRY_BACKOFF if backoff is None else backoff
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists():
        return dest
    part = dest.with_name(dest.name + ".part")
    if "://" not in url:  # a local directory given as data.base_url
        if not Path(url).is_file():
            raise DownloadError(f"{url}: no such file (data.base_url points to a local directory without it)")
        shutil.copyfile(url, part)
        _verify(part, url, size, sha256)
        os.replace(part, dest)
        return dest
    for attempt in range(retries + 1):
        have = part.stat().st_size if part.exists() else 0
        req = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                if have and r.status != 206:  # the server ignored the range: start over
                    have = 0
                length = r.headers.get("Content-Length")
                total = have + int(length) if length is not None else size
                with open(part, "ab" if have else "wb") as f, \
                        tqdm(total=total, initial=have, unit="B", unit_scale=True, desc=dest.name,
                             disable=not progress, leave=False) as bar:
                    while True:
                        chunk = r.read(1 << 16)
                        if not chunk:
                            break
                        f.write(chunk)
                        bar.update(len(chunk))
                if total is not None and part.stat().st_size < total:
                    raise http.client.IncompleteRead(b"", total - part.stat().st_size)
            break
        except urllib.error.HTTPError as e:
            if e.code == 416 and have and (size is None or have == size):
                break  # nothing left to fetch: the partial file is complete
            if e.code == 416:
                part.unlink()
                continue
            raise DownloadError(f"{url}: HTTP {e.code} {e.reason}; check the URL or data.base_url") from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
            if attempt == retries:
                got = part.stat().st_size if part.exists() else 0
                raise DownloadError(f"{url}: download failed after {retries + 1} tries with {got:,} bytes so far "
                                    f"({e}); rerun prepare to resume it") from None
            time.sleep(min(backoff * 2 ** attempt, 30))
    _verify(part, url, size, sha256)
    os.replace(part, dest)
    return dest


# --- extraction and text -----------------------------------------------------------------------------

def extract(archive: Path, members: dict, out_dir: Path) -> dict[str, Path]:
    """Copy the named members (matched by file name, in any folder) out of a .tgz; role -> path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    wanted = {name: role for role, name in members.items()}
    found: dict[str, Path] = {}
    try:
        with tarfile.open(archive, "r:*") as tar:
            for m in tar:
                base = os.path.basename(m.name)
                if m.isfile() and base in wanted:
                    dest = out_dir / base
                    tmp = out_dir / f".{base}.tmp"
                    with tar.extractfile(m) as src, open(tmp, "wb") as f:
                        shutil.copyfileobj(src, f, 1 << 20)
                    os.replace(tmp, dest)
                    found[wanted[base]] = dest
    except (tarfile.TarError, EOFError, OSError) as e:
        raise DataError(f"{archive}: cannot read the archive ({e}); delete it and rerun prepare") from None
    missing = [n for n, role in wanted.items() if role not in found]
    if missing:
        raise DataError(f"{archive}: has no {', '.join(missing)}; is this the right archive?")
    return found


_SEG = re.compile(r"<seg[^>]*>(.*?)</seg>", re.I)


def read_sgm(path: Path) -> list[str]:
    """The segments of an SGML test file (what Moses' input-from-sgm.perl extracts)."""
    return [m.group(1).strip() for line in read_lines(path) for m in [_SEG.search(line)] if m]


def _read_side(path: Path) -> list[str]:
    return read_sgm(path) if path.suffix == ".sgm" else read_lines(path)


def fetch_and_clean(d: Path, dc, *, progress: bool = True, sources: Optional[list[Source]] = None) -> dict:
    """Download, extract, clean (training only) and shuffle WMT16 into d/{train,dev,test}.{en,de}."""
    sources = SOURCES if sources is None else sources
    d = Path(d)
    raw = d / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    check_disk(d, sources)
    train_pairs: list[tuple[str, str]] = []
    evals: dict[str, list[str]] = {}
    for s in sources:
        archive = download(url_for(s, dc.base_url), raw / s.archive, size=s.size, sha256=s.sha256, progress=progress)
        files = extract(archive, s.members, raw / s.name)
        if "train.en" in files:
            en, de = read_parallel(files["train.en"], files["train.de"])
            train_pairs.extend(zip(en, de))
        for role, path in files.items():
            if not role.startswith("train."):
                evals[role] = _read_side(path)
    for split in ("dev", "test"):
        if f"{split}.en" not in evals or f"{split}.de" not in evals:
            raise DataError(f"the WMT16 source table has no {split} set (roles {split}.en/{split}.de)")
        if len(evals[f"{split}.en"]) != len(evals[f"{split}.de"]):
            raise LineCountError(f"{split}: {len(evals[f'{split}.en']):,} English vs {len(evals[f'{split}.de']):,} "
                                 f"German segments; re-download the archive")
    kept, counts = clean_pairs(train_pairs, dc.min_len, dc.max_len, dc.max_len_ratio)
    del train_pairs
    random.Random(dc.seed).shuffle(kept)
    write_lines_atomic(d / "train.en", (en for en, _ in kept))
    write_lines_atomic(d / "train.de", (de for _, de in kept))
    for split in ("dev", "test"):
        for lang in ("en", "de"):
            write_lines_atomic(d / f"{split}.{lang}", evals[f"{split}.{lang}"])
    return counts


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
