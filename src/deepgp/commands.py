"""User sub-commands of the ``deepgp`` CLI: demo, fit, predict, evaluate, convert, plot.

Data files are CSV (or gzip-compressed CSV, ``.csv.gz``) with a header row; columns are chosen
by name. Models are :class:`~deepgp.DeepGPRegressor` files (``deepgp fit`` / ``save``), which
carry their input and target column names. User errors raise ValueError / FileNotFoundError,
which :mod:`deepgp.cli` prints as one line with exit status 2.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import sys
from pathlib import Path

import numpy as np

from . import kinds, legacy, storage
from .arguments import HelpFormatter, add_settings, at_least, comma_items, count, positive_int, seed
from .config import ModelConfig, TrainConfig, parse_spec, settings_of
from .demo import config_from_args, run_demo, score_table
from .estimator import DeepGPRegressor, check_quantile_draws
from .memory import MemoryBudgetError
from .metrics import regressor_metrics, regressor_pointwise
from .model import DeepGP
from .outputs import column_text, json_text, number_text
from .plotting import (
    check_figure_path,
    check_grid_memory,
    marginals_figure,
    posterior_figure,
    prior_figure,
    save_figure,
)
from .prediction import check_memory
from .storage import check_output, write_bytes
from .tables import choose_inputs, read_csv, select
from .validation import torch_dtype

DEFAULT_QUANTILES = "0.05,0.5,0.95"


def _names(text: str | None, option: str) -> list[str] | None:
    """``option``'s comma-separated names (None where not given); an empty item is refused, not dropped."""
    return None if text is None else comma_items(text, option)


def _levels(text: str) -> list[float]:
    try:
        q = [float(s) for s in text.split(",")]  # (an empty item is an error, not a level dropped)
    except ValueError:
        raise ValueError(f"--quantiles must be comma-separated numbers in [0, 1], got {text!r}") from None
    if not q or any(not 0 <= v <= 1 for v in q):
        raise ValueError(f"--quantiles must be comma-separated numbers in [0, 1], got {text!r}")
    if len(set(q)) != len(q):
        raise ValueError(f"--quantiles names a level twice, got {text!r}")
    return q


def level_name(q: float) -> str:
    """A quantile column's name: "q" and the level, as short as reads back as the level ("q0.05",
    "q0.10000001"), so that distinct levels get distinct names."""
    short = f"{q:g}"
    return "q" + (short if float(short) == q else repr(q))


def _unique_names(paths) -> list[str]:
    """Panel titles for model files: their names, or their paths where two names are the same."""
    stems = [Path(p).stem for p in paths]
    return [stem if stems.count(stem) == 1 else str(p) for stem, p in zip(stems, paths)]


def load_regressor(path, predict_samples: int | None = None):
    """A model file written by ``deepgp fit`` (a DeepGPRegressor with its column names), predicting with
    ``predict_samples`` draws where given (``--predict-samples``), else with the file's."""
    reg = DeepGPRegressor.load(path)
    if not getattr(reg, "columns_", None):
        raise ValueError(f"{path} has no column names; it was saved from Python, not by `deepgp fit`")
    if predict_samples is not None:
        reg.predict_samples = predict_samples
    return reg


def _model_data(reg, path, need_target: bool, lines: bool = False):
    """X [N, D] (and y [N]) from the CSV at ``path`` using the model's column names; with ``lines``,
    also the file line of each row [N]. A value that the model's dtype cannot hold once standardised
    (1e39 for a float32 model) is refused by its line and column."""
    columns = read_csv(path)
    names = reg.columns_["inputs"]
    missing = [n for n in names if n not in columns]
    if missing:
        raise ValueError(f"{path} lacks the model's input column(s) {missing}")
    X = select(columns, names)
    rows = columns[names[0]].lines
    _check_representable(reg, path, names, X, reg.x_scaler_, rows)
    y = None
    if need_target:
        target = reg.columns_["target"]
        if target not in columns:
            raise ValueError(f"{path} lacks the target column {target!r} needed to evaluate")
        y = select(columns, [target])[:, 0]
        _check_representable(reg, path, [target], y[:, None], reg.y_scaler_, rows)
    return (X, y, rows) if lines else (X, y)


def _check_representable(reg, path, names, A, scaler, rows) -> None:
    """A ValueError naming the first line and column of A [N, len(names)] whose standardised value is not
    finite in the model's dtype (the model would read it as ±inf)."""
    dtype = str(torch_dtype(reg.dtype)).removeprefix("torch.")
    with np.errstate(over="ignore", invalid="ignore"):
        standardised = scaler.transform(A).astype(dtype)
    bad = ~np.isfinite(standardised)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise ValueError(f"{path}, line {rows[i]}: {names[j]!r} is {float(A[i, j])!r}, beyond what the model's {dtype} "
                         f"arithmetic holds once standardised ({int(bad.sum())} such value(s))"
                         + ("; fit a float64 model" if dtype == "float32" else ""))


def _finite_rows(path, rows, values: dict, what: str) -> None:
    """A ValueError naming the file lines where any of ``values`` ({name: [N]}) is not a finite number,
    instead of writing NaN or inf as a result."""
    bad = ~np.isfinite(np.column_stack(list(values.values()))).all(1)
    if bad.any():
        lines = ", ".join(map(str, rows[bad][:5])) + (f" and {int(bad.sum()) - 5} more" if bad.sum() > 5 else "")
        raise ValueError(f"{path}, line(s) {lines}: the model's {what} there are not finite numbers "
                         "(inputs or targets beyond its arithmetic); nothing was written")


# -- registration -------------------------------------------------------------------------------
def register(sub) -> None:
    """Add demo / fit / predict / evaluate / convert / plot to the CLI's sub-parsers."""
    for add in (_add_demo, _add_fit, _add_predict, _add_evaluate, _add_convert, _add_plot):
        add(sub)


def _add_demo(sub) -> None:
    """The parser of ``deepgp demo``."""
    p = sub.add_parser("demo", formatter_class=HelpFormatter,
                       help="fit four models to the 'DGP' letters, print a table, draw them",
                       description="Fit GP, GP-GP (VI), LV-GP and LV-GP-GP (IW) to the paper's 'DGP' letters set; "
                       "print test log densities and write DIR/demo.png with each posterior density.")
    p.add_argument("--out", default="deepgp-demo", metavar="DIR", help="folder for demo.png and scores.json")
    p.add_argument("--iterations", type=positive_int, default=None,
                   help="training iterations per model (default: 2000; 200 with --quick; 40000 with --long)")
    p.add_argument("--models", default="GP,GP-GP,LV-GP,LV-GP-GP", help="comma-separated subset of the four models")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--quick", action="store_true", help="a smaller budget that runs in under a minute")
    budget.add_argument("--long", action="store_true",
                        help="the README's figure: the paper's RBF kernel, 40,000 iterations, the step sizes annealed "
                             "over them (about 23 minutes on 2 idle cores)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=_demo)


def _add_fit(sub) -> None:
    """The parser of ``deepgp fit``: one option per ModelConfig and TrainConfig setting."""
    p = sub.add_parser("fit", formatter_class=HelpFormatter, help="fit a model to a CSV file and save it",
                       description="Fit a deep GP to DATA (CSV or CSV.gz with a header) and save it to --out.")
    p.add_argument("data", help="training data, .csv or .csv.gz with a header row")
    p.add_argument("--target", required=True, help="name of the column to predict")
    p.add_argument("--inputs", default=None, help="comma-separated input columns (default: every other numeric column)")
    add_settings(p, ModelConfig)  # --model, --num-inducing, --kernel, ...: one option per setting
    add_settings(p, TrainConfig)
    p.add_argument("--predict-samples", type=positive_int, default=None,
                   help="Monte Carlo draws per point that the saved model predicts with (default: DeepGPRegressor's)")
    p.add_argument("--device", default=None, help="torch device to train on, e.g. cuda (default: the CPU)")
    p.add_argument("--out", default="model.safetensors", help="model file to write (checked before training)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_fit)


def _add_predict(sub) -> None:
    """The parser of ``deepgp predict``."""
    p = sub.add_parser("predict", formatter_class=HelpFormatter, help="predict with a saved model on a CSV file",
                       description="Predictive mean, standard deviation, quantiles and optional samples for "
                       "every row of DATA, written as CSV (one row per input row, same order).")
    p.add_argument("model", help="model file from `deepgp fit`")
    p.add_argument("data", help="CSV / CSV.gz containing the model's input columns")
    p.add_argument("--out", default="-", help="output CSV file ('-': standard output)")
    p.add_argument("--quantiles", default=DEFAULT_QUANTILES, help="comma-separated quantile levels in [0, 1]")
    p.add_argument("--samples", type=count, default=0, help="also write this many predictive draws per row")
    p.add_argument("--predict-samples", type=positive_int, default=None,
                   help="Monte Carlo draws for mean/std/quantiles (default: the model's)")
    p.set_defaults(func=_predict)


def _add_evaluate(sub) -> None:
    """The parser of ``deepgp evaluate``."""
    p = sub.add_parser("evaluate", formatter_class=HelpFormatter,
                       help="test log density, RMSE and CRPS of a saved model",
                       description="Mean test log predictive density (units of the target), RMSE of the "
                       "predictive mean and sample-based CRPS on DATA, which must hold the target column.")
    p.add_argument("model", help="model file from `deepgp fit`")
    p.add_argument("data", help="CSV / CSV.gz with the model's input and target columns")
    p.add_argument("--json", nargs="?", const="-", default=None, metavar="FILE",
                   help="write the metrics as JSON (to FILE, or standard output when no FILE is given)")
    p.add_argument("--predict-samples", type=positive_int, default=None,
                   help="Monte Carlo draws (default: the model's)")
    p.set_defaults(func=_evaluate)


def _add_convert(sub) -> None:
    """The parser of ``deepgp convert``."""
    p = sub.add_parser("convert", formatter_class=HelpFormatter,
                       help="convert a deepgp 0.1 model file (a pickle) to the safe format",
                       description="Read OLD, a model file written by deepgp 0.1 (a pickle: opening it runs any code "
                       "it holds), and write it to NEW in the current format, which opening never runs code from. "
                       "Only for a file whose origin you trust, which --trust confirms.")
    p.add_argument("old", help="a deepgp 0.1 model file (DeepGP.save, DeepGPRegressor.save or deepgp fit)")
    p.add_argument("new", help="the file to write (safetensors)")
    p.add_argument("--trust", action="store_true", help="confirm that OLD comes from a source you trust")
    p.set_defaults(func=_convert)


def _add_plot(sub) -> None:
    """The parser of ``deepgp plot`` and its kinds: prior, posterior, marginals."""
    p = sub.add_parser("plot", help="figures: prior draws, posterior densities, predictive marginals",
                       description="The paper's figures as PNG or PDF (chosen by the --out extension).")
    kinds = p.add_subparsers(dest="kind", required=True, metavar="KIND")
    for add in (_add_plot_prior, _add_plot_posterior, _add_plot_marginals):
        add(kinds)


def _add_plot_prior(kinds) -> None:
    """The parser of ``deepgp plot prior``."""
    q = kinds.add_parser("prior", formatter_class=HelpFormatter,
                         help="prior draws on a 1-D input (paper Fig. 3, S6-S9)",
                         description="Independent prior draws of each model on a 1-D input; LV models are drawn "
                         "for a grid of w values, which shows their stochastic fan.")
    q.add_argument("--models", default="GP,GP-GP,LV-GP,LV-GP-GP", help="comma-separated model specs, one row each")
    q.add_argument("--draws", type=positive_int, default=4, help="independent draws per model (columns)")
    q.add_argument("--seed", type=seed, default=0)
    q.add_argument("--out", default="prior.png", help="figure file (.png or .pdf)")
    q.set_defaults(func=_plot_prior)


def _add_plot_posterior(kinds) -> None:
    """The parser of ``deepgp plot posterior``."""
    q = kinds.add_parser("posterior", formatter_class=HelpFormatter,
                         help="posterior density images of 1-input models (Fig. 1, 5)",
                         description="p(y | x) as an image for each MODEL (models with one input column).")
    q.add_argument("models", nargs="+", help="model files from `deepgp fit`")
    q.add_argument("--data", default=None, help="CSV to overlay as points (and to set the axis ranges)")
    q.add_argument("--samples", type=positive_int, default=500, help="Monte Carlo draws per x")
    q.add_argument("--out", default="posterior.png", help="figure file (.png or .pdf)")
    q.set_defaults(func=_plot_posterior)


def _add_plot_marginals(kinds) -> None:
    """The parser of ``deepgp plot marginals``."""
    q = kinds.add_parser("marginals", formatter_class=HelpFormatter,
                         help="standardised predictive marginals (Fig. 10-11)",
                         description="Predictive marginals at rows of DATA, rescaled to zero mean and unit "
                         "variance, with the standard normal density dotted; one panel per MODEL.")
    q.add_argument("models", nargs="+", help="model files from `deepgp fit` (same input columns)")
    q.add_argument("--data", required=True, help="CSV with the models' input columns")
    q.add_argument("--points", type=positive_int, default=30, help="test points to show")
    q.add_argument("--samples", type=at_least(2), default=2000, help="predictive draws per point")
    q.add_argument("--out", default="marginals.png", help="figure file (.png or .pdf)")
    q.set_defaults(func=_plot_marginals)


# -- handlers -----------------------------------------------------------------------------------
def _demo(args) -> int:
    scores = run_demo(args.out, models=tuple(_names(args.models, "--models")),
                      config=config_from_args(args.quick, args.iterations, args.long), progress=not args.no_progress)
    exact = json.loads((Path(args.out) / "scores.json").read_text())["exact"]  # (computed once, by the demo)
    print("\n" + score_table(scores, exact=exact))
    return 0


def _fit(args) -> int:
    check_output(args.out, "the model", [args.data], kind=kinds.MODEL_FILE)  # before training, not after it
    columns = read_csv(args.data)
    inputs = choose_inputs(columns, args.target, _names(args.inputs, "--inputs"))
    X, y = select(columns, inputs), select(columns, [args.target])[:, 0]
    settings = {**settings_of(ModelConfig, vars(args)), **settings_of(TrainConfig, vars(args)), "device": args.device}
    if args.predict_samples is not None:
        settings["predict_samples"] = args.predict_samples
    reg = DeepGPRegressor(**settings, progress=not args.no_progress)
    reg.fit(X, y)
    reg.columns_ = {"inputs": inputs, "target": args.target}
    reg.save(args.out)
    trained = getattr(reg.model_, "num_data", None) or len(y)  # (fewer than len(y) with early stopping)
    bound = (f"final bound {reg.history_[-1] / trained:.4f} per point" if len(reg.history_)
             else "not trained (0 iterations)")
    if getattr(reg.history_, "best_iteration", None) is not None:  # early stopping: the state it kept
        stopped = reg.history_.stopped_at
        bound += (f"; the held-out rows' best score at iteration {reg.history_.best_iteration:,}"
                  + (f" (stopped at {stopped:,})" if stopped is not None else ""))
    print(f"fitted {reg.model} ({args.method}) on {len(y)} rows, inputs {inputs} -> target {args.target!r}; "
          f"{bound}; saved {args.out}")
    return 0


def _check_stdout(what: str, option: str) -> None:
    """A ValueError before any work where standard output, where ``what`` would go, is closed (Python
    then has no ``sys.stdout``: ``deepgp predict >&-``)."""
    if sys.stdout is None:
        raise ValueError(f"standard output is closed, so {what} cannot be written there; give a file with {option}")


def _files_draws(command):
    """``command`` (predict, evaluate), where a memory refusal of the draws that the model file's
    ``predict_samples`` asks for says that they are the file's, which ``--predict-samples`` overrides."""
    @functools.wraps(command)
    def run(args) -> int:
        try:
            return command(args)
        except MemoryBudgetError as err:
            if err.setting == "predict_samples" and args.predict_samples is None:
                err.also = f" (the model file's predict_samples){err.also}"
            raise

    return run


@_files_draws
def _predict(args) -> int:
    levels = _levels(args.quantiles)
    if args.out != "-":
        check_output(args.out, "the predictions", [args.model, args.data], kind=kinds.PREDICTIONS)
    else:
        _check_stdout("the predictions", "--out FILE")
    reg = load_regressor(args.model, args.predict_samples)
    check_quantile_draws(levels, reg.predict_samples, "--predict-samples")  # (its default is the model's)
    X, _, rows = _model_data(reg, args.data, need_target=False, lines=True)
    _check_memory(reg, len(X), args.samples)
    mean, std = reg.predict(X, return_std=True)
    table = {"mean": mean, "std": std}
    quant = reg.predict_quantiles(X, levels)  # [N, Q]
    for j, q in enumerate(levels):
        table[level_name(q)] = quant[:, j]
    if args.samples:
        draws = reg.sample(X, args.samples)  # [n, N]
        for i in range(args.samples):
            table[f"sample_{i + 1}"] = draws[i]
    _finite_rows(args.data, rows, table, "predictions")
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(list(table))
    writer.writerows(zip(*map(column_text, table.values())))  # every number as the float it is
    if args.out == "-":
        sys.stdout.write(text.getvalue())
    else:
        write_bytes(args.out, text.getvalue().encode())
        print(f"wrote {len(X)} rows to {args.out}", file=sys.stderr)
    return 0


def _check_memory(reg, num_points: int, samples: int) -> None:
    """Refuse before any work what ``deepgp predict`` could not hold: the quantiles' draws (all of a chunk
    of points', more than the mean's), and ``--samples`` draws with their text (~20 values' bytes each)."""
    check_memory(reg.model_, num_points, reg.predict_samples, "quantiles", setting="predict_samples")
    if samples:
        check_memory(reg.model_, num_points, samples, "draws", result=20 * samples * num_points, setting="samples")


@_files_draws
def _evaluate(args) -> int:
    if args.json not in (None, "-"):
        check_output(args.json, "the metrics", [args.model, args.data], kind=kinds.METRICS)
    else:  # (the JSON or the table: the command's only output)
        _check_stdout("the metrics", "--json FILE")
    reg = load_regressor(args.model, args.predict_samples)
    X, y, rows = _model_data(reg, args.data, need_target=True, lines=True)
    # a target far from the predictions (1e200) has a log density or error beyond float64: inf, refused below
    # by its line, with no numpy warning before that one line
    with np.errstate(over="ignore", invalid="ignore"):
        pointwise = regressor_pointwise(reg, X, y)
        _finite_rows(args.data, rows, pointwise, "log density, error or CRPS")
        metrics = {"model": reg.model, "target": reg.columns_["target"], **regressor_metrics(reg, X, y, pointwise)}
    text = json_text(metrics, f"the metrics of {args.data}", indent=2) + "\n"  # (a mean may overflow)
    if args.json == "-":
        sys.stdout.write(text)
        return 0
    if args.json:
        write_bytes(args.json, text.encode())
    print(f"{metrics['model']} on {args.data} ({metrics['n']} rows, target {metrics['target']!r})")
    print(f"  log density  {number_text(metrics['log_density'])}   (mean per point, higher is better)")
    print(f"  RMSE         {number_text(metrics['rmse'])}")
    print(f"  CRPS         {number_text(metrics['crps'])}   (lower is better)")
    return 0


def _convert(args) -> int:
    old = Path(args.old)
    if not old.exists():
        raise FileNotFoundError(f"no such file: {old}")
    if not old.is_file():
        raise ValueError(f"{old} is not a regular file")
    if not legacy.is_legacy(old):
        raise ValueError(f"{old} is not a deepgp 0.1 model file (those are pickles; files saved since need no "
                         "conversion)")
    if not args.trust:
        raise ValueError(f"converting {old} unpickles it, which runs any code it holds; "
                         "add --trust if you trust where it came from")
    check_output(args.new, "the converted model", [old], kind=kinds.MODEL_FILE)
    kind, tree = legacy.read_legacy(old)
    obj = DeepGPRegressor.from_tree(tree, old) if kind == storage.REGRESSOR else DeepGP.from_tree(tree, old)
    obj.save(args.new)
    print(f"wrote {args.new} ({type(obj).__name__} {obj.model if kind == storage.REGRESSOR else obj.spec})")
    return 0


def _load_models(paths) -> dict:
    """The model files by panel title; they must share their input columns (the data are read by the first's)."""
    regs = dict(zip(_unique_names(paths), (load_regressor(p) for p in paths)))
    first_name, first = next(iter(regs.items()))
    for name, reg in regs.items():
        if reg.columns_["inputs"] != first.columns_["inputs"]:
            raise ValueError(f"{name} has the input columns {reg.columns_['inputs']}, but {first_name} has "
                             f"{first.columns_['inputs']}; plot models of the same inputs together")
    return regs


def _plot_prior(args) -> int:
    check_figure_path(args.out)  # before the drawing, not after (nothing is made)
    specs = _names(args.models, "--models")
    for s in specs:
        parse_spec(s)  # a bad spec fails before any drawing
    print(f"wrote {save_figure(prior_figure(specs, num_draws=args.draws, seed=args.seed), args.out)}")
    return 0


def _plot_posterior(args) -> int:
    check_figure_path(args.out, [*args.models, *([args.data] if args.data else [])])
    regs = _load_models(args.models)
    for name, reg in regs.items():
        if reg.n_features_in_ != 1:
            raise ValueError(f"a posterior density image needs a model with one input; {name} has {reg.n_features_in_}")
        check_grid_memory(reg, 200, args.samples, setting="samples")  # (posterior_figure's resolution)
    data = None
    if args.data:
        first = next(iter(regs.values()))
        data = _model_data(first, args.data, need_target=True)
        x, y = data
    else:  # no data: ±3 standard deviations of the training data
        first = next(iter(regs.values()))
        x = first.x_scaler_.mean + np.array([-3.0, 3.0]) * first.x_scaler_.std
        y = first.y_scaler_.mean + np.array([-3.0, 3.0]) * first.y_scaler_.std
    pad_x, pad_y = 0.05 * np.ptp(x), 0.1 * np.ptp(y)
    fig = posterior_figure(regs, (x.min() - pad_x, x.max() + pad_x), (y.min() - pad_y, y.max() + pad_y),
                           data=data, num_samples=args.samples)
    print(f"wrote {save_figure(fig, args.out)}")
    return 0


def _plot_marginals(args) -> int:
    check_figure_path(args.out, [*args.models, args.data])
    regs = _load_models(args.models)
    X, _ = _model_data(next(iter(regs.values())), args.data, need_target=False)
    points = min(args.points, len(X))  # (marginals_figure shows at most every row once)
    for reg in regs.values():  # (the draws at those rows, before any is drawn)
        check_memory(reg.model_, points, args.samples, "draws", result=args.samples * points, setting="samples")
    fig = marginals_figure(regs, X, num_points=args.points, num_samples=args.samples)
    print(f"wrote {save_figure(fig, args.out)}")
    return 0
