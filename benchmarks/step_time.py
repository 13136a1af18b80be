"""Seconds per full training iteration of deepgp (and, with --peers, GPflux and GPyTorch).

    .venv/bin/python benchmarks/step_time.py [--dataset kin8nm] [--iterations 100] [--threads 1,2]
        [--models GP-GP-GP,LV-GP-GP,LV-GP-GP-GP] [--inner-sampling independent,joint,batch]
        [--vi-samples 1,5] [--peers] [--json benchmarks/results/FILE.json]

One iteration is exactly what ``deepgp.fit`` does per step (one minibatch of B=512, the bound,
backward, Adam step, natural-gradient step on the final layer's q(v)); M=128 inducing points,
5 hidden GPs, float64, on a standardised UCI set from $DEEPGP_DATA. GP-GP-GP is trained by
VI with one sample (``--vi-samples 1,5`` times K = 1 and K = 5 in the same rounds), LV models by
IW with K=5. Every (model, thread count) runs in a fresh subprocess, so each gets its own peak RSS
(ru_maxrss) and thread pool; the median over ``--iterations`` timed iterations after ``--warmup`` is
reported, with beside it:

* the FLOP count of the iteration for OUR implementation (``our_flops``) and the dense count of
  docs/paper-vs-code.md, "Cost per iteration" (``dense_flops``), both forward + backward
  (backward ≈ 2 × forward);
* the GEMM rate measured in the same process with the same threads: median time of the dominant
  (640×128)·(128×2560) float64 torch matmul;
* the floor = FLOPs / GEMM rate, and time / floor;
* the 1-minute load average and the cores kept busy by *other* processes during the timed
  iterations (/proc/stat busy time minus this process's CPU time): the machine is shared.

Peers run under ``--peers-python`` (default .venv-peers/bin/python; see
benchmarks/requirements-peers.txt), one subprocess each, on the nearest model they express
(GP-GP-GP by VI, 1 sample, same data, B, M, 5 hidden GPs, float64, same thread count).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))
import common  # noqa: E402

MODELS = {"GP-GP-GP": ("vi", 1), "LV-GP-GP": ("iw", 5), "LV-GP-GP-GP": ("iw", 5)}
PEERS = {"GPflux": "gpflux_dgp.py", "GPyTorch": "gpytorch_dgp.py"}
GEMM_SHAPE = (640, 128, 2560)
SAMPLINGS = ("independent", "joint", "batch")  # IW's inner draws (deepgp.config.INNER_SAMPLING, where it exists)


# -- FLOP counts ------------------------------------------------------------------------------
# A multiply-add counts 2; backward ≈ 2 × forward. our_flops follows src/deepgp/layers/gp.py:
# groups of one point (P = 1) take mean and variances through R_lᵀA for every GP (on 2×2
# blocks of the triangular R_l: 1.5·L·M²·n);
# groups of K > 1 points (IW after an LV layer) draw one inducing vector per group v = m + Rε
# (2·L·M²·G) plus the K×K Cholesky of the prior conditional. dense_flops is the dense count of
# docs/paper-vs-code.md ("Cost per iteration").


def _encoder_flops(layer, rows: int) -> float:
    return sum(2.0 * rows * lin.in_features * lin.out_features for lin in layer.encoder.linears)


def _gp_common(M: int, D: int, n: int) -> float:
    """K(Z, Z), its Cholesky and the explicit Lz⁻¹ (M³/3 + M³), K(Z, H) (sqdist GEMM + ~6
    elementwise ops per entry), A = Lz⁻¹K(Z, H) as a GEMM (2M²n: dense, Lz⁻¹'s zeros included)."""
    return 2.0 * M * M * D + 6.0 * M * M + M**3 / 3.0 + M**3 + 2.0 * M * n * D + 6.0 * M * n + 2.0 * M * M * n


def _gp_marginal(M: int, D: int, L: int, n: int) -> float:
    """GPLayer.conditional, P = 1 path: mean Aᵀm, R_lᵀA for every l on 2×2 blocks (¾ of the
    dense 2·L·M²·n: the zero block of the triangular R_l is skipped), variances, diag of Q."""
    h = M // 2
    triangular = 2.0 * L * (h * M + (M - h) ** 2) * n
    return _gp_common(M, D, n) + 2.0 * M * n * L + triangular + 2.0 * L * M * n + 2.0 * M * n


def _gp_grouped(M: int, D: int, L: int, G: int, P: int) -> float:
    """GPLayer.sample with groups of P > 1 points: v = m + Rε per group, g = Aᵀv, chol of Q [G, P, P]."""
    n = G * P
    joint_q = 2.0 * G * P * P * (D + M) + 6.0 * G * P * P + G * P**3 / 3.0
    return _gp_common(M, D, n) + joint_q + 2.0 * L * M * M * G + 2.0 * n * M * L + 2.0 * G * P * P * L


def _gp_shared(M: int, D: int, L: int, G: int, P: int) -> float:
    """GPLayer.sample with groups of P points and marginal residuals (``inner_sampling="batch"``: the
    G = K sample indices, P = B points): v = m + Rε per group, g = Aᵀv, the diagonal of Q."""
    n = G * P
    return _gp_common(M, D, n) + 2.0 * L * M * M * G + 2.0 * n * M * L + 2.0 * M * n + 4.0 * n * L


def _natgrad_adam(model, adam_params: int) -> float:
    """expectation parameters (RRᵀ, Cholesky with its backward) and natgrad_step (≈ 6⅔ M³ per GP), Adam."""
    final = model.final_layer
    M, L = final.num_inducing, final.num_gps
    return L * (2.0 * M**3 + M**3 + 20.0 / 3.0 * M**3) + 12.0 * adam_params


def _default_inner_sampling() -> str:
    """The timed library's default: joint in commits from before the setting existed."""
    try:
        from deepgp.config import TrainConfig
    except ImportError:
        return "joint"
    return getattr(TrainConfig(), "inner_sampling", "joint")


def _products(deepgp, dtype) -> str:
    """The dtype of fit's R_lᵀA products for a model of ``dtype`` in this process
    (deepgp.runtime.training_products_dtype): "float32" for float32 models and, unless
    DEEPGP_FLOAT32_PRODUCTS opts out, for float64 ones."""
    runtime = getattr(deepgp, "runtime", None)
    if hasattr(runtime, "training_products_dtype"):
        return runtime.training_products_dtype(dtype)
    if str(dtype).endswith("float32"):  # (commits from before the helper)
        return "float32"
    if not hasattr(runtime, "float32_products_enabled"):
        return "float64"  # a commit from before the float32 products
    return "float32" if runtime.float32_products_enabled() else "float64"


def our_flops(model, batch: int, num_samples: int, method: str, inner_sampling: str) -> dict:
    """FLOPs of one ``deepgp.fit`` iteration of this model, as the code computes it: IW with joint inner
    draws takes each point's K samples through the inner layers as one group (K×K Cholesky); per-sample
    draws take B·K single points; batch draws take K groups of the B points, with marginal residuals."""
    from deepgp import GPLayer, LatentVariableLayer

    iw = method == "iw" and model.has_latent
    joint, shared = iw and inner_sampling == "joint", iw and inner_sampling == "batch"
    G, P = (batch, 1) if joint else (num_samples, batch) if shared else (batch * num_samples, 1)
    fwd = 0.0
    for layer in model.layers[:-1]:
        if isinstance(layer, LatentVariableLayer):
            fwd += _encoder_flops(layer, batch)
            if joint:
                P = num_samples
        elif isinstance(layer, GPLayer):
            M, D, L = layer.num_inducing, layer.input_dim, layer.num_gps
            if shared:
                fwd += _gp_shared(M, D, L, G, P)
            else:
                fwd += _gp_grouped(M, D, L, G, P) if P > 1 else _gp_marginal(M, D, L, G * P)
            fwd += 2.0 * G * P * L * layer.output_dim  # projection
            fwd += 2.0 * L * M * M  # KL(q(v) ‖ p(v))
    final = model.final_layer
    fwd += _gp_marginal(final.num_inducing, final.input_dim, final.num_gps, G * P)
    final_q = {id(final.q_mu), id(final.q_sqrt)}
    adam_params = sum(p.numel() for p in model.parameters() if id(p) not in final_q)
    return dict(forward=fwd, total=3.0 * fwd + _natgrad_adam(model, adam_params))


def dense_flops(model, batch: int, num_samples: int, method: str) -> dict:
    """The dense count (docs/paper-vs-code.md, "Cost per iteration"): R_lᵀA dense on all n = B·K points in
    every layer, joint K×K in IW."""
    from deepgp import GPLayer, LatentVariableLayer

    n = batch * num_samples
    iw = method == "iw" and model.has_latent
    fwd = 0.0
    for layer in model.layers:
        if isinstance(layer, LatentVariableLayer):
            fwd += _encoder_flops(layer, batch)
            continue
        if not isinstance(layer, GPLayer):
            continue
        M, D, L = layer.num_inducing, layer.input_dim, layer.num_gps
        fwd += 2.0 * M * M * D + M**3 / 3.0 + 2.0 * M * n * D + 6.0 * M * n + float(M) * M * n
        fwd += 2.0 * M * n * L + 2.0 * L * M * M * n + 2.0 * (L + 1) * M * n
        if layer is not model.final_layer:
            if iw:
                K = num_samples
                fwd += 2.0 * batch * K * K * M * (L + 1) + batch * L * K**3 / 3.0
            fwd += 2.0 * n * L * layer.output_dim
    return dict(forward=fwd, total=3.0 * fwd)


# -- one measurement per process --------------------------------------------------------------
def gemm_rate(torch, reps: int = 30) -> dict:
    """Median GFLOP/s of the (640×128)·(128×2560) float64 product in this process."""
    m, k, n = GEMM_SHAPE
    a = torch.randn(m, k, dtype=torch.float64)
    b = torch.randn(k, n, dtype=torch.float64)
    out = torch.empty(m, n, dtype=torch.float64)
    times = []
    for i in range(reps + 5):
        t0 = time.perf_counter()
        torch.matmul(a, b, out=out)
        if i >= 5:
            times.append(time.perf_counter() - t0)
    sec = common.median(times)
    return dict(gemm_s=sec, gemm_gflops=2.0 * m * k * n / sec / 1e9)


def worker(args) -> None:
    common.set_thread_env(args.threads)
    import torch

    import deepgp

    torch.set_num_threads(args.threads)
    X, Y = common.load_dataset(args.dataset)
    method, K = MODELS[args.worker]
    K = args.num_samples or K
    model = deepgp.DeepGP.from_spec(args.worker, X, Y, num_inducing=common.INDUCING, hidden_dim=common.HIDDEN,
                                    latent_dim=1, seed=0, dtype=args.dtype)
    rss_before = common.peak_rss_mb()
    clock = common.StepClock(args.warmup)
    load0 = os.getloadavg()[0]
    # only passed when asked for: an older commit's fit, timed by this script, may not know the setting
    sampling = {"inner_sampling": args.inner_sampling} if args.inner_sampling else {}
    deepgp.fit(model, X, Y, method, K, iterations=args.warmup + args.iterations, batch_size=common.BATCH,
               progress=False, callback=clock.tick, **sampling)
    inner_sampling = args.inner_sampling or _default_inner_sampling()
    other = clock.other_cores_busy()
    stats = common.step_stats(clock.stamps, args.warmup)
    rate = gemm_rate(torch)
    ours = our_flops(model, common.BATCH, K, method, inner_sampling)
    dense = dense_flops(model, common.BATCH, K, method)
    common.emit(dict(
        name="deepgp", model=args.worker, method=method, num_samples=K, threads=args.threads, dataset=args.dataset,
        dtype=args.dtype, inner_sampling=inner_sampling if method == "iw" else "-",
        **stats, **rate, flops_ours=ours["total"], flops_dense=dense["total"],
        floor_ours_s=ours["total"] / (rate["gemm_gflops"] * 1e9),
        floor_dense_s=dense["total"] / (rate["gemm_gflops"] * 1e9),
        rss_before_fit_mb=rss_before, loadavg_start=load0, other_cores_busy=other,
        products=_products(deepgp, model.dtype),
    ))


# -- orchestration ----------------------------------------------------------------------------
def run(cmd: list[str], label: str) -> dict:
    load = os.getloadavg()[0]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=common.REPO)
    try:
        rec = common.last_json(proc.stdout)
    except ValueError:
        err = (proc.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        print(f"  {label}: FAILED (exit {proc.returncode}): {err}", file=sys.stderr, flush=True)
        return dict(name=label.split()[0], label=label, failed=True, error=err, stderr_tail=proc.stderr[-4000:])
    rec["loadavg_before"] = load
    print(f"  {label}: {rec['median_s'] * 1e3:.1f} ms (median), peak RSS {rec['peak_rss_mb']:.0f} MB, "
          f"load {load:.2f}, other cores busy {rec.get('other_cores_busy', float('nan')):.2f}",
          file=sys.stderr, flush=True)
    return rec


def machine_info() -> dict:
    import torch

    cpu = "unknown"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        fields = dict(ln.split(":", 1) for ln in out.splitlines() if ":" in ln)
        cpu = (f"{fields['Model name'].strip()} (family {fields.get('CPU family', '?').strip()}, model "
               f"{fields.get('Model', '?').strip()}, {fields.get('Hypervisor vendor', 'no').strip()} hypervisor)")
    except (OSError, KeyError):
        pass
    cfg = torch.__config__.show()
    blas = ", ".join(re.findall(r"(?:BLAS_INFO|LAPACK_INFO)=[^,\s]+", cfg)) or "unknown"
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            cwd=common.REPO).stdout.strip()
    diff = subprocess.run(["git", "diff", "HEAD", "--", "src"], capture_output=True, cwd=common.REPO).stdout
    return dict(date_utc=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                cpu=cpu, cores=os.cpu_count(), python=platform.python_version(), torch=torch.__version__,
                blas=blas, mkl=torch.backends.mkl.is_available(), commit=commit, src_modified=bool(diff),
                src_diff_sha256=hashlib.sha256(diff).hexdigest()[:12] if diff else None)


def median_round(runs: list[list[dict]]) -> list[dict]:
    """One record per process kind from ``--rounds`` round-robin repetitions: the round whose
    median step is the median over rounds (lower middle for even counts), with every round's
    median beside it. Round-robin order spreads the shared machine's slow phases over all kinds,
    so the ratios of these medians are steadier than those of a single pass."""
    out = []
    for i, first in enumerate(runs[0]):
        recs = [rs[i] for rs in runs if not rs[i].get("failed")]
        if not recs:
            out.append(first)
            continue
        pick = dict(sorted(recs, key=lambda r: r["median_s"])[(len(recs) - 1) // 2])
        pick["round_medians_s"] = [rs[i].get("median_s") for rs in runs]  # in round order, None if failed
        out.append(pick)
    return out


def paired_ratio(peer: dict, mine: dict) -> float | None:
    """Median over rounds of peer / deepgp, each round's two processes run minutes apart: steadier
    than the ratio of the two medians when the shared machine's speed drifts between rounds."""
    pairs = [p / m for p, m in zip(peer.get("round_medians_s", []), mine.get("round_medians_s", [])) if p and m]
    return statistics.median(pairs) if pairs else None


def fmt(x, spec=".1f", scale=1.0):
    return "—" if x is None else format(x * scale, spec)


def table(results: list[dict]) -> str:
    rows = [
        "| model | method | threads | ms/iter (median) | IQR ms | GFLOP ours | GFLOP dense §7 | GEMM GFLOP/s "
        "| floor ms (ours) | time/floor | time/dense floor | peak RSS MB | load 1-min | other cores busy |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if r.get("name") != "deepgp":
            continue
        if r.get("failed"):
            rows.append(f"| {r['label']} | failed: {r['error'][:100]} |" + " |" * 12)
            continue
        rows.append(
            f"| {r['model']} | {r['method'].upper()} K={r['num_samples']}"
            f"{', ' + r['inner_sampling'] if r.get('inner_sampling') in SAMPLINGS[1:] else ''} | {r['threads']} "
            f"| {fmt(r['median_s'], '.1f', 1e3)} "
            f"| {fmt(r['q1_s'], '.1f', 1e3)}–{fmt(r['q3_s'], '.1f', 1e3)} | {fmt(r['flops_ours'], '.2f', 1e-9)} "
            f"| {fmt(r['flops_dense'], '.2f', 1e-9)} | {fmt(r['gemm_gflops'])} | {fmt(r['floor_ours_s'], '.1f', 1e3)} "
            f"| {r['median_s'] / r['floor_ours_s']:.2f} | {r['median_s'] / r['floor_dense_s']:.2f} "
            f"| {r['peak_rss_mb']:.0f} | {r['loadavg_before']:.2f} | {r['other_cores_busy']:.2f} |"
        )
    by_sampling = {(r["model"], r["threads"], r.get("inner_sampling")): r for r in results
                   if r.get("name") == "deepgp" and not r.get("failed")}
    pairs = [(m, t, o) for m, t, s in by_sampling if s == "independent" for o in SAMPLINGS[1:]
             if (m, t, o) in by_sampling]
    if pairs:
        rows += ["", "| model | threads | per-sample (independent) / other inner draws | ratio of medians "
                 "| median of per-round ratios | GFLOP ratio |", "|---|---|---|---|---|---|"]
        for m, t, o in pairs:
            ind, other = by_sampling[m, t, "independent"], by_sampling[m, t, o]
            rows.append(f"| {m} | {t} | {o} | {ind['median_s'] / other['median_s']:.3f} "
                        f"| {fmt(paired_ratio(ind, other), '.3f')} | {ind['flops_ours'] / other['flops_ours']:.2f} |")
    by_k = {(r["model"], r["threads"], r["num_samples"]): r for r in results
            if r.get("name") == "deepgp" and not r.get("failed") and r["method"] == "vi"}
    k_pairs = [(m, t, k) for m, t, k in by_k if k != 1 and (m, t, 1) in by_k]
    if k_pairs:
        rows += ["", "| model | threads | VI K / K = 1 | ratio of medians | median of per-round ratios |",
                 "|---|---|---|---|---|"]
        for m, t, k in k_pairs:
            more, one = by_k[m, t, k], by_k[m, t, 1]
            rows.append(f"| {m} | {t} | {k} | {more['median_s'] / one['median_s']:.3f} "
                        f"| {fmt(paired_ratio(more, one), '.3f')} |")
    peers = [r for r in results if r.get("name") != "deepgp"]
    if peers:
        ours = {(r["model"], r["threads"]): r for r in results if r.get("name") == "deepgp"}
        rows += ["", "| peer (GP-GP-GP VI, 1 sample) | threads | ms/iter (median) | IQR ms | peak RSS MB "
                 "| deepgp ms | peer / deepgp | peer / deepgp, median of per-round ratios "
                 "| load 1-min | other cores busy |",
                 "|---|---|---|---|---|---|---|---|---|---|"]
        for r in peers:
            if r.get("failed"):
                rows.append(f"| {r['label']} | {r.get('threads', '—')} | failed: {r['error'][:120]} | | | | | | | |")
                continue
            mine = ours.get(("GP-GP-GP", r["threads"]))
            ratio = f"{r['median_s'] / mine['median_s']:.2f}" if mine else "—"
            paired = fmt(paired_ratio(r, mine), ".2f") if mine else "—"
            rows.append(
                f"| {r['name']} {r.get('version', '')} {r.get('dtype', 'float64')} | {r['threads']} "
                f"| {fmt(r['median_s'], '.1f', 1e3)} "
                f"| {fmt(r['q1_s'], '.1f', 1e3)}–{fmt(r['q3_s'], '.1f', 1e3)} | {r['peak_rss_mb']:.0f} "
                f"| {fmt(mine['median_s'] if mine else None, '.1f', 1e3)} | {ratio} | {paired} "
                f"| {r['loadavg_before']:.2f} "
                f"| {fmt(r.get('other_cores_busy'), '.2f')} |"
            )
    return "\n".join(rows)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="kin8nm")
    p.add_argument("--iterations", type=int, default=100, help="timed iterations (after warm-up)")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--threads", default="1,2", help="comma-separated torch thread counts")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--peers", action="store_true", help="also time GPflux and GPyTorch (GP-GP-GP VI)")
    p.add_argument("--peers-only", action="store_true", help="time the peers (and deepgp GP-GP-GP) only")
    p.add_argument("--peers-python", default=str(common.REPO / ".venv-peers" / "bin" / "python"))
    p.add_argument("--json", help="write all results and the machine description to this file")
    p.add_argument("--dtype", default="float64", choices=("float64", "float32"),
                   help="deepgp's dtype (float32: the opt-in fast mode; floors stay float64 counts and rates)")
    p.add_argument("--peers-dtype", default="float64", choices=("float64", "float32"),
                   help="the peers' dtype (default float64, the benchmark setting, whatever --dtype is)")
    p.add_argument("--inner-sampling", default="",
                   help="IW's inner-layer draws, comma-separated to time them in the same rounds: independent, "
                        "joint (the paper's text), batch; default: the library's")
    p.add_argument("--vi-samples", default="",
                   help="K of the VI model, comma-separated to time them in the same rounds (default: 1)")
    p.add_argument("--num-samples", type=int, default=None, help=argparse.SUPPRESS)  # (a worker's K)
    p.add_argument("--rounds", type=int, default=1,
                   help="repeat every process this many times, round-robin; report the median round of each")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        args.threads = int(args.threads)
        return worker(args)

    threads = [int(t) for t in args.threads.split(",")]
    models = ["GP-GP-GP"] if args.peers_only else [m.strip() for m in args.models.split(",")]
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        p.error(f"unknown model(s) {unknown}; choose from {list(MODELS)}")
    if args.json:  # before the runs, not after them: a file that cannot be written, or a folder
        from deepgp.storage import check_writable

        try:
            check_writable(args.json, "--json")
        except ValueError as err:
            p.error(str(err))
    info = machine_info()
    print(f"# deepgp step time — {info['date_utc']}, commit {info['commit'][:10]}"
          f"{' + uncommitted src/ diff ' + info['src_diff_sha256'] if info['src_modified'] else ''}, "
          f"{info['cpu']}, {info['cores']} cores, "
          f"torch {info['torch']}", file=sys.stderr, flush=True)
    common_args = ["--dataset", args.dataset, "--iterations", str(args.iterations), "--warmup", str(args.warmup)]
    ours_args = ["--dtype", args.dtype]
    samplings = [s.strip() for s in args.inner_sampling.split(",") if s.strip()] or [""]
    vi_samples = [int(k) for k in args.vi_samples.split(",") if k.strip()] or [None]
    if any(s not in SAMPLINGS for s in samplings if s):
        p.error(f"--inner-sampling: {args.inner_sampling!r}; choose from {', '.join(SAMPLINGS)}")
    runs: list[list[dict]] = []
    for r in range(args.rounds):
        if args.rounds > 1:
            print(f"round {r + 1} of {args.rounds}", file=sys.stderr, flush=True)
        results = []
        for t in threads:
            for m in models:
                iw = MODELS[m][0] == "iw"
                for s, k in [(s, None) for s in samplings] if iw else [(samplings[0], k) for k in vi_samples]:
                    sampling = (["--inner-sampling", s] if s else []) + (["--num-samples", str(k)] if k else [])
                    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", m, "--threads", str(t),
                           *common_args, *ours_args, *sampling]
                    results.append(run(cmd, f"deepgp {m} threads={t}{f' {s}' if s else ''}{f' K={k}' if k else ''}"))
            if args.peers or args.peers_only:
                for name, script in PEERS.items():
                    if not Path(args.peers_python).exists():
                        results.append(dict(name=name, threads=t, failed=True,
                                            error=f"{args.peers_python} not found "
                                                  "(see benchmarks/requirements-peers.txt)"))
                        continue
                    cmd = [args.peers_python, str(HERE / "peers" / script), "--threads", str(t), *common_args,
                           "--dtype", args.peers_dtype]
                    rec = run(cmd, f"{name} threads={t}")
                    rec.setdefault("threads", t)
                    results.append(rec)
        runs.append(results)
    results = median_round(runs)
    print(f"\ncommit {info['commit']}"
          f"{' + uncommitted src/ diff ' + info['src_diff_sha256'] if info['src_modified'] else ''}, "
          f"{info['date_utc']}, {info['cpu']} ({info['cores']} cores), "
          f"torch {info['torch']} ({info['blas']}), dataset {args.dataset}, B={common.BATCH}, M={common.INDUCING}, "
          f"{common.HIDDEN} hidden GPs, {args.dtype} (peers {args.peers_dtype}), "
          f"median of {args.iterations} iterations after {args.warmup} warm-up"
          f"{f', median of {args.rounds} rounds' if args.rounds > 1 else ''}\n")
    print(table(results))
    if args.json:
        from deepgp.storage import write_bytes

        write_bytes(args.json, json.dumps(dict(machine=info, args=vars(args), results=results), indent=1).encode())


if __name__ == "__main__":
    main()
