"""The UCI benchmark runner: one results row per (dataset, model, method, split, seed).

Resuming: the results file is a CSV that only ever grows. A row is written when its
configuration has finished, as one ``os.write`` of the whole line on an ``O_APPEND`` descriptor,
so a row is either complete or absent; a run that is killed loses only the rows in flight. On
start, rows already in the file (matched on :data:`KEY`: every setting that changes a number,
generated from :mod:`deepgp.config` and :mod:`deepgp_bench.config`) are skipped. A file written
before a setting was a column is read with that setting's declared default (``"-"`` for
inner_sampling in a "vi" row), and rewritten once with the column the next time a run appends to it.
A setting column missing from any other file (:data:`ADDED_COLUMNS`), and a column name that its header
repeats, are refused by name before any work: a row's settings are never guessed.

Damaged lines: every physical line is parsed on its own (rows never contain a newline), so a
damaged line (a truncated last line from a crash mid-write, an edit that broke its quoting, a
wrong number of fields, a number that does not parse) costs that line only. It is ignored, its
configuration runs again, and :func:`read_results` says so with a :class:`ResultsFileWarning`
(:func:`load_results` returns the line numbers instead).

Claims: several processes (several ``deepgp benchmark`` runs on one machine) may share one results
file. (Across machines, a shared file system would need working ``flock`` and atomic appends, which
NFS does not promise; Dask workers elsewhere are fine: only this process writes the file.) Claims
follow the file, not the name it was given: a symbolic link, ``./r.csv`` and ``r.csv`` are one file.
A file with more than one name (a hard link) is refused, as its names would keep claims of their own;
with one name, the resolved path is the file's identity, and claims are keyed by it. Right before a
configuration starts, its process claims it with an OS file lock in ``<results name>.claims/``
beside the file itself (one lock file per configuration, named from its key); a configuration
claimed elsewhere is skipped (it is running there), and one found in the file once claimed is
skipped too (it finished there). The claim is released, and its lock file removed, when the
configuration has finished, failed or been interrupted. A row is written under a lock on the results
file itself, after reading the file again: a row that is there already (written meanwhile by another
process) is never written twice. The kernel releases the locks of a process that dies, so a killed
run leaves at most stale lock files, which never block a rerun.

Snapshots: a configuration carrying ``snapshots`` (budgets below its iterations) writes the rows of
those budgets from the same training run, each exactly the row of a run with that budget and with
its key; one already in the file is not written again, nor one whose configuration another process
(or this one) is running: that process writes it.

Stopping: Ctrl-C (or SIGTERM to ``deepgp benchmark``) keeps the rows written, releases the claims and
stops the worker processes at once; a worker also ends when its parent dies, even by SIGKILL
(:func:`_end_with`).

Executors: ``local`` runs configurations in this process (``jobs=1``) or in a pool of ``jobs``
processes with one torch thread each; ``dask`` submits the same function to a Dask distributed
scheduler (``pip install deepgp-bench[distributed]``) and writes rows here as they complete. Either
way at most as many configurations are claimed as can run at once (``jobs``, or the cluster's
worker threads), the next one as soon as one finishes.
"""

from __future__ import annotations

import codecs
import collections
import csv
import dataclasses
import functools
import hashlib
import io
import itertools
import logging
import math
import multiprocessing as mp
import os
import platform
import re
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path

import filelock
import numpy as np
import torch

from deepgp import DeepGP, __version__, fit
from deepgp.config import (
    METHOD_SAMPLES,
    RECIPE_ITERATIONS,
    RECIPE_VALUES,
    ModelConfig,
    TrainConfig,
    parse_spec,
    settings_of,
)
from deepgp.datasets.uci import load_split, load_uci, plain_name, split_data
from deepgp.metrics import split_metrics
from deepgp.outputs import number_text
from deepgp.prediction import check_memory
from deepgp.runtime import training_products_dtype
from deepgp.storage import check_writable, locked, write_bytes
from deepgp.validation import check_device, check_positive_int

from .baselines import check_pair, model_config, network_name, train_method
from .baselines import fit as fit_baseline
from .config import BenchmarkConfig, SGHMCConfig

DATASETS = ("boston", "concrete", "energy", "forest", "kin8nm", "power", "winered", "yacht", "naval", "protein")
# the nine columns of the paper's Table 1, what `deepgp benchmark` runs by default: (model, method)
CONFIGS = (
    ("GP", "vi"), ("GP-GP", "vi"), ("GP-GP-GP", "vi"), ("LV-GP", "vi"), ("LV-GP", "iw"), ("LV-GP-GP", "vi"),
    ("LV-GP-GP", "iw"), ("LV-GP-GP-GP", "vi"), ("LV-GP-GP-GP", "iw"),
)
# the baselines of the paper's Table S1 (deepgp_bench.baselines): a linear-Gaussian CVAE, two CVAEs, SGHMC deep GPs
BASELINES = (("Linear", "vi"), ("CVAE-50", "vi"), ("CVAE-100-100", "vi"),
             ("GP", "sghmc"), ("GP-GP", "sghmc"), ("GP-GP-GP", "sghmc"))
# `deepgp benchmark`'s default budget: the default recipe's (fit's is TrainConfig's); --recipe paper: the paper's
BENCHMARK_ITERATIONS = RECIPE_ITERATIONS[TrainConfig.recipe]
# every setting that changes a number is a column of the row's key, generated from the declarations
SETTINGS: dict[str, dataclasses.Field] = {
    f.name: f for config in (BenchmarkConfig, ModelConfig, TrainConfig, SGHMCConfig)
    for f in dataclasses.fields(config)}
KEY = ("dataset", "split", *SETTINGS)  # ("model", "method" and "seed" are settings)
METRICS = ("test_loglik_kde", "test_loglik_mixture", "test_rmse", "shapiro_median", "bound")
# beside the key and the metrics, where and with what a row was computed ("device": cpu, or the GPU's name;
# "products": the dtype of training's R_lᵀA products, deepgp.runtime; "-" for a baseline, "" in older rows)
COLUMNS = KEY + METRICS + ("n_train", "n_test", "seconds", "deepgp", "torch", "numpy", "python", "device",
                           "products")
_REQUIRED = ("dataset", "model", "method", "split", "seed", *METRICS)  # what any results file has had
# The key columns that versions of the results file added, oldest first, one group per version; the first
# file had the rest of KEY. A file lacks the groups after its version's, and no other key column: a file
# from before a group is read with the group's settings as its runs had them (:func:`_missing`), and a
# setting column missing from any other file is refused, as the value its rows ran with is not known.
ADDED_COLUMNS = (
    ("dtype", "inner_sampling"),
    ("predict_samples", "shapiro_points", "hidden_dim", "latent_dim", "kernel", "likelihood_variance",
     "inner_q_sqrt", "train_inner_kernel_variance", "encoder_hidden", "batch_size", "lr", "gamma", "decay",
     "decay_every", "natgrad"),
    ("encoder_std",),
    ("sghmc_samples", "sghmc_thinning", "sghmc_step", "sghmc_mdecay", "sghmc_window"),
    ("recipe", "gamma_warmup", "natgrad_inner"),
    ("inner_width",),
    ("dreg",),
    ("early_stopping", "validation_fraction", "validation_every", "patience"),
)
RECORDED = COLUMNS[len(KEY) + len(METRICS):]  # beside the key and the metrics: how and with what a row was computed
_INTS = ("split", "n_train", "n_test", *(name for name, f in SETTINGS.items() if f.type in ("int", "int | None")))


MAX_SPLIT = 2**32 - 1  # numpy's RandomState seeds
ALL_METHODS = ("vi", "iw", "sghmc")  # sghmc: the SGHMC deep GP baseline (deepgp_bench.baselines.sghmc)

# -- configurations ------------------------------------------------------------------------------
def default_settings(recipe: str = TrainConfig.recipe) -> dict:
    """Every setting's default, the optimiser's as ``recipe`` gives them (what a row of the defaults records)."""
    return ({name: f.default for name, f in SETTINGS.items()} | {"recipe": recipe, "num_samples": METHOD_SAMPLES["iw"]}
            | RECIPE_VALUES[recipe])


def parse_splits(text: str) -> list[int]:
    """"0-4" → [0, 1, 2, 3, 4]; "0,2" → [0, 2]; "3" → [3]. Anything else is a ValueError naming the text."""
    out: list[int] = []
    for part in str(text).split(","):
        match = re.fullmatch(r"\s*([0-9]+)\s*(?:-\s*([0-9]+)\s*)?", part)
        if match is None:
            if part.strip():
                out = []
                break
            continue  # "0,2," : an empty part adds nothing
        lo = int(match[1])
        hi = lo if match[2] is None else int(match[2])
        if hi < lo or hi > MAX_SPLIT or len(out) + hi - lo >= 100_000:  # (a split seeds a RandomState)
            out = []
            break
        out.extend(range(lo, hi + 1))
    if not out:
        raise ValueError(f"splits must be integers in [0, {MAX_SPLIT}] like '0-4' or '0,2' (at most 100000 of "
                         f"them), got {text!r}")
    return sorted(set(out))


def model_methods(models: Iterable[str], methods: Iterable[str]) -> list[tuple[str, str]]:
    """(model, method) pairs. A model given as ``MODEL:METHOD`` names its method itself;
    a bare model is crossed with ``methods``, except that ``iw`` is skipped for models without a
    latent-variable layer: with no latent variable IW only re-weights the inner layers' samples,
    which the paper does not report (and GP is deterministic given q, so IW = VI there).
    The baselines (:mod:`deepgp_bench.baselines`): ``Linear`` and ``CVAE-<widths>`` by vi or iw (an IWAE),
    a GP-only spec by ``sghmc`` (a bare model gets sghmc only where ``methods`` asks and it is GP-only)."""
    pairs: list[tuple[str, str]] = []
    for entry in models:
        model, _, method = entry.partition(":")
        network = network_name(model)
        model = network or "-".join(parse_spec(model))  # validates and normalises the spec
        wanted = [method] if method else list(methods)
        for m in wanted:
            if m not in ALL_METHODS:
                raise ValueError(f"method must be one of {ALL_METHODS}, got {m!r} (in {entry!r})")
            gp_only = network is None and "LV" not in model.split("-")
            if not method and ((m == "iw" and gp_only) or (m == "sghmc" and not gp_only)):
                continue
            train_method(model, m)  # refuses a baseline's wrong method (a CVAE by sghmc, SGHMC with LV layers)
            if (model, m) not in pairs:
                pairs.append((model, m))
    return pairs


def make_configs(
    datasets: Iterable[str], pairs: Iterable[tuple[str, str]], splits: Iterable[int], iterations: int,
    data_dir=None, device=None, snapshots: Iterable[int] = (), **settings,
) -> list[dict]:
    """All configurations, split-major (every dataset's first split finishes before any second).

    ``settings`` are any fields of :class:`~deepgp_bench.config.BenchmarkConfig`, ModelConfig and
    TrainConfig (the model, method and seed come from ``pairs`` and ``splits``); each is checked once
    here, not as one failed row per configuration, and recorded in every row's key.
    ``protocol="splits"``: split s trained with seed s (real splits, training statistics).
    ``protocol="paper"``: the paper's code (docs/paper-vs-code.md §5.4): always split 0, standardised
    with all-data statistics, and the requested split numbers become seeds. A "vi" configuration
    records num_samples 1 (the paper's VI) and inner_sampling "-" (it has none). The optimiser's
    settings left unset are recorded as the recipe gives them (TrainConfig.resolved), so a row says
    what ran and a setting given explicitly with the recipe's value is the same configuration.
    ``snapshots``: budgets in [1, iterations) whose rows each run also writes (:func:`run_config`);
    carried beside the settings, not in the key, as they change no number.
    """
    fixed = {"model", "method", "seed"} & set(settings)
    unknown = sorted(set(settings) - set(SETTINGS)) + sorted(fixed)
    if unknown:
        raise ValueError(f"unknown benchmark setting(s) {unknown}; the settings are the fields of BenchmarkConfig, "
                         "ModelConfig and TrainConfig but model, method and seed")
    splits = [check_positive_int("splits", s, minimum=0, maximum=MAX_SPLIT) for s in splits]
    snapshots = tuple(sorted({check_positive_int("snapshots", s, maximum=iterations - 1) for s in snapshots}))
    settings["iterations"] = iterations
    bench = BenchmarkConfig(**settings_of(BenchmarkConfig, settings))
    SGHMCConfig(**settings_of(SGHMCConfig, settings))
    for model, method in pairs:
        model_config(model, settings)
        TrainConfig(**{**settings_of(TrainConfig, settings), "method": train_method(model, method)})
    if device is not None:
        check_device(device)
    configs, train_rows = [], {}
    for s in splits:
        for d in datasets:
            for model, method in pairs:
                config = {name: f.default for name, f in SETTINGS.items()}
                config.update(dataclasses.asdict(bench), **settings, dataset=d, model=model, method=method,
                              split=0 if bench.protocol == "paper" else s, seed=s, data_dir=data_dir, device=device,
                              snapshots=snapshots)
                config.update({k: v for k, v in RECIPE_VALUES[config["recipe"]].items() if config[k] is None})
                if method != "iw" or network_name(model):  # (sghmc, a CVAE: no inner layers to sample)
                    config.update(inner_sampling="-")
                if method != "iw":
                    config.update(num_samples=1)
                elif config["num_samples"] is None:
                    config.update(num_samples=METHOD_SAMPLES["iw"])
                config.update({name: _usual(name, config["recipe"]) for name in unread_settings(model, method)})
                if "inner_width" not in unread_settings(model, method):
                    # "auto" resolved where the row is made, so that its key names the architecture that ran
                    if d not in train_rows:
                        train_rows[d] = _train_rows(d, data_dir)
                    config.update(n_train=train_rows[d], inner_width=_width(config["inner_width"], train_rows[d]))
                configs.append(config)
    return configs


_INNER = ("hidden_dim", "inner_width", "inner_q_sqrt", "train_inner_kernel_variance")  # read by inner GP layers
_ENCODER = ("latent_dim", "encoder_hidden", "encoder_std")  # read by LV layers
_NATGRAD = ("gamma", "gamma_warmup", "natgrad", "natgrad_inner")  # read by the VI/IW deep GPs' optimiser


@functools.cache  # (read for every row of a results file)
def unread_settings(model: str, method: str) -> frozenset[str]:
    """The settings that ``model`` trained by ``method`` never reads. :func:`make_configs` records them at
    their defaults, so that they never split a key: Linear or CVAE-50 run beside ``--inner-width hidden``
    is the run without it (and is not run again), and neither is GP (VI) beside ``--sghmc-step``.

    A network (Linear, CVAE-...) reads only ``latent_dim`` and ``dtype`` of ModelConfig; a spec without
    inner GP layers (GP, LV-GP) none of the inner layers' settings (nor ``natgrad_inner``), one without
    LV layers none of the encoder's, SGHMC not ``inner_q_sqrt``; the SGHMC settings are read by ``sghmc``
    only, the natural-gradient ones by ``vi``/``iw`` deep GPs only (the baselines' optimiser is Adam's
    schedule alone), ``dreg`` by ``iw`` with LV layers."""
    sghmc = {f.name for f in dataclasses.fields(SGHMCConfig)}
    if network_name(model):
        # (num_inducing stays in the key: the report names a row's budget by it)
        architecture = {f.name for f in dataclasses.fields(ModelConfig)} - {"model", "latent_dim", "dtype",
                                                                             "num_inducing"}
        return frozenset(architecture | set(_NATGRAD) | sghmc | {"dreg"})
    tokens = parse_spec(model)
    unread = set() if "LV" in tokens else set(_ENCODER)
    if tokens.count("GP") == 1:
        unread |= {*_INNER, "natgrad_inner"}
    if method != "iw" or "LV" not in tokens:
        unread.add("dreg")  # (importance weights over latent draws only)
    elif tokens.count("GP") == 1:
        unread.add("inner_sampling")  # (LV-GP: no inner GP layer to draw jointly or per sample)
    if method == "sghmc":  # (its q(v) is a point: q_sqrt is zeroed whatever its start)
        return frozenset(unread | set(_NATGRAD) | {"inner_q_sqrt"})
    return frozenset(unread | sghmc)


def _usual(name: str, recipe: str):
    """A setting's default, an optimiser setting's as ``recipe`` gives it."""
    return RECIPE_VALUES[recipe].get(name, SETTINGS[name].default)


def _width(inner_width: str, n_train) -> str:
    """The inner width that ``inner_width`` gives ``n_train`` training points ("auto":
    :meth:`ModelConfig.resolved`); a concrete width, or an unknown ``n_train``, as it is."""
    if inner_width != "auto" or isinstance(n_train, bool) or not isinstance(n_train, int):
        return inner_width
    return ModelConfig(inner_width="auto").resolved(max(n_train, 1)).inner_width


def _train_rows(dataset: str, data_dir=None) -> int:
    """N, the training points of every split of ``dataset`` (the runner's 90%)."""
    X, Y = load_uci(dataset, data_dir)
    return len(split_data(X, Y, 0, test_limit=1).X_train)


def _text(value) -> str:
    """A setting as a key cell: floats exactly (repr), tuples as "20,20", the rest as str."""
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    return repr(value) if isinstance(value, float) else str(value)


def config_key(row: dict) -> tuple[str, ...]:
    return tuple(_text(row[k]) for k in KEY)


def _missing(row: dict, column: str) -> str:
    """The text of a setting a row's file lacks (written before the setting was a column): the value such
    files were run with (its declared ``legacy`` value: ``recipe`` "paper", ...), else its declared
    default, or "-" for inner_sampling in a "vi" row (as make_configs records it)."""
    if column == "inner_sampling" and row.get("method") == "vi":
        return "-"
    f = SETTINGS[column]
    return _text(f.metadata.get("legacy", f.default))


# -- one configuration ---------------------------------------------------------------------------
def run_config(config: dict) -> list[dict]:
    """Train and evaluate one configuration; returns its results rows (dicts of COLUMNS), the last at its budget.

    With ``config["snapshots"]``, training stops at each of those budgets below its iterations to
    evaluate, then resumes from a checkpoint: the row at s is the row of the same configuration run
    with ``iterations=s`` (fit's schedule does not depend on the total, and resumes bitwise), and its
    ``seconds`` count the run up to it. The baselines ignore snapshots (their schedules may depend
    on the total). Runs with one torch thread: parallelism comes from running several configurations at once.
    """
    torch.set_num_threads(1)
    start = time.perf_counter()
    bench = BenchmarkConfig(**settings_of(BenchmarkConfig, config))
    method = train_method(config["model"], config["method"])
    train = TrainConfig(**{**settings_of(TrainConfig, config), "method": method, "inner_sampling": (
        TrainConfig.inner_sampling if config["inner_sampling"] == "-" else config["inner_sampling"])})
    data = load_split(config["dataset"], config["split"], config.get("data_dir"), bench.test_limit,
                      stats="all" if bench.protocol == "paper" else "train")
    architecture = model_config(config["model"], config)

    def row_at(iterations: int, model, history: np.ndarray, products: str = "-") -> dict:
        metrics = split_metrics(model, data.X_test, data.Y_test, bench.predict_samples, bench.shapiro_points or None,
                                train.seed)  # shapiro_points 0: every test point
        bound = float(np.mean(history[-min(len(history), 50):])) if len(history) else None  # (none: left empty)
        row = {k: config[k] for k in KEY} | {"iterations": iterations}
        row.update(metrics, bound=bound, n_train=len(data.X_train), n_test=len(data.X_test),
                   seconds=time.perf_counter() - start, deepgp=__version__, torch=torch.__version__,
                   numpy=np.__version__, python=platform.python_version(), device=_device_name(model.device),
                   products=products)
        return row

    if check_pair(config["model"], config["method"]):
        model, history = fit_baseline(config["model"], config["method"], data.X_train, data.Y_train, architecture,
                                      train, SGHMCConfig(**settings_of(SGHMCConfig, config)), config.get("device"))
        return [row_at(train.iterations, model, history)]
    model = DeepGP.from_config(architecture, data.X_train, data.Y_train, seed=train.seed, device=config.get("device"))
    check_memory(model, len(data.X_test), bench.predict_samples, "kde", setting="predict_samples")  # before training
    budgets = sorted({s for s in config.get("snapshots", ()) if s < train.iterations}) + [train.iterations]
    rows = []
    with tempfile.TemporaryDirectory(prefix="deepgp-snapshots-") as folder:
        checkpoint = Path(folder) / "state.safetensors" if len(budgets) > 1 else None
        for budget in budgets:
            # saved at the end of each budget (not every 1,000 iterations): the state the next one resumes
            history = fit(model, data.X_train, data.Y_train, config=dataclasses.replace(train, iterations=budget),
                          progress=False, checkpoint=checkpoint, checkpoint_every=max(train.iterations, 1))
            rows.append(row_at(budget, model, history, training_products_dtype(model.dtype)))
    return rows


def _device_name(device) -> str:
    """"cpu", or a GPU as "cuda:0 NVIDIA H100 80GB HBM3" (rows computed on a GPU are marked so)."""
    if device.type != "cuda":
        return device.type
    return f"cuda:{device.index or 0} {torch.cuda.get_device_name(device)}"


# -- the results file ----------------------------------------------------------------------------
class ResultsFileWarning(UserWarning):
    """A results file has damaged lines: they are ignored, and their configurations run again."""


@dataclass
class Results:
    """A results file as read: its complete rows (typed) and the 1-based numbers of the non-blank
    lines ignored as damaged (wrong field count, unparseable numbers, broken quoting)."""

    rows: list[dict] = field(default_factory=list)
    damaged: list[int] = field(default_factory=list)


def _shown(value, spec: str = ".3f") -> str:
    """A measured value for the progress line: "-" where there is none (no iteration ran: no bound)."""
    return "-" if value is None else format(value, spec)


def format_row(row: dict) -> str:
    """One CSV line (with newline) of COLUMNS: settings exactly (as in the key), measured floats as the
    shortest text that reads back as the same float (:func:`deepgp.outputs.number_text`)."""
    buf = io.StringIO()
    row = {"device": "", "products": "", **row}  # (a row from before these columns has none)
    values = [_text(row[c]) if c in SETTINGS else number_text(row[c]) if isinstance(row[c], float) else row[c]
              for c in COLUMNS]
    csv.writer(buf, lineterminator="\n").writerow(values)
    return buf.getvalue()


def _append(fd: int, path: Path, text: str) -> None:
    # one write(2) on an O_APPEND descriptor: concurrent appenders never interleave within a line
    data = text.encode()
    if os.write(fd, data) != len(data):
        raise OSError(f"short write to {path}")


def _lines(path: Path) -> list[bytes]:
    """The file's physical lines (without their line ends; the last is b"" after a final newline), the
    first without a UTF-8 byte order mark (a spreadsheet's "CSV UTF-8" starts with one)."""
    return _split(path.read_bytes())


def _split(data: bytes) -> list[bytes]:
    return [line.removesuffix(b"\r") for line in data.removeprefix(codecs.BOM_UTF8).split(b"\n")]


def _fields(line: bytes) -> list[str] | None:
    """The fields of one line, or None where it is not one well-formed CSV record."""
    try:
        return next(csv.reader([line.decode()], strict=True))
    except (UnicodeDecodeError, csv.Error, StopIteration):
        return None


_MAY_BE_EMPTY = (*RECORDED, "bound")  # unknown, read as NaN: the bound of a run of no iteration is left empty


def _parse_row(header: list[str], line: bytes) -> dict | None:
    """One typed row, or None where the line is damaged. Settings its model does not read
    (:func:`unread_settings`) are read as their defaults. A column beside the key and the metrics
    (:data:`RECORDED`) that the file lacks, or a cell of it left empty, is unknown ("", ``n_train`` and
    ``n_test`` None, ``seconds`` NaN), not a reason to ignore the row; so is an empty ``bound``."""
    values = _fields(line)
    if values is None or len(values) != len(header):
        return None
    row = dict(zip(header, values))


    if row.get("method") not in ALL_METHODS or not plain_name(row.get("dataset")):
        return None
    for column in KEY:
        if column not in row:
            row[column] = _missing(row, column)
    for column in RECORDED:
        row.setdefault(column, "")
    try:  # a setting the model does not read, as make_configs records it (so old rows match new keys)
        row.update({name: _text(_usual(name, row["recipe"])) for name in unread_settings(row["model"], row["method"])})
    except (ValueError, KeyError):
        return None
    for name in _SPELT:  # as _text writes them: a spreadsheet saves 1e-05 as 1.00E-05 and False as FALSE
        row[name] = _respelt(name, row[name])
    try:
        for k in _INTS:
            if k in row:
                row[k] = None if k in RECORDED and not row[k].strip() else int(row[k])
        for k in METRICS + ("seconds",):
            row[k] = math.nan if k in _MAY_BE_EMPTY and not row[k].strip() else float(row[k])
    except ValueError:
        return None
    # no run writes these: a log density of +inf (−inf is a failed fit's), a negative split
    if row["split"] < 0 or math.inf in (row["test_loglik_kde"], row["test_loglik_mixture"]):
        return None
    return row


_SPELT = tuple(name for name, f in SETTINGS.items() if f.type.split(" |")[0] in ("float", "bool", "tuple[int, ...]"))


def _respelt(name: str, text: str) -> str:
    """A float, bool or widths setting's cell as :func:`_text` writes its value ("1.00E-05" → "1e-05",
    "FALSE" → "False", "20, 20" → "20,20"), so that a row saved by a spreadsheet keeps its key; a
    cell that does not read as one is left as it is."""
    kind = SETTINGS[name].type.split(" |")[0]
    try:
        if kind == "float":
            return _text(float(text))
        if kind == "bool":
            return {"true": "True", "false": "False"}.get(text.strip().lower(), text)
        return _text(tuple(int(part) for part in text.split(",")))
    except ValueError:
        return text


def load_results(path) -> Results:
    """The rows of a results file and the numbers of its damaged lines; each line is read on its
    own, so a damaged one costs that line only. An empty file has no rows; a header that is not a results
    file's (:func:`_check_header`: a column missing or repeated) is a ValueError."""
    path = Path(path)
    lines = _lines(path)
    if not any(line.strip() for line in lines):
        return Results()
    header = _fields(lines[0]) or []
    _check_header(path, header)
    out = Results()
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        row = _parse_row(header, line)
        if row is None:
            out.damaged.append(number)
        else:
            out.rows.append(row)
    return out


def describe_lines(numbers: list[int], shown: int = 10) -> str:
    """"line 3", "lines 3, 7", "lines 1, …, 10 and 5 more"."""
    text = ", ".join(str(n) for n in numbers[:shown])
    if len(numbers) > shown:
        text += f" and {len(numbers) - shown} more"
    return ("line " if len(numbers) == 1 else "lines ") + text


def read_results(path) -> list[dict]:
    """Complete rows of a results file (typed; [] if there is no file). Damaged lines are skipped
    with one :class:`ResultsFileWarning` naming them."""
    path = Path(path)
    if not path.exists():
        return []
    results = load_results(path)
    if results.damaged:
        one = len(results.damaged) == 1
        warnings.warn(f"{path}: ignoring damaged {describe_lines(results.damaged)} "
                      f"({'not a complete results row' if one else 'not complete results rows'}); "
                      f"{'its configuration' if one else 'their configurations'} will run again",
                      ResultsFileWarning, stacklevel=2)
    return results.rows


def _done(path: Path) -> set[tuple[str, ...]]:
    """The keys of the rows in the file now (no warning: the run warned once when it started)."""
    return {config_key(r) for r in load_results(path).rows}


def check_results(path, what: str = "the results file") -> Path:
    """The results file ``path`` names, resolved (a link's target: the file itself, whose claims and lock
    every name of it shares), checked before any work and without touching anything: a ValueError if it
    is not a regular file that can be written in a folder that exists (none is made), if it has more
    than one name (a hard link: each name would keep claims of its own, see the module docstring), or
    if it is a file whose first line is not the header of a results file (:func:`_check_header`: a model or
    a data file given by mistake, a column deleted or repeated by hand, stays byte for byte as it was). A
    file not there yet is fine."""
    if not isinstance(path, (str, os.PathLike)) or not str(path).strip():
        raise ValueError(f"{what}: expected a file name, got {path!r}")
    check_writable(path, what)
    real = Path(os.path.realpath(path))
    names = real.stat().st_nlink if real.is_file() else 1
    if names > 1:
        raise ValueError(f"{path} has {names} names (hard links): runs through different names would not see each "
                         "other's claims; use one name (or a copy)")
    if real.is_file() and real.stat().st_size:
        with open(real, "rb") as f:
            first = f.readline(1 << 20).removeprefix(codecs.BOM_UTF8).rstrip(b"\r\n")
        _check_header(path, _fields(first) or [], extend=True)
    return real


def _check_header(path, header: list[str], extend: bool = False) -> None:
    """A ValueError naming ``path`` unless ``header`` is a results file's: one that lacks a column every
    results file has (it is not one), repeats a column (one of them would be read, and a rewrite would keep
    only that one), or lacks a setting column that the version which wrote its other columns wrote too
    (:data:`ADDED_COLUMNS`: its rows' settings are not known). ``extend``: also one with a column no results
    file has (:func:`prepare_results`, rewriting the file with every column, would lose it)."""
    missing = [c for c in _REQUIRED if c not in header]
    foreign = [c for c in header if c not in COLUMNS] if extend else []
    if missing or foreign:
        problem = f"it lacks the columns {missing}" if missing else f"it has columns no results file has: {foreign[:5]}"
        raise ValueError(f"{path} is not a deepgp results file: {problem}" + ("; use another --results file"
                                                                              if extend else ""))
    problem = _repeated(header) or _unknown_settings(header)
    if problem:
        raise ValueError(f"{path} {problem}")


def _repeated(header: list[str]) -> str:
    """"has the column 'x' twice in its header; keep one" where a column name occurs more than once (a reader
    by name would keep one of them silently), else ""."""
    repeated = [name for name, count in collections.Counter(header).items() if count > 1]
    if not repeated:
        return ""
    if len(repeated) == 1:
        count = header.count(repeated[0])
        return f"has the column {repeated[0]!r} {'twice' if count == 2 else f'{count} times'} in its header; keep one"
    return f"has the columns {repeated} more than once in its header; keep one of each"


def _unknown_settings(header: list[str]) -> str:
    """The setting columns ``header`` lacks although the newest group of :data:`ADDED_COLUMNS` it has (or
    the first file) had them, named, else "" (the columns it lacks are exactly the groups after its own)."""
    newest = max((i for i, group in enumerate(ADDED_COLUMNS) if set(group) & set(header)), default=-1)
    later = {c for group in ADDED_COLUMNS[newest + 1:] for c in group}
    lost = [c for c in KEY if c not in header and c not in later]
    if not lost:
        return ""
    one = len(lost) == 1
    return (f"lacks the setting column{'' if one else 's'} {lost} (every version that wrote its other columns "
            f"wrote {'it' if one else 'them'}): the value{'' if one else 's'} its rows ran with "
            f"{'is' if one else 'are'} not known; put the column{'' if one else 's'} back")


def prepare_results(path) -> set[tuple[str, ...]]:
    """Create the file with its header if needed; return the keys of the rows already done.

    The file is checked first (:func:`check_results`): one refused is left exactly as it was. A file
    whose last line lacks its newline (a crash mid-write) then gets one, so the next row starts on a
    fresh line and the broken line stays isolated (and ignored). Creating, mending and migrating the
    file happen under a lock on the file itself (:func:`deepgp.storage.locked`), so processes starting
    together do them once.
    """
    path = check_results(path)
    with locked(path, create=True) as fd:
        if os.fstat(fd).st_size == 0:
            _append(fd, path, ",".join(COLUMNS) + "\n")
            return set()
        data = path.read_bytes()
        lines = _split(data)
        header = _fields(lines[0]) or []
        _check_header(path, header, extend=True)  # (checked again: the file may have changed since)
        if not data.endswith(b"\n"):
            _append(fd, path, "\n")
            lines = _split(data + b"\n")
        if tuple(header) != COLUMNS:
            write_bytes(path, _with_all_columns(lines))
    return {config_key(r) for r in read_results(path)}


def _with_all_columns(lines: list[bytes]) -> bytes:
    """A file with fewer columns rewritten with every one (values kept as text, the missing ones filled
    as :func:`_missing` reads them).

    Damaged lines are kept as they are, on the same line numbers: they stay ignored (and reported)."""
    header = _fields(lines[0]) or []
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="")
    writer.writerow(COLUMNS)
    migrated = [out.getvalue().encode()]
    for line in lines[1:]:
        values = _fields(line) if line.strip() else None
        if values is None or len(values) != len(header):
            migrated.append(line)
            continue
        row = dict(zip(header, values))
        out.seek(0)
        out.truncate()
        writer.writerow([row[c] if c in row else _missing(row, c) if c in KEY else "" for c in COLUMNS])
        migrated.append(out.getvalue().encode())
    return b"\n".join(migrated)


# -- claims --------------------------------------------------------------------------------------
def claim_path(results, config: dict) -> Path:
    """The lock file that claims ``config`` for ``results``: named from its key, with a short hash of
    the whole key, in the folder ``<results name>.claims`` beside the results file (the file a link
    names, beside it under its own name)."""
    results = Path(os.path.realpath(results))  # (every name of the file shares its claims)
    digest = hashlib.sha256("\0".join(config_key(config)).encode()).hexdigest()[:8]
    name = re.sub(r"[^\w.+-]+", "_", f"{config['dataset']}-{config['model']}-{config['method']}-s{config['split']}")
    return results.with_name(results.name + ".claims") / f"{name[:80]}-{digest}.lock"


_CLAIM_ATTEMPTS = 20  # (each lost only to another run removing the claims folder in that instant)


class _Claims:
    """This process's claims on the configurations of one results file (see the module docstring)."""

    def __init__(self, results: Path):
        self.results = results
        self.folder = results.with_name(results.name + ".claims")
        self.held: dict[tuple[str, ...], filelock.FileLock] = {}
        self.running_elsewhere = 0  # skipped: claimed by another process
        self.finished_elsewhere = 0  # skipped: another process wrote the row since this run started

    def claimed(self, configs: Iterable[dict]) -> Iterator[dict]:
        """The configurations of ``configs`` this process gets, each claimed only when it is asked for."""
        for config in configs:
            if self._take(config):
                yield config

    def _take(self, config: dict) -> bool:
        lock = self.hold(config)
        if lock is None:
            self.running_elsewhere += 1
            return False
        self.held[config_key(config)] = lock
        if config_key(config) in _done(self.results):  # another process finished it since this run read the file
            self.finished_elsewhere += 1
            self.release(config)
            return False
        return True

    def hold(self, config: dict) -> filelock.FileLock | None:
        """The claim on ``config``, taken now; None where it is held (by another process, or here)."""
        if config_key(config) in self.held:
            return None
        for attempt in range(_CLAIM_ATTEMPTS):
            # A run that finishes removes the folder when it is empty (close): between making it and locking
            # in it, or inside mkdir between "it exists" and "it is a folder". Both are retried.
            try:
                os.mkdir(self.folder)
            except FileExistsError:
                pass
            lock = filelock.FileLock(str(claim_path(self.results, config)), timeout=0)
            try:
                lock.acquire()
                return lock
            except filelock.Timeout:
                return None
            except (FileNotFoundError, FileExistsError):
                if attempt == _CLAIM_ATTEMPTS - 1:
                    raise
        return None

    def release(self, config: dict) -> None:
        """Release the claim on ``config`` and remove its lock file."""
        lock = self.held.pop(config_key(config), None)
        if lock is not None:
            self._drop(lock)

    def _drop(self, lock: filelock.FileLock) -> None:
        # Removed while still held. A process that opened the file before and locks it after this release
        # holds a claim no one else sees, so a configuration may run twice in that instant; its row is
        # written once all the same (_write_once reads the file again under its lock).
        Path(lock.lock_file).unlink(missing_ok=True)
        lock.release()

    def close(self) -> None:
        """Release every claim still held (an interrupted run), and remove the folder if it is empty."""
        for lock in self.held.values():
            self._drop(lock)
        self.held.clear()
        try:
            self.folder.rmdir()
        except OSError:
            pass  # other runs' claims are in it (or stale lock files of killed ones)


# -- running -------------------------------------------------------------------------------------
def variant(row: dict, evaluation: bool = True, reference: dict | None = None) -> str:
    """The row's non-default settings in words ("" for the defaults): what tells two rows of one
    (dataset, model, method) apart in the report. ``evaluation=False`` leaves out how the model was
    measured (:data:`EVALUATION`: the report names those beside the budget) and keeps what it is.
    ``reference``: {setting: value} that a row is compared against in place of the defaults, for the
    models that read the setting (``deepgp report --inner-width input``: those rows are its tables')."""
    unread, own_recipe = frozenset(), False
    if reference:
        unknown = sorted(set(reference) - set(reference_names()))
        if unknown:
            raise ValueError(f"a report's settings are {reference_names()}, not {unknown}")
        # (a setting the model does not read is recorded at its default, whatever the reference; an optimiser
        # setting given with one recipe says nothing of another recipe's rows, which keep their recipe's value)
        unread = unread_settings(row["model"], row["method"])
        own_recipe = row.get("recipe") != reference.get("recipe", SETTINGS["recipe"].default)
    usual_of = {name: reference[name] for name in _LABELLED if reference and name in reference and name not in unread}
    sampling = row.get("inner_sampling", SETTINGS["inner_sampling"].default)
    if sampling not in ("-", usual_of.get("inner_sampling", SETTINGS["inner_sampling"].default)):
        parts = [f"{sampling} inner draws"]
    else:
        parts = []
    if row.get("dtype", "float64") != usual_of.get("dtype", "float64"):
        parts.append(row.get("dtype", "float64"))
    recipe = RECIPE_VALUES.get(row.get("recipe"), {})
    skip = _SHOWN_ELSEWHERE if evaluation else _SHOWN_ELSEWHERE | set(EVALUATION)
    for name, f in SETTINGS.items():
        usual = recipe.get(name, f.default)  # (an optimiser setting: the row's recipe's value)
        if reference and name in reference and name not in unread and not (own_recipe and name in recipe):
            usual = reference[name]
        value = row.get(name, usual)
        if name == "inner_width":  # ("auto" compared as it resolves for the row's data)
            value, usual = _width(value, row.get("n_train")), _width(usual, row.get("n_train"))
        if name not in skip and _text(value) != _text(usual):
            parts.append(f"{name}={_text(value)}")
    return ", ".join(parts)


# settings that change how a model is measured, not the model: predictive draws per test point and
# the test points of the Shapiro-Wilk test
EVALUATION = ("predict_samples", "shapiro_points")
# settings the report shows elsewhere: in the group's name, its budget lines and its runs (or above);
# not a reference's (variant)
_SHOWN_ELSEWHERE = {"model", "method", "seed", "iterations", "num_inducing", "test_limit", "protocol", "num_samples",
                    "inner_sampling", "dtype"}
_LABELLED = ("inner_sampling", "dtype")  # of those, named in a variant's own words ("joint inner draws", "float32")


def reference_names() -> list[str]:
    """The settings a report can be drawn at (:func:`variant`'s ``reference``): those it tells rows apart by,
    but how they were measured and what the report shows elsewhere (M, K, the budget, the protocol)."""
    return [name for name in SETTINGS if name in _LABELLED or (name not in _SHOWN_ELSEWHERE and name not in EVALUATION)]


def _describe(row: dict) -> str:
    extra = variant(row)
    return (f"{row['dataset']} {row['model']} {row['method']} split {row['split']} seed {row['seed']}"
            + (f" ({extra})" if extra else ""))


def _init_worker(parent: int | None = None) -> None:
    """One torch thread; in a worker process (``parent``: the process that started it), also ending
    with its parent (:func:`_end_with`)."""
    torch.set_num_threads(1)
    if parent is not None:
        _end_with(parent)


class _Stopped(BaseException):
    """Raised in a worker told to stop (SIGTERM: from its parent, or from the kernel when the parent
    died): it unwinds the configuration running there, whose temporary files go with it."""


_running = False  # in a worker: whether a configuration is running there (what a stop unwinds)


def _stop_worker(signum, frame) -> None:
    if _running:
        raise _Stopped
    os._exit(128 + signum)  # idle: nothing to unwind


def _end_with(parent: int) -> None:
    """Make this worker process end when ``parent`` does, however it ends: SIGKILL runs no code of the
    parent's, so the worker asks the kernel to send it SIGTERM when its parent dies (Linux's
    PR_SET_PDEATHSIG), or elsewhere watches for a new parent once a second. Ctrl-C is the parent's to
    handle: the parent stops its workers (:func:`_run_pool`)."""
    import signal
    import threading

    signal.signal(signal.SIGTERM, _stop_worker)  # (a forked worker inherits the parent's handler)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    watched = False
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            pr_set_pdeathsig = 1
            watched = ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0) == 0
        except (OSError, AttributeError):
            watched = False
    if not watched:
        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(1.0)
            os.kill(os.getpid(), signal.SIGTERM)

        threading.Thread(target=watch, daemon=True).start()
    if os.getppid() != parent:  # it died before the request above
        os._exit(128 + signal.SIGTERM)


def _in_worker(run: Callable[[dict], list[dict]], config: dict) -> list[dict]:
    """``run(config)`` in a worker process, which exits once it is stopped (:func:`_end_with`)."""
    global _running
    _running = True
    try:
        return run(config)
    except _Stopped:
        os._exit(143)  # (143 = 128 + SIGTERM)
    finally:
        _running = False


def run_benchmark(
    configs: list[dict], results, jobs: int = 1, executor: str = "local", scheduler: str | None = None,
    log: Callable[[str], None] | None = None, run: Callable[[dict], list[dict]] = run_config, debug: bool = False,
) -> int:
    """Run every configuration neither in ``results`` nor claimed by another process; returns the
    number of failed ones. ``run`` returns a configuration's rows (:func:`run_config`).

    Prints one progress line per row written. A snapshot row already in the file is not written
    again. A failing configuration is reported (``debug``: with its traceback, on standard error) and
    left out of the file, so a later run retries it.
    """
    log = log or logging.getLogger(__name__).info
    if executor == "dask":
        dask = _import_dask()  # a missing extra stops the run before anything is written or claimed
    elif executor != "local":
        raise ValueError(f"executor must be 'local' or 'dask', got {executor!r}")
    given, results = results, check_results(results)  # (the file itself: the names of one file share its claims)
    done = prepare_results(results)
    todo = list({config_key(c): c for c in configs if config_key(c) not in done}.values())
    log(f"{len(configs)} configurations, {len(configs) - len(todo)} already in {given}, {len(todo)} to run")
    if not todo:
        return 0
    claims = _Claims(results)
    failed = 0
    t0 = time.perf_counter()
    finished = 0

    def record(config: dict, rows: list[dict] | None, err: BaseException | None) -> None:
        """Write (or report) a finished configuration's rows, then release its claim."""
        nonlocal failed, finished
        try:
            finished += 1
            prefix = f"[{finished}/{len(todo)} {time.perf_counter() - t0:7.0f}s]"
            if err is not None:
                failed += 1
                log(f"{prefix} FAILED {_describe(config)}: {type(err).__name__}: {' '.join(str(err).split())}")
                if debug:
                    traceback.print_exception(type(err), err, err.__traceback__, file=sys.stderr)
                return
            for row in rows:
                at = f" at {row['iterations']} iterations" if len(rows) > 1 else ""
                if _write_once(results, row, claims, own=row is rows[-1]):
                    log(f"{prefix} {_describe(row)}{at}: kde {_shown(row['test_loglik_kde'])} mixture "
                        f"{_shown(row['test_loglik_mixture'])} rmse {_shown(row['test_rmse'])} W "
                        f"{_shown(row['shapiro_median'])} bound {_shown(row['bound'], '.4g')} ({row['seconds']:.0f}s)")
                elif row is rows[-1]:
                    log(f"{prefix} {_describe(row)}{at}: not written, already in {given}")
        finally:
            claims.release(config)

    try:
        if executor == "dask":
            _run_dask(claims.claimed(todo), scheduler, record, run, dask)
        elif jobs <= 1:
            _init_worker()
            for config in claims.claimed(todo):
                try:
                    rows = run(config)
                except Exception as err:  # noqa: BLE001 — one bad configuration must not stop the grid
                    record(config, None, err)
                else:
                    record(config, rows, None)
        else:
            _run_pool(claims.claimed(todo), jobs, record, run)
    finally:
        claims.close()
    if claims.finished_elsewhere:
        n = claims.finished_elsewhere
        log(f"{n} configuration{'s were' if n > 1 else ' was'} finished by another process meanwhile")
    if claims.running_elsewhere:
        n = claims.running_elsewhere
        log(f"{n} configuration{'s were' if n > 1 else ' was'} skipped: another process was running "
            f"{'them' if n > 1 else 'it'} (a rerun picks up any it did not finish)")
    return failed


def _write_once(results: Path, row: dict, claims: _Claims, own: bool) -> bool:
    """Append ``row`` unless the file has it; whether it was written. ``own``: the row of a configuration
    this process claimed; else a snapshot's row, written only where its claim can be taken now (a process
    running that budget writes it itself). The file is read again under its lock, right before the
    write: a row another process wrote meanwhile is not written twice."""


    lock = None if own else claims.hold(row)
    if not own and lock is None:
        return False
    try:
        with locked(results) as fd:
            if config_key(row) in _done(results):
                return False
            _append(fd, results, format_row(row))
            return True
    finally:
        if lock is not None:
            claims._drop(lock)


def _run_pool(configs: Iterator[dict], jobs: int, record, run) -> None:
    """Run ``configs`` in a pool of ``jobs`` processes, taking the next one as one finishes."""
    # fork (where available) saves each worker re-importing torch (~10 s on a loaded core). With a
    # CPU build it is safe because the parent is put on one thread first and never runs a parallel
    # region, so there is no OpenMP pool to inherit in a broken state (the known fork + torch hang).
    _init_worker()
    # A CUDA build of torch cannot fork once autograd has run in the parent (its engine keeps
    # device threads: "Unable to handle autograd's threading in combination with fork"), and CUDA
    # itself never survives a fork: with a CUDA build, workers spawn and import torch afresh.
    method = "fork" if "fork" in mp.get_all_start_methods() and torch.version.cuda is None else "spawn"
    others = set(mp.active_children())
    pool = ProcessPoolExecutor(jobs, mp_context=mp.get_context(method), initializer=_init_worker,
                               initargs=(os.getpid(),))
    try:
        # the workers start (all of them, at the first task) before any claim is taken, so that no
        # forked worker inherits a claim's lock and keeps it alive after this process is killed
        pool.submit(os.getpid).result()
        running: dict = {}

        def fill() -> None:
            # claim only what can start now: the rest stays free for other processes to take
            for config in itertools.islice(configs, jobs - len(running)):
                try:
                    running[pool.submit(_in_worker, run, config)] = config
                except BrokenProcessPool as err:  # a worker died: every configuration left fails alike
                    record(config, None, err)

        fill()
        while running:
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in finished:
                err = fut.exception()
                record(running.pop(fut), None if err else fut.result(), err)
            fill()
    except BaseException:
        # Ctrl-C, SIGTERM or an error here: the workers stop now, not after their configurations
        _stop(set(mp.active_children()) - others)
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()


def _stop(workers, grace: float = 5.0) -> None:
    """Stop worker processes: SIGTERM (each unwinds its configuration, :func:`_end_with`), then SIGKILL
    for any still there after ``grace`` seconds."""
    for p in workers:
        p.terminate()
    deadline = time.monotonic() + grace
    for p in workers:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join(1.0)


def _import_dask():
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError as err:
        raise ImportError("--executor dask needs dask.distributed: pip install 'deepgp-bench[distributed]'") from err
    return Client, LocalCluster, as_completed


def _run_dask(configs: Iterator[dict], scheduler: str | None, record, run, dask) -> None:
    """Run ``configs`` on a Dask cluster, at most as many at once as it has worker threads."""
    Client, LocalCluster, as_completed = dask
    cluster = None
    if not scheduler or scheduler == "local":
        # a convenience for trying the path on one machine; real use passes a scheduler address
        cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=False)
        scheduler = cluster.scheduler_address
    try:
        with Client(scheduler) as client:
            pending = as_completed()
            config_of: dict = {}

            def fill() -> None:
                # asked each time: workers may join or leave while the grid runs
                capacity = max(1, sum(client.nthreads().values()))
                for config in itertools.islice(configs, max(0, capacity - len(config_of))):
                    fut = client.submit(run, config, pure=False)
                    config_of[fut.key] = config
                    pending.add(fut)

            fill()
            for fut in pending:
                err = fut.exception()
                record(config_of.pop(fut.key), None if err else fut.result(), err)
                fill()
    finally:
        if cluster is not None:
            cluster.close()
