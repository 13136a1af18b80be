"""What the peers share: the early-stopping part of a training set, the predictive p(y | x) as a torch
distribution (log density and draws from one object), and Adam with early stopping.

Every peer models one output, y [N] in the split's standardised units, given x [N, D].
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import torch

# the early-stopping part: the last 10% of the training rows after a fixed permutation (default_rng(1000 +
# split)), the validation part on which deepgp's recipe was chosen (benchmarks/time_to_quality.py --part validation)
VALIDATION_FRACTION = 0.1


def early_stopping_split(X: np.ndarray, y: np.ndarray, split: int):
    """(X_fit, y_fit, X_val, y_val): the training rows permuted by ``default_rng(1000 + split)``, the last
    round(0.1 N) (at least one) held out for early stopping. X [N, D], y [N]; the test points never enter."""
    order = np.random.default_rng(1000 + split).permutation(len(X))
    n_val = max(1, round(VALIDATION_FRACTION * len(X)))
    fit_rows, val_rows = order[:-n_val], order[-n_val:]
    return X[fit_rows], y[fit_rows], X[val_rows], y[val_rows]


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """torch's CPU generator set to ``seed`` inside, and given back as it was afterwards."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def member_seed(seed: int, member: int, stream: int) -> int:
    """A seed for ``stream`` (0: initialisation, 1: shuffling) of member ``member`` of a fit seeded ``seed``:
    independent streams by numpy's SeedSequence."""
    return int(np.random.SeedSequence([seed, member, stream]).generate_state(1)[0])


ACTIVATIONS = ("relu", "tanh")  # (:func:`mlp`'s)


def setting_problem(value, default) -> str:
    """What ``value`` must be to stand for a setting whose default is ``default`` ("" if it is): every count,
    width and step of the peers is positive, so an integer default takes an integer >= 1, a float a finite
    number > 0, a tuple of integers integers >= 1, an activation one of :data:`ACTIVATIONS`."""
    def count(v) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v >= 1

    if isinstance(default, bool):
        return "" if isinstance(value, bool) else "true or false"
    if isinstance(default, int):
        return "" if count(value) else "an integer >= 1"
    if isinstance(default, float):
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        return "" if number and math.isfinite(value) and value > 0 else "a finite number > 0"
    if isinstance(default, tuple):
        widths = isinstance(value, (tuple, list)) and value and all(map(count, value))
        return "" if widths else "integers >= 1 like [50, 50]"
    if default in ACTIVATIONS:
        return "" if value in ACTIVATIONS else f"one of {', '.join(ACTIVATIONS)}"
    return "" if isinstance(value, type(default)) else f"a {type(default).__name__}"


class Peer:
    """A conditional density estimator p(y | x): ``fit``, then ``log_density`` and ``sample``.

    ``DEFAULTS`` holds every setting with its value; a subclass's docstring says where each comes from.
    After ``fit``, ``fit_info`` says what early stopping chose (best iteration or epoch, epochs run).
    """

    name = ""
    DEFAULTS: dict = {}
    # False: trained on all the training rows, with no early-stopping part (fit gets X_val = y_val = None)
    holds_out = True
    # after fit, a peer that records a learning curve holds it here (a list of {"iterations", ...}); else None
    curve: list[dict] | None = None
    # predictive draws are made for at most this many (draw, point) pairs at a time: a bound on the memory
    # of a block's draws and whatever the distribution holds per draw (a flow: its network's activations)
    draw_block = 2_000_000

    def __init__(self, **settings):
        unknown = sorted(set(settings) - set(self.DEFAULTS))
        if unknown:
            raise ValueError(f"{self.name}: unknown setting(s) {unknown}; its settings are {sorted(self.DEFAULTS)}")
        for name, value in settings.items():
            problem = setting_problem(value, self.DEFAULTS[name])
            if problem:
                raise ValueError(f"{self.name}: {name} must be {problem}, got {value!r}")
        self.settings = {**self.DEFAULTS, **settings}
        self.fit_info: dict = {}

    def watch(self, evaluate: Callable[[], dict], draws: int) -> None:
        """Called by the run before ``fit``: ``evaluate()`` gives the run's scores (means over the points) of the
        peer as it stands, ``draws`` is the run's predictive draws per point. A peer with an exact density and
        no learning curve needs neither (deepgp's entry estimates its density from ``draws`` draws and scores
        its curve with ``evaluate``)."""

    def fit(self, X: np.ndarray, y: np.ndarray, X_val: np.ndarray, y_val: np.ndarray, seed: int = 0) -> Peer:
        """Train on X [N, D], y [N], stopping early on X_val [N_val, D], y_val [N_val]; returns self."""
        raise NotImplementedError

    def distribution(self, X: torch.Tensor) -> torch.distributions.Distribution:
        """p(y | x) for X [n, D] (float64): batch shape [n], event shape [] or [1]."""
        raise NotImplementedError

    @torch.no_grad()
    def log_density(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """log p(y_n | x_n), exact: X [N, D], y [N] → [N] float64."""
        out = []
        for sl in _blocks(len(X), 1, self.draw_block):
            dist = self.distribution(torch.as_tensor(X[sl], dtype=torch.float64))
            yt = torch.as_tensor(y[sl], dtype=torch.float64)
            out.append(dist.log_prob(yt[:, None] if dist.event_shape == (1,) else yt).double())
        return torch.cat(out).numpy()

    @torch.no_grad()
    def sample(self, X: np.ndarray, num_samples: int, seed: int = 0) -> np.ndarray:
        """``num_samples`` draws of y from p(y | x_n) per point under ``seed``: X [N, D] → [S, N] float64."""
        out = []
        with seeded(seed):
            for sl in _blocks(len(X), num_samples, self.draw_block):
                draws = self.distribution(torch.as_tensor(X[sl], dtype=torch.float64)).sample((num_samples,))
                out.append(draws.reshape(num_samples, -1).double())
        return torch.cat(out, 1).numpy()


def _blocks(n: int, num_samples: int, pairs: int) -> list[slice]:
    """Slices of n points, each with at most ``pairs`` (draw, point) pairs (at least one point)."""
    size = max(1, pairs // max(num_samples, 1))
    return [slice(i, min(i + size, n)) for i in range(0, n, size)]


# -- networks trained by Adam with early stopping ----------------------------------------------------------
def mlp(inputs: int, outputs: int, hidden: tuple[int, ...], activation: str) -> torch.nn.Sequential:
    """A multilayer perceptron inputs → hidden... → outputs with ``activation`` ("relu" or "tanh") between."""
    act = {"relu": torch.nn.ReLU, "tanh": torch.nn.Tanh}[activation]
    layers: list[torch.nn.Module] = []
    for width in hidden:
        layers += [torch.nn.Linear(inputs, width), act()]
        inputs = width
    layers.append(torch.nn.Linear(inputs, outputs))
    return torch.nn.Sequential(*layers)


@dataclass
class EarlyStopping:
    """What one run of :func:`train_early_stopping` did: the epoch whose state was kept (1-based), the
    epochs run, and the validation loss after every epoch (``history[best_epoch - 1]`` is the kept one)."""

    best_epoch: int
    epochs: int
    history: list[float] = field(repr=False)

    @property
    def best_loss(self) -> float:
        return self.history[self.best_epoch - 1]


def train_early_stopping(
    module: torch.nn.Module, loss: Callable[[torch.nn.Module, torch.Tensor, torch.Tensor], torch.Tensor],
    X: torch.Tensor, y: torch.Tensor, X_val: torch.Tensor, y_val: torch.Tensor, lr: float, batch_size: int,
    max_epochs: int, patience: int, seed: int,
) -> EarlyStopping:
    """Adam on ``loss(module, x, y)`` (a mean over the batch) in shuffled batches of ``batch_size``,
    the validation loss after every epoch; stops after ``patience`` epochs without a new best (or at
    ``max_epochs``) and loads the best epoch's state back into ``module``. ``seed`` seeds the shuffling
    (the caller seeds the initialisation).

    A non-finite validation loss never counts as a best, so a diverged run ends at the last finite best.
    """
    optimiser = torch.optim.Adam(module.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed)
    best, best_epoch, best_state, history = math.inf, 0, copy.deepcopy(module.state_dict()), []
    for epoch in range(1, max_epochs + 1):
        module.train()
        for rows in torch.randperm(len(X), generator=generator).split(batch_size):
            optimiser.zero_grad()
            loss(module, X[rows], y[rows]).backward()
            optimiser.step()
        module.eval()
        with torch.no_grad():
            value = float(loss(module, X_val, y_val))
        history.append(value)
        if value < best:  # (False for NaN)
            best, best_epoch, best_state = value, epoch, copy.deepcopy(module.state_dict())
        elif epoch - best_epoch >= patience:
            break
    module.load_state_dict(best_state)
    module.eval()
    return EarlyStopping(best_epoch, len(history), history)


class NetworkPeer(Peer):
    """A peer made of ``members`` torch networks, each trained in float32 by :func:`train_early_stopping` on
    its negative log density with its own seeds (settings lr, batch_size, max_epochs, patience), then kept
    in float64 for prediction. Subclasses give ``build`` (one network for D inputs) and ``member_loss``
    (its mean negative log density of y [n] given x [n, D])."""

    @property
    def members(self) -> int:
        return self.settings.get("members", 1)

    def build(self, inputs: int) -> torch.nn.Module:
        raise NotImplementedError

    def member_loss(self, net: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def fit(self, X, y, X_val, y_val, seed=0):
        s = self.settings
        data = [torch.as_tensor(a, dtype=torch.float32) for a in (X, y, X_val, y_val)]
        self.nets, runs = [], []
        for m in range(self.members):
            with seeded(member_seed(seed, m, 0)):
                net = self.build(X.shape[1])
            runs.append(train_early_stopping(net, self.member_loss, *data, lr=s["lr"], batch_size=s["batch_size"],
                                             max_epochs=s["max_epochs"], patience=s["patience"],
                                             seed=member_seed(seed, m, 1)))
            self.nets.append(net.double())  # trained in float32; predicts in float64 (the same weights)
        self.runs = runs
        self.fit_info = {"best_epoch": [r.best_epoch for r in runs], "epochs": [r.epochs for r in runs]}
        return self


def gaussian_mixture(logits: torch.Tensor, mean: torch.Tensor, raw_variance: torch.Tensor):
    """Σ_k π_k N(y; μ_k, σ²_k) with π = softmax(logits), σ² = softplus(raw) + 10⁻⁶ (the deep ensembles'
    positive variance): each argument [n, K] → a distribution of y with batch shape [n]."""
    scale = (torch.nn.functional.softplus(raw_variance) + 1e-6).sqrt()
    return torch.distributions.MixtureSameFamily(
        torch.distributions.Categorical(logits=logits, validate_args=False),
        torch.distributions.Normal(mean, scale, validate_args=False), validate_args=False)
