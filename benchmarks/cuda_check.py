"""deepgp on ``device="cuda"``: does it agree with the CPU, and how fast is it?

    python benchmarks/cuda_check.py --data-dir DIR [--out benchmarks/results] [--stages check,steps,predict]

Run on a machine with a CUDA GPU (the library never needs one). Every stage appends JSON lines to
``OUT/cuda_check.jsonl`` as it finishes, so a run cut short keeps what it measured.

* ``check``: the same initial LV-GP-GP (kin8nm split 0, M=64) on CPU and on CUDA gives
  (a) the same deterministic quantities (every layer's conditional mean and variance at the same
  inputs, the KL, the Gaussian log likelihood) to ≈ 1e-10, and (b) the same bound in distribution
  (mean of 200 draws of the IW bound each, difference within 4 standard errors; the random
  streams of the two devices differ, so only the distribution can agree). Then the model is
  trained on CUDA and, in a parallel CPU process, on the CPU with the same seed and budget; both
  are evaluated on the same test points (test log density by the mixture estimator) and their
  difference is reported (the ``seeds`` stage judges it against the seed-to-seed spread).
  Finally ``DeepGPRegressor(device=DEV)``
  fits, predicts, scores, saves, and its file loads on the CPU with identical parameters.
* ``seeds``: the check's fits again for several seeds on each device: the two devices' mean test
  log densities must agree within their seed-to-seed standard error (one seed each cannot tell).
* ``steps``: milliseconds per full training iteration on CUDA, eager and captured (a CUDA graph,
  deepgp.capture), in one process (torch.cuda.synchronize before each time stamp; ``--steps``
  timed after ``--warmup``) for the three models of benchmarks/step_time.py (kin8nm, B=512,
  M=128, 5 hidden GPs, float64), with peak GPU memory, and the two bound histories of one seed
  compared (the first iteration's bound, and the last 200 bounds' means within 4 standard errors).
* ``jobs``: J = 1, 2, 4, 8 captured LV-GP-GP fits sharing the GPU, each in its own process:
  iterations per second summed over the jobs.
* ``runner``: ``deepgp benchmark --device cuda --jobs 2`` end to end, 300 iterations.
* ``predict``: seconds and peak GPU memory of ``predictive_log_density`` for 10,000 test points ×
  2,000 samples on LV-GP-GP-GP (the setting of benchmarks/predict_time.py).
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

import deepgp
from deepgp import GPLayer
from deepgp.datasets.uci import load_split
from deepgp.metrics import split_metrics

OUT: Path = Path(".")
DEV = "cuda"  # --device cpu dry-runs the script on a machine without a GPU


def sync() -> None:
    if DEV.startswith("cuda"):
        torch.cuda.synchronize()


def peak_mb() -> float:
    if DEV.startswith("cuda"):
        return torch.cuda.max_memory_allocated() / 2**20
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def reset_peak() -> None:
    if DEV.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()


def emit(**rec) -> None:
    print(json.dumps(rec), flush=True)
    with open(OUT / "cuda_check.jsonl", "a") as f:
        f.write(json.dumps(rec) + "\n")


def _fit_and_evaluate(spec, data, device, iterations, threads=4, seed=0) -> dict:
    torch.set_num_threads(threads)
    model = deepgp.DeepGP.from_spec(spec, data.X_train, data.Y_train, num_inducing=64, seed=seed, device=device)
    t0 = time.perf_counter()
    history = deepgp.fit(model, data.X_train, data.Y_train, "iw", 5, iterations=iterations, seed=seed, progress=False)
    seconds = time.perf_counter() - t0
    metrics = split_metrics(model, data.X_test, data.Y_test, 2000, 100, seed=0)
    return dict(device=str(device), seed=seed, iterations=iterations, train_s=seconds,
                bound_last50=float(np.mean(history[-50:])), **metrics)


def _start_cpu_reference(args, seed: int) -> subprocess.Popen:
    """The same fit on the CPU, in a process of its own (``--threads`` torch threads) running meanwhile."""
    cmd = [sys.executable, __file__, "--data-dir", str(args.data_dir), "--out", str(OUT), "--cpu-reference",
           str(args.iterations), "--seed", str(seed), "--threads", str(args.threads)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)


def _cpu_reference_result(proc: subprocess.Popen) -> dict:
    return json.loads(proc.communicate(timeout=900)[0].strip().splitlines()[-1])


def stage_seeds(args) -> None:
    """The check's fit on CUDA and CPU for several seeds: do the two devices' results agree in distribution?"""
    data = load_split("kin8nm", 0, args.data_dir, test_limit=500)
    seeds = [int(s) for s in args.seeds.split(",")]
    refs = [_start_cpu_reference(args, s) for s in seeds]
    res = {"cuda": [], "cpu": []}
    for s in seeds:
        rec = _fit_and_evaluate("LV-GP-GP", data, DEV, args.iterations, seed=s)
        emit(stage="seeds", **rec)
        res["cuda"].append(rec["test_loglik_mixture"])
    for ref in refs:
        rec = _cpu_reference_result(ref)
        emit(stage="seeds", **rec)
        res["cpu"].append(rec["test_loglik_mixture"])
    a, b = np.array(res["cuda"]), np.array(res["cpu"])
    se = float(np.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b)))
    emit(stage="seeds", what="agreement", cuda_mean=float(a.mean()), cpu_mean=float(b.mean()),
         diff=float(a.mean() - b.mean()), se=se, ok=bool(abs(a.mean() - b.mean()) < 3 * se + 0.02))


def stage_check(args) -> None:
    data = load_split("kin8nm", 0, args.data_dir, test_limit=500)
    # the CPU reference trains in a separate process meanwhile (this machine has cores to spare)
    ref = _start_cpu_reference(args, 0)

    cpu = deepgp.DeepGP.from_spec("LV-GP-GP", data.X_train, data.Y_train, num_inducing=64, seed=0)
    gpu = copy.deepcopy(cpu).to(DEV)
    xb = torch.as_tensor(data.X_train[:512])
    yb = torch.as_tensor(data.Y_train[:512])
    worst = 0.0
    with torch.no_grad():
        H = xb.unsqueeze(1)  # [G=B, P=1, D]
        for lc, lg in zip(cpu.layers, gpu.layers):
            if isinstance(lc, GPLayer):
                mc, vc = lc.conditional(H)
                mg, vg = lg.conditional(H.to(DEV))
                worst = max(worst, float((mc - mg.cpu()).abs().max()), float((vc - vg.cpu()).abs().max()))
                H = lc.project(H, mc)
            else:  # the latent layer: feed w = 0 (its prior mean) so both devices see the same inputs
                H = lc(H, torch.zeros(H.shape[0], 1, lc.latent_dim, dtype=H.dtype))
        kl_diff = abs(float(cpu.kl()) - float(gpu.kl()))
        y3 = yb.unsqueeze(1)
        lik_c = cpu.likelihood.variational_expectation(y3, mc, vc).sum()
        lik_g = gpu.likelihood.variational_expectation(y3.to(DEV), mc.to(DEV), vc.to(DEV)).sum()
        lik_diff = abs(float(lik_c) - float(lik_g))
        draws = {}
        for name, m in (("cpu", cpu), ("cuda", gpu)):
            torch.manual_seed(1)
            b = torch.stack([m.elbo(xb.to(m.device), yb.to(m.device), "iw", 5) for _ in range(200)]).cpu()
            draws[name] = (float(b.mean()), float(b.std() / np.sqrt(len(b))))
    diff = draws["cuda"][0] - draws["cpu"][0]
    se = float(np.hypot(draws["cuda"][1], draws["cpu"][1]))
    emit(stage="check", what="deterministic", conditional_max_abs_diff=worst, kl_abs_diff=kl_diff,
         loglik_abs_diff=lik_diff, ok=bool(worst < 1e-8 and kl_diff < 1e-8 and lik_diff < 1e-6))
    emit(stage="check", what="iw_bound_distribution", cpu=draws["cpu"], cuda=draws["cuda"], diff=diff, se=se,
         ok=bool(abs(diff) < 4 * se))

    fitted = _fit_and_evaluate("LV-GP-GP", data, DEV, args.iterations)
    emit(stage="check", what="fit_cuda", **fitted)
    ref_rec = _cpu_reference_result(ref)
    emit(stage="check", what="fit_cpu", **ref_rec)
    d = fitted["test_loglik_mixture"] - ref_rec["test_loglik_mixture"]
    # one seed per device cannot separate device from seed: the seeds stage compares distributions
    emit(stage="check", what="fit_single_seed_difference", mixture_diff=d)

    reg = deepgp.DeepGPRegressor("LV-GP", iterations=200, num_inducing=32, device=DEV, progress=False)
    reg.fit(data.X_train[:2000], data.Y_train[:2000, 0])
    pred = reg.predict(data.X_test[:100])
    score = reg.score(data.X_test[:100], data.Y_test[:100, 0])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "reg.safetensors"
        reg.save(path)
        back = deepgp.DeepGPRegressor.load(path, device="cpu")
    same = all(torch.equal(a.detach().cpu(), b.detach()) for a, b in
               zip(reg.model_.state_dict().values(), back.model_.state_dict().values()))
    cpu_score = back.score(data.X_test[:100], data.Y_test[:100, 0])
    emit(stage="check", what="regressor", pred_finite=bool(np.isfinite(pred).all()), score_cuda=score,
         score_cpu_after_load=cpu_score, params_identical_after_load=same,
         ok=bool(np.isfinite(pred).all()) and same and abs(score - cpu_score) < 0.1)


STEP_MODELS = (("GP-GP-GP", "vi", 1), ("LV-GP-GP", "iw", 5), ("LV-GP-GP-GP", "iw", 5))


def _timed_fit(spec, method, K, X, Y, iterations, warmup, capture, seed=0) -> tuple[np.ndarray, np.ndarray]:
    """(bound history, per-step seconds after ``warmup``) of one fit; every step synchronised."""
    model = deepgp.DeepGP.from_spec(spec, X, Y, num_inducing=128, hidden_dim=5, seed=seed, device=DEV)
    stamps = []

    def tick(t, value):
        sync()
        stamps.append(time.perf_counter())

    history = deepgp.fit(model, X, Y, method, K, iterations=iterations, batch_size=512, seed=seed, progress=False,
                         callback=tick, capture=capture)
    return history, np.diff(stamps)[warmup:]


def stage_steps(args) -> None:
    """Eager and captured steps of the three models, in one process: ms per step (the median, and the
    mean over all timed steps, redone ones included), peak GPU memory, and the two bound histories."""
    data = load_split("kin8nm", 0, args.data_dir)
    X, Y = data.X_train, data.Y_train
    for spec, method, K in STEP_MODELS:
        runs = {}
        for mode, capture in (("eager", False), ("captured", True)):
            reset_peak()
            history, steps = _timed_fit(spec, method, K, X, Y, args.warmup + args.steps, args.warmup, capture)
            runs[mode] = history
            emit(stage="steps", model=spec, method=method, num_samples=K, mode=mode,
                 median_ms=1e3 * float(np.median(steps)), mean_ms=1e3 * float(np.mean(steps)),
                 q1_ms=1e3 * float(np.percentile(steps, 25)), q3_ms=1e3 * float(np.percentile(steps, 75)),
                 timed=len(steps), peak_gpu_mb=peak_mb())
        # the same seed: the first iteration is the same arithmetic on the same draws in both; later
        # ones differ in Adam's implementation (fused vs multi-tensor), so only their distribution can agree
        a, b = runs["eager"][-200:], runs["captured"][-200:]
        se = float(np.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b)))
        first = abs(runs["eager"][0] - runs["captured"][0])
        emit(stage="steps", model=spec, what="bound_agreement", first_step_abs_diff=first,
             eager_last200_mean=float(a.mean()), captured_last200_mean=float(b.mean()), se=se,
             ok=bool(abs(a.mean() - b.mean()) < 4 * se))


def _job(spec, method, K, data_dir, iterations, warmup, start, results, device) -> None:
    """One of J fits sharing the GPU (a process of its own, as the runner's --jobs makes them)."""
    global DEV
    DEV = device
    torch.set_num_threads(1)
    data = load_split("kin8nm", 0, data_dir)
    start.wait()
    _, steps = _timed_fit(spec, method, K, data.X_train, data.Y_train, iterations, warmup, None)
    results.put(float(np.sum(steps)) / len(steps))


def stage_jobs(args) -> None:
    """Several fits on one GPU, each in its own process (captured steps): iterations per second summed
    over the J jobs, for J = 1, 2, 4, 8 (LV-GP-GP, IW, K = 5)."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    for J in (int(j) for j in args.jobs.split(",")):
        start, results = ctx.Barrier(J), ctx.Queue()
        procs = [ctx.Process(target=_job, args=("LV-GP-GP", "iw", 5, args.data_dir, args.warmup + args.job_steps,
                                                  args.warmup, start, results, DEV)) for _ in range(J)]
        for p in procs:
            p.start()
        per_step = [results.get(timeout=300) for _ in procs]
        for p in procs:
            p.join()
        emit(stage="jobs", jobs=J, model="LV-GP-GP", method="iw", ms_per_step_each=[1e3 * s for s in per_step],
             iterations_per_s_total=float(sum(1.0 / s for s in per_step)))


def stage_runner(args) -> None:
    """`deepgp benchmark --device cuda --jobs 2` end to end (a short run: does it work on a GPU?)."""
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "results.csv"
        cmd = [sys.executable, "-m", "deepgp", "benchmark", "--data-dir", str(args.data_dir), "--datasets", "kin8nm",
               "--models", "GP:vi,LV-GP-GP:iw", "--splits", "0", "--iterations", "300", "--device", DEV, "--jobs", "2",
               "--results", str(results)]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        rows = results.read_text().splitlines() if results.exists() else []
        emit(stage="runner", rc=proc.returncode, seconds=time.perf_counter() - t0, rows=len(rows) - 1,
             head=rows[:3], stderr=proc.stderr[-1500:], ok=proc.returncode == 0 and len(rows) == 3)


def stage_predict(args) -> None:
    data = load_split("kin8nm", 0, args.data_dir, test_limit=None)
    model = deepgp.DeepGP.from_spec("LV-GP-GP-GP", data.X_train, data.Y_train, num_inducing=128, seed=0,
                                    device=DEV)
    deepgp.fit(model, data.X_train, data.Y_train, "iw", 5, iterations=20, progress=False)
    n = args.predict_points
    X = np.resize(data.X_test, (n, data.X_test.shape[1]))
    Y = np.resize(data.Y_test, (n, 1))
    model.predictive_log_density(X[:100], Y[:100], num_samples=2000)  # warm-up
    sync()
    reset_peak()
    t0 = time.perf_counter()
    lp = model.predictive_log_density(X, Y, num_samples=2000)
    sync()
    emit(stage="predict", points=n, samples=2000, seconds=time.perf_counter() - t0,
         peak_gpu_mb=peak_mb(), mean_log_density=float(np.mean(lp)))


def main(argv=None) -> None:
    global OUT, DEV
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", required=True)
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"),
                   help="folder of cuda_check.jsonl (default: benchmarks/results)")
    p.add_argument("--stages", default="check,steps,predict,jobs,runner")
    p.add_argument("--iterations", type=int, default=1000, help="training iterations of the check's fits")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--steps", type=int, default=500, help="timed steps per model and mode (after --warmup)")
    p.add_argument("--jobs", default="1,2,4,8", help="the J of the jobs stage")
    p.add_argument("--job-steps", type=int, default=300, help="timed steps per job of the jobs stage")
    p.add_argument("--predict-points", type=int, default=10_000)
    p.add_argument("--device", default="cuda", help="cpu: dry-run the script without a GPU")
    p.add_argument("--seeds", default="1,2,3", help="seeds of the 'seeds' stage")
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--threads", type=int, default=4, help="torch threads of the CPU reference fits")
    p.add_argument("--cpu-reference", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    OUT, DEV = Path(args.out), args.device
    OUT.mkdir(parents=True, exist_ok=True)
    if args.cpu_reference is not None:
        data = load_split("kin8nm", 0, args.data_dir, test_limit=500)
        print(json.dumps(_fit_and_evaluate("LV-GP-GP", data, "cpu", args.cpu_reference, threads=args.threads,
                                           seed=args.seed)), flush=True)
        return
    gpu = torch.cuda.get_device_name(0) if DEV.startswith("cuda") else "none"
    emit(stage="info", device=DEV, torch=torch.__version__, cuda=torch.version.cuda, gpu=gpu,
         deepgp=deepgp.__version__)
    for stage in args.stages.split(","):
        t0 = time.perf_counter()
        try:
            {"check": stage_check, "seeds": stage_seeds, "steps": stage_steps, "predict": stage_predict,
             "jobs": stage_jobs, "runner": stage_runner}[stage](args)
        except Exception as err:  # noqa: BLE001 — report and go on to the next stage
            import traceback

            traceback.print_exc()
            emit(stage=stage, error=f"{type(err).__name__}: {err}")
        emit(stage=stage, what="stage_seconds", seconds=time.perf_counter() - t0)


if __name__ == "__main__":
    main()
