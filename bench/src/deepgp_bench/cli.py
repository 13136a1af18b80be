"""``benchmark`` (the UCI runner) and ``report`` (Markdown beside the paper's table): the commands of
``deepgp-bench``, which ``deepgp benchmark`` and ``deepgp report`` run too (this package adds them to the
``deepgp`` command through the entry-point group ``deepgp.commands``)."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import signal
import sys
import threading
from pathlib import Path

from deepgp import cli
from deepgp.arguments import Parser, add_settings, comma_items, positive_int, positive_ints
from deepgp.config import RECIPE_ITERATIONS, ModelConfig, TrainConfig, settings_of
from deepgp.datasets.uci import find_uci, list_uci, search_dirs
from deepgp.plotting import check_figure_path, save_figure
from deepgp.storage import check_output, write_bytes

from . import __version__, compare
from .config import BenchmarkConfig, SGHMCConfig
from .report import REPORT, against_paper_figure, write_report
from .runner import (
    BASELINES,
    CONFIGS,
    DATASETS,
    METRICS,
    check_results,
    make_configs,
    model_methods,
    parse_splits,
    reference_names,
    run_benchmark,
)

# the runner's progress, one line each on standard output as it happens
_progress = functools.partial(print, flush=True)


def build_parser() -> argparse.ArgumentParser:
    """``deepgp-bench``'s parser: the commands ``benchmark`` and ``report``."""
    parser = Parser(prog="deepgp-bench", description="The paper's UCI benchmark (deepgp-bench): run it, report it.",
                    epilog=f"Errors are one line; --debug (anywhere) or {cli.DEBUG_ENV}=1 shows the traceback.")
    parser.add_argument("--version", action="version", version=f"deepgp-bench {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    register(sub)
    return parser


def main(argv=None) -> int:
    """``deepgp-bench``: parse the command line and run its command (errors as ``deepgp``'s)."""
    return cli.run(build_parser, argv, prog="deepgp-bench")


def register(sub) -> None:
    """Add ``benchmark`` and ``report`` to the sub-parsers ``sub``."""
    register_benchmark(sub)
    register_report(sub)


def register_benchmark(sub) -> None:
    """Add ``benchmark`` (the entry point ``deepgp benchmark`` loads)."""
    p = sub.add_parser(
        "benchmark",
        help=cli.PLUGIN_HELP["benchmark"],
        description="Train and evaluate every (dataset, model, method, split) not yet in --results; "
        "one row per finished configuration (and per --snapshots budget), appended atomically (rerun the same "
        "command to resume). Several runs may share one --results file: each takes the configurations the others "
        "are not running.",
    )
    p.add_argument("--datasets", default=",".join(DATASETS),
                   help="comma-separated names, or 'all': every NAME.csv.gz in --data-dir (without it: in "
                   "$DEEPGP_DATA and the cache), smallest file first "
                   "(default: the 10 most used in the paper's Table 1)")
    p.add_argument("--models", default=",".join(f"{model}:{method}" for model, method in CONFIGS + BASELINES),
                   help="comma-separated specs; MODEL:METHOD fixes the method, a bare MODEL is crossed with --methods "
                   "(iw skipped for models without LV). Default: the paper's Table S1, i.e. the nine columns of its "
                   "Table 1 and the baselines Linear, CVAE-50, CVAE-100-100 (any widths; vi or iw), GP:sghmc, "
                   "GP-GP:sghmc, GP-GP-GP:sghmc")
    p.add_argument("--methods", default="vi,iw", help="methods for bare models (default vi,iw)")
    p.add_argument("--splits", type=_splits, default="0-4",
                   help="'0-4' or '0,2' (with --protocol paper: the seeds on split 0)")
    # one option per setting, generated from the declarations (deepgp.config): model and method come
    # from --models, the seed from --splits; the budget defaults to the recipe's (RECIPE_ITERATIONS)
    add_settings(p, BenchmarkConfig)
    add_settings(p, ModelConfig, skip=("model",))
    add_settings(p, TrainConfig, skip=("method", "seed"), defaults={"iterations": None}, helps={"iterations": (
        "training iterations (one minibatch each); default: the recipe's budget, " + ", ".join(
            f"{n:,} for {r}" for r, n in RECIPE_ITERATIONS.items()))})
    add_settings(p, SGHMCConfig)
    p.add_argument("--snapshots", type=_snapshots, default=(),
                   help="comma-separated budgets below --iterations, e.g. 2000,5000: each run also writes the rows "
                   "of these budgets (as runs with --iterations set to them would), to tell a gap closing with "
                   "budget from one due to overfitting. Not for the baselines (Linear, CVAE, sghmc)")
    p.add_argument("--data-dir", default=None, help="folder of NAME.csv.gz (else $DEEPGP_DATA, else the cache)")
    p.add_argument("--device", default=None, help="torch device for training and evaluation, e.g. cuda (default: cpu)")
    p.add_argument("--jobs", type=positive_int, default=1, help="parallel processes, one torch thread each")
    p.add_argument("--executor", choices=("local", "dask"), default="local")
    p.add_argument("--scheduler", default=None, help="Dask scheduler address (tcp://host:8786); 'local' = LocalCluster")
    p.add_argument("--results", default="results.csv", help="results CSV (created, or resumed)")
    p.set_defaults(func=_benchmark)


def register_report(sub) -> None:
    """Add ``report`` (the entry point ``deepgp report`` loads)."""
    r = sub.add_parser("report", help=cli.PLUGIN_HELP["report"])
    r.add_argument("results", nargs="?", default=None,
                   help="results CSV written by `deepgp benchmark` (not with --peers)")
    r.add_argument("--paper", default=None,
                   help="the paper's Table 1 or S1 as CSV (dataset, MODEL_METHOD, MODEL_METHOD_se; S1 also Linear, "
                   "CVAE-50, ...): with S1 the report ends with every method side by side")
    r.add_argument("--shapiro", default=None,
                   help="the paper's Table S2 as CSV (table_s2_shapiro_wilk.csv): adds the median Shapiro-Wilk W "
                   "of ours beside it")
    r.add_argument("--metric", default="test_loglik_kde", choices=METRICS,
                   help="column to compare (default: the paper's KDE protocol)")
    r.add_argument("--out", default=None, metavar="FILE.md", help="write the Markdown here (default: stdout)")
    r.add_argument("--figure", default=None, metavar="FILE.png",
                   help="also draw ours − the paper per data set, one panel per column (needs --paper); with --peers, "
                   "the test log density against wall seconds per data set (.png or .pdf)")
    t = r.add_argument_group(
        "time to quality against the peers", "--peers FILE instead of a results CSV: per data set and split, the best "
        "peer (NGBoost, ensemble, MDN, spline flow), deepgp's curve and the training seconds at which it first passes "
        "that peer (deepgp_bench.compare)")
    t.add_argument("--peers", default=None, metavar="FILE.jsonl",
                   help="the peers' rows (python -m deepgp_bench.peers.run), e.g. "
                   "benchmarks/results/peers_quality.jsonl; its deepgp rows (peer: deepgp) are curves of the same run")
    t.add_argument("--curves", default=None, metavar="FILE.jsonl",
                   help="deepgp's curves (benchmarks/time_to_quality.py), e.g. benchmarks/results/time_to_quality.jsonl"
                   "; a split's same-run curve in --peers is taken first")
    t.add_argument("--datasets", default=None, help="comma-separated data sets to show (default: every one with both)")
    add_reference_settings(r)
    r.set_defaults(func=_report)


def add_reference_settings(parser: argparse.ArgumentParser, helps: dict | None = None) -> None:
    """The options naming the settings whose rows a report's tables show (:func:`reference_of`), spelt as
    ``deepgp benchmark`` takes them; only those given are set. The model's and the optimiser's settings:
    not M, K, the inner draws, the dtype or how rows were measured, which each row's label names."""
    names = reference_names()
    shown = parser.add_argument_group(
        "the rows the tables show", "those run with the settings given here (as `deepgp benchmark` took them), any "
        "other at its default; a row at other settings is named apart by them. Default: the defaults")
    for config in (BenchmarkConfig, ModelConfig, TrainConfig, SGHMCConfig):
        skip = [f.name for f in dataclasses.fields(config) if f.name not in names]
        add_settings(shown, config, skip=skip, defaults=dict.fromkeys(names, argparse.SUPPRESS), helps=helps)


def reference_of(args: argparse.Namespace) -> dict:
    """{setting: value} given by :func:`add_reference_settings`'s options, checked by their settings' own
    rules (as ``deepgp benchmark`` checks them): a ValueError names one it refuses."""
    reference = {name: getattr(args, name) for name in reference_names() if hasattr(args, name)}
    for config in (BenchmarkConfig, ModelConfig, TrainConfig, SGHMCConfig):
        config(**settings_of(config, reference))
    return reference


def _splits(text: str) -> list[int]:
    """--splits as a list, or argparse's one-line error naming the option."""
    try:
        return parse_splits(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _snapshots(text: str) -> tuple[int, ...]:
    """--snapshots as integers >= 1 (checked against --iterations once that is known)."""
    return positive_ints(text, like="2000,5000")


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled as Ctrl-C is: the rows written stay, claims are released, workers stop."""


def _terminate(signum, frame):
    raise Terminated


def _benchmark(args) -> int:
    if threading.current_thread() is not threading.main_thread():  # (only the main thread handles signals)
        return _run_benchmark(args)
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        return _run_benchmark(args)
    except Terminated:
        print("deepgp benchmark: terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run_benchmark(args) -> int:
    check_results(args.results, "--results")  # before any work; touches nothing
    if args.data_dir is not None and not os.path.isdir(args.data_dir):  # (not $DEEPGP_DATA in its place)
        raise ValueError(f"--data-dir {args.data_dir!r} is not a folder")
    iterations = RECIPE_ITERATIONS[args.recipe] if args.iterations is None else args.iterations
    above = [s for s in args.snapshots if s >= iterations]
    if above:  # here, not in argparse: the default --iterations is the recipe's
        raise ValueError(f"--snapshots must be below --iterations ({iterations}), got {','.join(map(str, above))}")
    datasets = list(dict.fromkeys(comma_items(args.datasets, "--datasets")))  # (a name given twice runs once)
    models, methods = comma_items(args.models, "--models"), comma_items(args.methods, "--methods")
    if datasets == ["all"]:
        datasets = sorted(list_uci(args.data_dir), key=lambda d: find_uci(d, args.data_dir).stat().st_size)
        if not datasets:
            folders = args.data_dir or ", ".join(map(str, search_dirs()))
            raise FileNotFoundError(f"--datasets all: no NAME.csv.gz in {folders}")
    for d in datasets:
        find_uci(d, args.data_dir)  # fail now, with where it looked, not inside a worker later
    pairs = model_methods(models, methods)
    settings = {**settings_of(BenchmarkConfig, vars(args)), **settings_of(ModelConfig, vars(args)),
                **settings_of(TrainConfig, vars(args)), **settings_of(SGHMCConfig, vars(args))}
    del settings["iterations"]
    configs = make_configs(datasets, pairs, args.splits, iterations, data_dir=args.data_dir, device=args.device,
                           snapshots=args.snapshots, **settings)
    failed = run_benchmark(configs, args.results, jobs=args.jobs, executor=args.executor, scheduler=args.scheduler,
                           log=_progress, debug=args.debug)
    if failed:
        print(f"{failed} configuration(s) failed; rerun the same command to retry them", file=sys.stderr)
    return 1 if failed else 0


def _input_file(path: str, option: str) -> None:
    """A ValueError (FileNotFoundError) naming ``option`` unless ``path`` names a regular file."""
    if not path.strip():
        raise ValueError(f"{option}: expected a file name, got {path!r}")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{option} {path}: no such file")
    if not os.path.isfile(path):
        raise ValueError(f"{option} {path} is not a file (a folder or a pipe?)")


def _check_outputs(args, inputs: list) -> None:
    """Every output of ``report``, before any work: not a folder, a read-only file, one of the ``inputs``,
    the other output, or in a missing folder (none is made)."""
    if args.out is not None:
        check_output(args.out, "the report", inputs, [("the figure", args.figure)], kind=REPORT)
    if args.figure is not None:
        check_figure_path(args.figure, inputs, [("the report", args.out)])
    if args.out is not None and Path(args.out).suffix.lower() != ".md":  # (a .json or .csv would hold Markdown)
        raise ValueError(f"--out: the report is Markdown: give a file ending in .md, got {Path(args.out).name!r}")


def _write(args, text: str, figure) -> int:
    """The report's outputs, once every check has passed and the figure (if any) is drawn: ``text`` to
    --out (or standard output), ``figure`` to --figure."""
    if args.out is None:
        sys.stdout.write(text)
    else:
        write_bytes(args.out, text.encode())
        print(f"wrote {args.out}")
    if figure is not None:
        save_figure(figure, args.figure)
        print(f"wrote {args.figure}")
    return 0


def _report(args) -> int:
    if args.peers is not None:
        return _compare(args)
    if args.results is None:
        raise ValueError("give a results CSV written by `deepgp benchmark`, or --peers FILE")
    for option in ("--curves", "--datasets"):
        if getattr(args, option[2:]) is not None:
            raise ValueError(f"{option} goes with --peers (the time to quality against the peers)")
    for option, path in (("the results file", args.results), ("--paper", args.paper), ("--shapiro", args.shapiro)):
        if path is not None:  # ("" is a name given, not no --paper)
            _input_file(path, option)
    if args.figure is not None and args.paper is None:
        raise ValueError("--figure draws ours against the paper: give its table with --paper")
    _check_outputs(args, [args.results, args.paper, args.shapiro])
    figure = None
    reference = reference_of(args)
    text = write_report(args.results, None, args.paper, args.metric, args.shapiro, reference)
    if args.figure is not None:  # drawn before anything is written: a figure that cannot be is an error alone
        figure = against_paper_figure(args.results, args.paper, args.metric, reference=reference)
    return _write(args, text, figure)


def _compare(args) -> int:
    """``report --peers``: :mod:`deepgp_bench.compare`'s document, and with --figure its figure."""
    given = [name for name, value in (("results file", args.results), ("--paper", args.paper),
                                      ("--shapiro", args.shapiro)) if value is not None]
    given += [f"--{name.replace('_', '-')}" for name in reference_of(args)]
    if args.metric != "test_loglik_kde":
        given.append("--metric")
    if given:
        raise ValueError(f"--peers: the comparison with the peers takes no {', '.join(given)} (the report of a "
                         "results CSV does)")
    datasets = None
    if args.datasets is not None:
        datasets = list(dict.fromkeys(comma_items(args.datasets, "--datasets")))
    for option, path in (("--peers", args.peers), ("--curves", args.curves)):
        if path is not None:
            _input_file(path, option)
    _check_outputs(args, [args.peers, args.curves])
    peers = compare.read_peers(args.peers)
    curves = compare.read_curves(args.curves) if args.curves is not None else None
    comparisons = compare.compare(peers, curves, datasets)
    text = compare.render(comparisons, args.peers, args.curves, peers.left_out)
    figure = compare.figure(comparisons) if args.figure is not None else None  # (drawn before anything is written)
    return _write(args, text, figure)
