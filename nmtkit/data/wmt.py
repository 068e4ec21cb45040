"""The real homework data: WMT16 English-German, as in the Transformer / OpenSeq2Seq recipes.

Training: Europarl v7 + CommonCrawl + News Commentary v11; dev: newstest2013; test: newstest2014 (the filtered
3,003-sentence set, as sacreBLEU's `wmt14`). SOURCES below is the one URL table, and every archive in it is
pinned: its exact size and sha256 where they are published (TensorFlow Datasets' wmt16 checksums), else the md5
that sacreBLEU ships for its test sets. A file that does not match is moved aside (`<name>.bad-<sha12>`), never
used. Archives are fetched over https, with http as a fallback only (the pins make both equally safe);
`data.base_url` replaces the host part: every archive is then fetched from `<base_url>/<archive name>` (an HTTP
mirror), or copied from that directory when base_url is a local path. The test sets are copied from sacreBLEU's
own cache (~/.sacrebleu, or $SACREBLEU) when it holds them. Downloads show a progress bar and resume partial
files with HTTP Range requests.
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

from nmtkit.data.clean import clean_pairs
from nmtkit.data.text import read_lines, read_parallel
from nmtkit.errors import DataError
from nmtkit.files import atomic_path, write_lines_atomic


@dataclass(frozen=True)
class Source:
    name: str
    url: str                        # official location (https; the http form is the fallback)
    archive: str                    # file name on disk (and under data.base_url)
    members: dict = field(default_factory=dict)  # role -> file name inside the archive (any folder)
    approx_bytes: int = 0           # archive size, for the disk-space estimate
    size: Optional[int] = None      # exact size in bytes
    sha256: Optional[str] = None
    md5: Optional[str] = None       # where only an md5 is published (sacreBLEU's test sets)
    sacrebleu: str = ""             # sacreBLEU's name for the data set: its cached copy is used when present


SOURCES: list[Source] = [
    Source("europarl-v7", "https://www.statmt.org/wmt13/training-parallel-europarl-v7.tgz",
           "training-parallel-europarl-v7.tgz",  # every WMT13 Europarl pair; only de-en is extracted
           {"train.en": "europarl-v7.de-en.en", "train.de": "europarl-v7.de-en.de"}, 657_632_379,
           size=657_632_379, sha256="0224c7c710c8a063dfd893b0cc0830202d61f4c75c17eb8e31836103d27d96e7"),
    Source("commoncrawl", "https://www.statmt.org/wmt13/training-parallel-commoncrawl.tgz",
           "training-parallel-commoncrawl.tgz",
           {"train.en": "commoncrawl.de-en.en", "train.de": "commoncrawl.de-en.de"}, 918_311_367,
           size=918_311_367, sha256="c7a74e2ea01ac6c920123108627e35278d4ccb5701e15428ffa34de86fa3a9e5"),
    Source("news-commentary-v11", "https://data.statmt.org/wmt16/translation-task/training-parallel-nc-v11.tgz",
           "training-parallel-nc-v11.tgz",
           {"train.en": "news-commentary-v11.de-en.en", "train.de": "news-commentary-v11.de-en.de"}, 75_178_032,
           size=75_178_032, sha256="cfe8ab047e05043476e498ee765c98e939c7b7d6d294e856344c84476b619d6a"),
    # sacreBLEU's wmt13/wmt14 (URL, md5 and file names as in sacrebleu.dataset.DATASETS; archive = its cache name)
    Source("newstest2013", "https://statmt.org/wmt13/test.tgz", "wmt13.test.tgz",
           {"dev.en": "newstest2013-src.en.sgm", "dev.de": "newstest2013-src.de.sgm"}, 20_000_000,
           md5="48eca5d02f637af44e85186847141f67", sacrebleu="wmt13"),
    Source("newstest2014", "https://statmt.org/wmt14/test-filtered.tgz", "wmt14.test-filtered.tgz",
           {"test.en": "newstest2014-deen-src.en.sgm", "test.de": "newstest2014-deen-ref.de.sgm"}, 20_000_000,
           md5="84c597844c1542e29c2aff23aaee4310", sacrebleu="wmt14"),
]
RETRY_BACKOFF = 2.0  # seconds before the first retry of a failed download; doubles each time
# Preparing holds, at its peak, four copies of the corpus: the archives, the de-en text extracted from them (raw/),
# the cleaned, shuffled text (train.*) and the encoded ids (int32 per BPE token), each about the archives' size
# or less: an estimate with headroom, not a measurement. The one disk figure: data/README.md,
# docs/instructors.md and nmtkit doctor quote DISK_NEED_GB (tests/instructor/test_data_wmt_docs.py checks the docs).
DISK_FACTOR = 4.0


def download_bytes(sources: Optional[list[Source]] = None) -> int:
    """What fetching the archives downloads (the pinned sizes; the test sets' approximate ones)."""
    return sum(s.approx_bytes for s in (SOURCES if sources is None else sources))


def disk_need_bytes(sources: Optional[list[Source]] = None) -> int:
    """Free bytes preparing WMT16 needs from scratch: DISK_FACTOR x the archives' bytes."""
    return int(DISK_FACTOR * download_bytes(sources))


DOWNLOAD_GB = round(download_bytes() / 1e9, 1)     # 1.7: the figure the docs quote
DISK_NEED_GB = round(disk_need_bytes() / 1e9, 1)   # 6.8: the figure the docs and nmtkit doctor quote


def url_for(src: Source, base_url: str = "") -> str:
    return f"{base_url.rstrip('/')}/{src.archive}" if base_url else src.url


def urls_for(src: Source, base_url: str = "") -> list[str]:
    """Where to fetch an archive, in order: the mirror alone, else the https URL and then its http form."""
    url = url_for(src, base_url)
    return [url, "http://" + url[len("https://"):]] if url.startswith("https://") else [url]


def sacrebleu_copy(src: Source) -> Optional[Path]:
    """sacreBLEU's cached copy of a test-set archive (it verified the same md5), if it has one."""
    if not src.sacrebleu:
        return None
    root = Path(os.environ.get("SACREBLEU") or Path.home() / ".sacrebleu")
    path = root / src.sacrebleu / "raw" / src.archive
    return path if path.is_file() else None


def disk_free(path: Path) -> int:
    return shutil.disk_usage(path).free


def check_disk(d: Path, sources: list[Source]) -> None:
    """Refuse to start when the disk cannot hold the corpus, saying how much is needed and free."""
    raw = d / "raw"
    present = sum((raw / s.archive).stat().st_size for s in sources if (raw / s.archive).exists())
    need = disk_need_bytes(sources) - present
    free = disk_free(d)
    if need > free:
        raise DataError(f"{d}: preparing WMT16 needs about {need / 1e9:.1f} GB free but only "
                             f"{free / 1e9:.1f} GB is free there; free some space or set data.dir to a larger disk")


# --- download ----------------------------------------------------------------------------------------

def _digest(path: Path, algo: str) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, algo).hexdigest()


def verify(path: Path, dest: Path, *, size: Optional[int] = None, sha256: Optional[str] = None,
           md5: Optional[str] = None) -> None:
    """Check `path` (dest itself, or its .part) against the pins; on a mismatch move it aside and raise."""
    actual = path.stat().st_size
    digests: dict[str, str] = {}
    problem = ""
    if size is not None and actual != size:
        problem = f"size {actual:,} bytes, expected {size:,}"
    for algo, want in (("sha256", sha256), ("md5", md5)):
        if want and not problem:
            digests[algo] = _digest(path, algo)
            if digests[algo] != want.lower():
                problem = f"{algo} {digests[algo]}, expected {want.lower()}"
    if problem:
        sha = digests.get("sha256") or _digest(path, "sha256")
        aside = dest.with_name(f"{dest.name}.bad-{sha[:12]}")
        os.replace(path, aside)
        raise DataError(f"{dest}: {problem}; moved aside to {aside.name}, not used. A changed mirror "
                            f"(data.base_url) or a damaged download? Rerun prepare to download it again")


def download(url: str, dest: str | os.PathLike, *, size: Optional[int] = None, sha256: Optional[str] = None,
             md5: Optional[str] = None, progress: bool = True, retries: int = 3, timeout: float = 60,
             backoff: Optional[float] = None) -> Path:
    """Fetch url (or copy a local path) to dest via dest.part, resuming a partial file; verify; rename.

    A file already at dest is verified too. Only a file that matches every pin given reaches dest."""
    pins = {"size": size, "sha256": sha256, "md5": md5}
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists():
        verify(dest, dest, **pins)
        return dest
    part = dest.with_name(dest.name + ".part")
    if "://" in url:
        _http_get(url, part, size=size, progress=progress, retries=retries, timeout=timeout,
                  backoff=RETRY_BACKOFF if backoff is None else backoff)
    elif Path(url).is_file():  # a local directory given as data.base_url, or sacreBLEU's cache
        shutil.copyfile(url, part)
    else:
        raise DataError(f"{url}: no such file (data.base_url points to a local directory without it)")
    verify(part, dest, **pins)
    os.replace(part, dest)
    return dest


def _http_get(url: str, part: Path, *, size: Optional[int], progress: bool, retries: int, timeout: float,
              backoff: float) -> None:
    """Append url's bytes to part (resuming from its size with a Range request) until the server has sent all."""
    from tqdm.auto import tqdm
    for attempt in range(retries + 1):
        have = part.stat().st_size if part.exists() else 0
        req = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                start = re.match(r"bytes (\d+)-", r.headers.get("Content-Range") or "")
                if have and (r.status != 206 or not start or int(start.group(1)) != have):
                    have = 0  # the server ignored the range (or answered another one): start over
                length = r.headers.get("Content-Length")
                total = have + int(length) if length is not None else size
                with open(part, "ab" if have else "wb") as f, \
                        tqdm(total=total, initial=have, unit="B", unit_scale=True, desc=part.name[:-5],
                             disable=not progress, leave=False) as bar:
                    while chunk := r.read(1 << 16):
                        f.write(chunk)
                        bar.update(len(chunk))
                    f.flush()
                    os.fsync(f.fileno())
                if total is not None and part.stat().st_size < total:
                    raise http.client.IncompleteRead(b"", total - part.stat().st_size)
            return
        except urllib.error.HTTPError as e:
            if e.code == 416 and have:
                return  # nothing left to fetch: the partial file is complete (or too long: verify says so)
            raise DataError(f"{url}: HTTP {e.code} {e.reason}; check the URL or data.base_url") from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
            if attempt == retries:
                got = part.stat().st_size if part.exists() else 0
                raise DataError(f"{url}: download failed after {retries + 1} tries with {got:,} bytes so far "
                                    f"({e}); rerun prepare to resume it") from None
            time.sleep(min(backoff * 2 ** attempt, 30))


def fetch(src: Source, raw: Path, base_url: str = "", *, progress: bool = True) -> Path:
    """The verified archive of one source in raw/: already there, sacreBLEU's copy, the mirror, https, http."""
    if not (src.size or src.sha256 or src.md5):
        raise DataError(f"WMT16 source {src.name!r} has no size or checksum pinned in nmtkit.data.wmt.SOURCES; "
                        f"add its published sha256 (or md5) so that a damaged file is never used")
    pins = {"size": src.size, "sha256": src.sha256, "md5": src.md5}
    cached = None if base_url or (raw / src.archive).exists() else sacrebleu_copy(src)
    urls = [str(cached)] if cached else urls_for(src, base_url)
    for i, url in enumerate(urls):
        try:
            return download(url, raw / src.archive, progress=progress, **pins)
        except DataError as e:
            if i + 1 == len(urls):
                raise
            if progress:
                print(f"{e}\n  trying {urls[i + 1]} (the pinned checksum still applies)")
    raise AssertionError("unreachable")


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
                    with atomic_path(dest) as tmp, tar.extractfile(m) as src, open(tmp, "wb") as f:
                        shutil.copyfileobj(src, f, 1 << 20)
                    found[wanted[base]] = dest
    except (tarfile.TarError, EOFError, OSError) as e:
        raise DataError(f"{archive}: cannot read the archive ({e}); delete it and rerun prepare") from None
    missing = [n for n, role in wanted.items() if role not in found]
    if missing:
        raise DataError(f"{archive}: has no {', '.join(missing)}; is this the right archive?")
    return found


_SEG = re.compile(r"<seg.*?>(.*)</seg>.*?")


def read_sgm(path: Path) -> list[str]:
    """The segments of a WMT "fake SGML" file, extracted as sacreBLEU does (FakeSGMLDataset), so that dev/test
    are exactly sacreBLEU's wmt13/wmt14 references."""
    return [re.sub(r"\s+", " ", _SEG.sub(r"\1", line).strip()) for line in read_lines(path) if line.startswith("<seg ")]


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
        archive = fetch(s, raw, dc.base_url, progress=progress)
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
            raise DataError(f"{split}: {len(evals[f'{split}.en']):,} English vs {len(evals[f'{split}.de']):,} "
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

