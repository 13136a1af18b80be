"""GPyTorch 1.15 deep GP (GP-GP-GP, doubly stochastic VI, 1 sample): seconds per training iteration.

    .venv-peers/bin/python benchmarks/peers/gpytorch_dgp.py [--dataset kin8nm] [--threads 1]
        [--iterations 100] [--warmup 20] [--dtype float64|float32]

The model follows GPyTorch's documented DeepGP recipe (DeepGPLayer + VariationalStrategy with a
CholeskyVariationalDistribution, learned inducing inputs, ScaleKernel(RBF, ARD), LinearMean,
DeepApproximateMLL(VariationalELBO)), at the benchmark setting of deepgp's step_time.py: two
hidden layers of 5 GPs, a final layer of 1 GP, M=128, B=512, float64 (or float32 with --dtype),
Adam (lr 0.005), one likelihood sample (``num_likelihood_samples(1)``, deepgp's VI with 1 sample).
Differences from deepgp's GP-GP-GP that GPyTorch's API implies: each of the 5 GPs of a layer has
its own inducing inputs (batched), hidden layers output the 5 GP values (+ linear mean) instead of
deepgp's D-dimensional [W, I] map, and there is no natural-gradient step (all parameters by Adam).
Prints one JSON line (median seconds per iteration, peak RSS).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

common.set_thread_env(common.argv_threads())

import gpytorch  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from gpytorch.distributions import MultivariateNormal  # noqa: E402
from gpytorch.kernels import RBFKernel, ScaleKernel  # noqa: E402
from gpytorch.means import LinearMean  # noqa: E402
from gpytorch.mlls import DeepApproximateMLL, VariationalELBO  # noqa: E402
from gpytorch.models.deep_gps import DeepGP, DeepGPLayer  # noqa: E402
from gpytorch.variational import CholeskyVariationalDistribution, VariationalStrategy  # noqa: E402


class Layer(DeepGPLayer):
    def __init__(self, inducing: torch.Tensor, output_dims: int | None):
        M, D = inducing.shape[-2:]
        batch = torch.Size([output_dims]) if output_dims is not None else torch.Size([])
        if output_dims is not None:
            inducing = inducing.expand(output_dims, M, D).clone()
        q = CholeskyVariationalDistribution(M, batch_shape=batch)
        strategy = VariationalStrategy(self, inducing, q, learn_inducing_locations=True)
        super().__init__(strategy, D, output_dims)
        self.mean_module = LinearMean(D, batch_shape=batch)
        self.covar_module = ScaleKernel(RBFKernel(batch_shape=batch, ard_num_dims=D), batch_shape=batch)

    def forward(self, x):
        return MultivariateNormal(self.mean_module(x), self.covar_module(x))


class GPGPGP(DeepGP):
    def __init__(self, X: torch.Tensor, num_inducing: int, hidden: int):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        Z = X[torch.randperm(X.shape[0], generator=g)[:num_inducing]]
        self.hidden1 = Layer(Z, hidden)
        self.hidden2 = Layer(torch.randn(num_inducing, hidden, generator=g, dtype=X.dtype), hidden)
        self.last = Layer(torch.randn(num_inducing, hidden, generator=g, dtype=X.dtype), None)
        self.likelihood = gpytorch.likelihoods.GaussianLikelihood()

    def forward(self, x):
        return self.last(self.hidden2(self.hidden1(x)))


def main() -> None:
    args = common.peer_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    Xn, Yn = common.load_dataset(args.dataset)
    dtype = getattr(torch, args.dtype)
    X, Y = torch.from_numpy(Xn).to(dtype), torch.from_numpy(Yn[:, 0]).to(dtype)
    model = GPGPGP(X, common.INDUCING, common.HIDDEN).to(dtype)
    model.likelihood.noise = 0.01
    mll = DeepApproximateMLL(VariationalELBO(model.likelihood, model, X.shape[0]))
    opt = torch.optim.Adam(model.parameters(), lr=0.005)
    clock = common.StepClock(args.warmup)
    rng = np.random.default_rng(0)
    perm, pos = rng.permutation(X.shape[0]), 0
    model.train()
    with gpytorch.settings.num_likelihood_samples(1):
        for _ in range(args.warmup + args.iterations):
            if pos + common.BATCH > len(perm):
                perm, pos = rng.permutation(X.shape[0]), 0
            idx = torch.from_numpy(perm[pos : pos + common.BATCH])
            pos += common.BATCH
            opt.zero_grad(set_to_none=True)
            loss = -mll(model(X[idx]), Y[idx])
            loss.backward()
            opt.step()
            if not torch.isfinite(loss):
                raise SystemExit("GPyTorch loss became non-finite")
            clock.tick()
    common.emit(dict(name="GPyTorch", version=gpytorch.__version__, model="GP-GP-GP", method="vi", num_samples=1,
                     threads=args.threads, dataset=args.dataset, dtype=args.dtype, torch=torch.__version__,
                     final_loss=loss.item(),
                     other_cores_busy=clock.other_cores_busy(), **common.step_stats(clock.stamps, args.warmup)))


if __name__ == "__main__":
    main()
