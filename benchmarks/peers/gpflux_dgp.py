"""GPflux 0.4 deep GP (GP-GP-GP, doubly stochastic VI, 1 sample): seconds per training iteration.

    .venv-peers/bin/python benchmarks/peers/gpflux_dgp.py [--dataset kin8nm] [--threads 1]
        [--iterations 100] [--warmup 20] [--dtype float64|float32]

Built from GPflux's public layers at the setting of deepgp's step_time.py: two hidden GPLayers of
5 GPs sharing one ARD squared-exponential kernel and one set of M=128 inducing inputs (k-means
free: a random subset of X for the first layer), a final GPLayer of 1 GP, Gaussian likelihood,
whitened q(u), float64 (or float32 with --dtype: GPflow's default float, jitter unchanged);
trained by Keras ``Model.fit`` (a compiled tf.function step) with Adam (lr 0.005) on minibatches
of B=512 drawn by tf.data. Differences from deepgp's GP-GP-GP that GPflux's API implies: hidden
layers output their 5 GP values plus a linear mean function (D→5, then identity) instead of
deepgp's D-dimensional [W, I] map, and there is no natural-gradient step. Timing uses a Keras
callback after every batch; prints one JSON line.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

THREADS = common.argv_threads()
common.set_thread_env(THREADS)
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # GPflux needs Keras 2 (tf-keras) under TF 2.16
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(THREADS)
tf.config.threading.set_inter_op_parallelism_threads(THREADS)

import gpflow  # noqa: E402
import gpflux  # noqa: E402
import tf_keras  # noqa: E402
from gpflow.inducing_variables import InducingPoints, SharedIndependentInducingVariables  # noqa: E402
from gpflow.kernels import SharedIndependent, SquaredExponential  # noqa: E402


def gp_layer(Z: np.ndarray, num_gps: int, num_data: int, mean_function, q_sqrt_scale: float):
    D = Z.shape[1]
    kernel = SharedIndependent(SquaredExponential(lengthscales=np.full(D, np.sqrt(D))), output_dim=num_gps)
    inducing = SharedIndependentInducingVariables(InducingPoints(Z.copy()))
    layer = gpflux.layers.GPLayer(kernel, inducing, num_data, mean_function=mean_function, num_latent_gps=num_gps,
                                  whiten=True, verbose=False)
    layer.q_sqrt.assign(layer.q_sqrt * q_sqrt_scale)
    return layer


def main() -> None:
    args = common.peer_args()
    dtype = np.dtype(args.dtype)
    gpflow.config.set_default_float(dtype)
    tf.random.set_seed(0)
    rng = np.random.default_rng(0)
    X, Y = (a.astype(dtype) for a in common.load_dataset(args.dataset))
    N, D = X.shape
    M, L = common.INDUCING, common.HIDDEN
    W = np.linalg.svd(X - X.mean(0), full_matrices=False)[2][:L].T.astype(dtype)  # [D, L] principal directions
    layers = [
        gp_layer(X[rng.choice(N, M, replace=False)], L, N, gpflow.mean_functions.Linear(A=W), 1e-5),
        gp_layer(rng.standard_normal((M, L)).astype(dtype), L, N, gpflow.mean_functions.Identity(), 1e-5),
        gp_layer(rng.standard_normal((M, L)).astype(dtype), 1, N, gpflow.mean_functions.Zero(), 1.0),
    ]
    dgp = gpflux.models.DeepGP(layers, gpflux.layers.LikelihoodLayer(gpflow.likelihoods.Gaussian(variance=0.01)))
    model = dgp.as_training_model()
    model.compile(tf_keras.optimizers.Adam(learning_rate=0.005))
    data = (tf.data.Dataset.from_tensor_slices({"inputs": X, "targets": Y}).shuffle(N, seed=0).repeat()
            .batch(common.BATCH, drop_remainder=True).prefetch(2))
    clock = common.StepClock(args.warmup)
    history = model.fit(data, epochs=1, steps_per_epoch=args.warmup + args.iterations, verbose=0,
                        callbacks=[tf_keras.callbacks.LambdaCallback(on_train_batch_end=clock.tick)])
    loss = float(history.history["loss"][-1])
    if not np.isfinite(loss):
        raise SystemExit("GPflux loss became non-finite")
    common.emit(dict(name="GPflux", version=gpflux.__version__, tensorflow=tf.__version__, gpflow=gpflow.__version__,
                     model="GP-GP-GP", method="vi", num_samples=1, threads=args.threads, dataset=args.dataset,
                     dtype=args.dtype, final_loss=loss, other_cores_busy=clock.other_cores_busy(),
                     **common.step_stats(clock.stamps, args.warmup)))


if __name__ == "__main__":
    main()
