"""GPflux 0.4 deep GP trained on given rows: test log density (KDE and mixture), RMSE at snapshots of one run.

    .venv-peers/bin/python benchmarks/peers/gpflux_quality.py --data FILE.npz --model GP-GP-GP|LV-GP-GP
        [--snapshots 1000,2000,5000,10000,20000] [--draws 2000] [--seed 0] [--threads 1]

Called by ``benchmarks/time_to_quality.py --peers``, which writes FILE.npz (X, Y: the training rows;
X_eval, Y_eval: the evaluation points, all standardised as deepgp's runner does), so that both
systems see exactly the same data. Prints one JSON line per snapshot.

The model is GPflux's usual deep GP (not the paper's architecture): the first GP layer maps the
inputs to 5 outputs with a fixed linear mean (the principal directions W), the second 5 → 5 with
an identity mean, the last 5 → 1 with a zero mean; each layer one squared-exponential kernel
shared by its GPs (lengthscales √d_in, variance trained), k-means inducing inputs (pushed through
W for the later layers), inner q_sqrt scaled to 1e-5, σ² from 0.01. LV-GP-GP puts a
``LatentVariableLayer`` (prior N(0, 1), an amortised encoder on [x, y]: 20-20 tanh units → mean and
softplus(o − 3) std) first, and pads the first layer's inducing inputs (N(0, 1)) and W (zeros) for
w. Trained by plain Adam (lr 0.005) on every parameter, B = 512, one sample (VI).

Evaluation as deepgp's ``split_metrics``: S draws per point of the final layer's (μ_s, v_s) (the
latent variable from its prior), y_s = μ_s + sqrt(v_s + σ²) ε; the KDE log density (Silverman's
bandwidth 1.06 σ̂ S^(-1/5), σ̂ with ddof 1), the mixture log (1/S) Σ_s N(y; μ_s, v_s + σ²), and the
RMSE of the draws' mean. Wall-clock excludes evaluation.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

THREADS = common.argv_threads()
common.set_thread_env(THREADS)
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import scipy.cluster.vq  # noqa: E402
import scipy.special  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(THREADS)
tf.config.threading.set_inter_op_parallelism_threads(THREADS)

import gpflow  # noqa: E402
import gpflux  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402
import tf_keras  # noqa: E402
from gpflux_dgp import gp_layer  # noqa: E402  (the same GP layer as the step-time peer)

LOG_2PI = np.log(2 * np.pi)


class Encoder(tf_keras.layers.Layer):
    """[x, y] → (mean, std) of q(w): 20-20 tanh units, std = softplus(o − 3)."""

    def __init__(self, latent_dim=1, hidden=(20, 20)):
        super().__init__(dtype="float64")
        self.hidden = [tf_keras.layers.Dense(h, activation="tanh", dtype="float64") for h in hidden]
        self.out = tf_keras.layers.Dense(2 * latent_dim, dtype="float64")
        self.latent_dim = latent_dim

    def call(self, inputs, training=None):
        h = inputs
        for layer in self.hidden:
            h = layer(h)
        o = self.out(h)
        return o[..., : self.latent_dim], tf.nn.softplus(o[..., self.latent_dim:] - 3.0)


def build(model: str, X, rng):
    N, D = X.shape
    M, L = common.INDUCING, common.HIDDEN
    W = np.linalg.svd(X - X.mean(0), full_matrices=False)[2][:L].T  # [D, L]
    if W.shape[1] < L:
        W = np.hstack([W, np.zeros((D, L - W.shape[1]))])
    distinct = np.unique(X, axis=0)
    Z = distinct if len(distinct) <= M else scipy.cluster.vq.kmeans2(distinct, M, minit="points", seed=rng)[0]
    layers = []
    Z1, A = Z, W
    if model == "LV-GP-GP":
        prior = tfp.distributions.MultivariateNormalDiag(np.zeros(1), np.ones(1))
        layers.append(gpflux.layers.LatentVariableLayer(prior, Encoder()))
        Z1 = np.hstack([Z, rng.standard_normal((len(Z), 1))])
        A = np.vstack([W, np.zeros((1, L))])
    elif model != "GP-GP-GP":
        raise SystemExit(f"model must be GP-GP-GP or LV-GP-GP, got {model!r}")
    layers += [
        gp_layer(Z1, L, N, gpflow.mean_functions.Linear(A=A), 1e-5),
        gp_layer(Z @ W, L, N, gpflow.mean_functions.Identity(), 1e-5),
        gp_layer(Z @ W, 1, N, gpflow.mean_functions.Zero(), 1.0),
    ]
    likelihood = gpflow.likelihoods.Gaussian(variance=0.01)
    dgp = gpflux.models.DeepGP(layers, gpflux.layers.LikelihoodLayer(likelihood), input_dim=D, target_dim=1)
    return dgp, layers, likelihood


def evaluate(layers, likelihood, Xe, Ye, S, rng_seed):
    """Mean KDE and mixture log density and RMSE over the evaluation points (S draws per point)."""
    tf.random.set_seed(rng_seed)
    noise = float(likelihood.variance.numpy())
    kde, mix, sq = [], [], []
    rng = np.random.default_rng(rng_seed)
    chunk = max(1, 20000 // S)
    for i in range(0, len(Xe), chunk):
        x, y = Xe[i:i + chunk], Ye[i:i + chunk, 0]
        n = len(x)
        h = tf.constant(np.repeat(x[None], S, 0).reshape(S * n, -1))
        for layer in layers[:-1]:
            if isinstance(layer, gpflux.layers.LatentVariableLayer):
                h = layer(h, training=False)
            else:
                h = tf.convert_to_tensor(layer(h, training=False))  # one draw per row
        f = layers[-1](h, training=False)
        mu = f.mean().numpy().reshape(S, n)
        var = f.variance().numpy().reshape(S, n) + noise
        draws = mu + np.sqrt(var) * rng.standard_normal((S, n))
        bw = np.maximum(1.06 * draws.std(0, ddof=1) * S ** -0.2, 1e-12)
        z = (y[None] - draws) / bw
        kde.append(scipy.special.logsumexp(-0.5 * z**2 - np.log(bw) - 0.5 * LOG_2PI, axis=0) - np.log(S))
        lp = -0.5 * (LOG_2PI + np.log(var)) - 0.5 * (y[None] - mu) ** 2 / var
        mix.append(scipy.special.logsumexp(lp, axis=0) - np.log(S))
        sq.append((draws.mean(0) - y) ** 2)
    mean = [float(np.concatenate(parts).mean()) for parts in (kde, mix, sq)]
    return mean[0], mean[1], float(np.sqrt(mean[2]))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--model", default="GP-GP-GP")
    p.add_argument("--snapshots", default="1000,2000,5000,10000,20000")
    p.add_argument("--draws", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    snaps = sorted({int(s) for s in args.snapshots.split(",")})
    gpflow.config.set_default_float(np.float64)
    tf.random.set_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    data = np.load(args.data)
    X, Y, Xe, Ye = (data[k].astype(np.float64) for k in ("X", "Y", "X_eval", "Y_eval"))
    dgp, layers, likelihood = build(args.model, X, rng)
    model = dgp.as_training_model()
    model.compile(tf_keras.optimizers.Adam(learning_rate=0.005))
    batch = min(common.BATCH, len(X))
    ds = (tf.data.Dataset.from_tensor_slices({"inputs": X, "targets": Y}).shuffle(len(X), seed=args.seed).repeat()
          .batch(batch, drop_remainder=True).prefetch(2))
    step = int(np.gcd.reduce(snaps))
    clock = {"start": time.perf_counter(), "eval": 0.0}

    def snapshot(epoch, logs):
        trained = (epoch + 1) * step
        if trained not in snaps:
            return
        t0 = time.perf_counter()
        seconds = t0 - clock["start"] - clock["eval"]
        kde, mix, rmse = evaluate(layers, likelihood, Xe, Ye, args.draws, args.seed)
        clock["eval"] += time.perf_counter() - t0
        print(json.dumps(dict(iterations=trained, seconds=round(seconds, 1), bound=-float(logs["loss"]), kde=kde,
                              mixture=mix, rmse=rmse, gpflux=gpflux.__version__)), flush=True)

    # one fit over the repeated data set (its iterator runs on across epochs), evaluated at the snapshots
    model.fit(ds, epochs=snaps[-1] // step, steps_per_epoch=step, verbose=0,
              callbacks=[tf_keras.callbacks.LambdaCallback(on_epoch_end=snapshot)])

if __name__ == "__main__":
    main()
