"""Early stopping: part of the training rows held out, scored as training goes, the best state kept.

With ``TrainConfig(early_stopping=True)`` :func:`deepgp.fit` trains on all but a held-out part of
its rows (:func:`split_rows`: the last round(f·N) of a permutation drawn under the run's seed) and,
every ``validation_every`` iterations, scores the held-out rows (:func:`held_out_density`, the
mean predictive log density); after ``patience`` scores without a new best it stops, and the model
it returns is the best one scored (:class:`EarlyStopping`). The held-out rows never enter a step.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .linalg import seeded

# S, the predictive draws per held-out point of a score: the mixture over 100 draws ranks the states of
# one run as the validation parts' 1,000-draw estimate does (benchmarks/notes/ideas.md, early stopping)
DRAWS = 100
# every score draws the same random numbers (common random numbers): two scores differ by the model alone
SCORE_SEED = 0


def split_rows(n: int, fraction: float, seed: int | None) -> tuple[np.ndarray, np.ndarray]:
    """(the rows trained on, the rows held out) of ``n``, each sorted: the held-out rows are the last
    round(``fraction``·n) of a permutation drawn by ``numpy.random.default_rng(seed)`` (seed None: 0, so that
    the rows held out are a function of the run's settings and a resumed run holds out the same ones).
    A fraction that leaves no held-out row or fewer than 2 training rows is a ValueError naming it."""
    held = round(fraction * n)
    if held < 1 or n - held < 2:
        raise ValueError(f"validation_fraction={fraction!r} of {n} training rows holds out {held}; early stopping "
                         "needs at least 1 held-out row and 2 rows to train on")
    order = np.random.default_rng(0 if seed is None else seed).permutation(n)
    return np.sort(order[:-held]), np.sort(order[-held:])


@torch.no_grad()
def held_out_density(model, X: torch.Tensor, Y: torch.Tensor, draws: int = DRAWS) -> float:
    """(1/N_v) Σ_n log (1/S) Σ_s N(y_n; μ_s(x_n), s_s²(x_n) + σ²): the mixture estimate of the predictive
    log density over S = ``draws`` draws, averaged over the held-out rows X [N_v, D], Y [N_v, D_y]; drawn
    under :data:`SCORE_SEED`, the caller's random stream untouched."""
    return float(np.mean(model.predictive_log_density(X, Y, draws, "mixture", seed=SCORE_SEED)))


@torch.no_grad()
def held_out_bound(model, objective, X: torch.Tensor, Y: torch.Tensor, numerics) -> float:
    """The training bound's data term per held-out row: (objective + KL) / N, i.e. (1/N_v) Σ_n
    [logsumexp_k ℓ_n^k − log K] for IW, (1/N_v) Σ_n mean_s E log p(y_n | f_s) for VI
    (:mod:`deepgp.objectives`), at X [N_v, D], Y [N_v, D_y]; drawn under :data:`SCORE_SEED`."""
    with seeded(SCORE_SEED, model.device):
        return float((objective(model, X, Y, numerics=numerics) + model.kl()) / model.num_data)


class EarlyStopping:
    """The held-out rows X [N_v, D], Y [N_v, D_y] scored every ``every`` iterations; stop once ``patience``
    scores in a row were no better than the best. ``score(model, X, Y)`` → a float, higher is better
    (default :func:`held_out_density`); a non-finite score is never a new best.

    Its state (the scores, the best model's state, the count since it) goes into fit's checkpoint
    (:meth:`state_dict`, :meth:`check_state`, :meth:`load_state_dict`).
    """

    def __init__(self, model, X: torch.Tensor, Y: torch.Tensor, every: int, patience: int, score=None):
        self.model, self.X, self.Y, self.every, self.patience = model, X, Y, every, patience
        self.score = held_out_density if score is None else score
        self.evaluations: list[tuple[int, float]] = []  # (iterations done, score)
        self.best_state: dict[str, torch.Tensor] | None = None
        self.best_iteration: int | None = None
        self.waited = 0  # scores since the best
        self.stopped_at: int | None = None

    @property
    def best(self) -> float:
        return -math.inf if self.best_iteration is None else dict(self.evaluations)[self.best_iteration]

    def due(self, iterations: int) -> bool:
        """Whether the state after ``iterations`` iterations is scored."""
        return iterations % self.every == 0

    def evaluate(self, iterations: int) -> bool:
        """Score the model after ``iterations`` iterations and keep it if it is the best; True: stop now."""
        value = self.score(self.model, self.X, self.Y)
        self.model.train()  # (the score put the model in evaluation mode)
        if math.isfinite(value) and value > self.best:
            self.best_iteration, self.waited = iterations, 0
            self.best_state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        else:
            self.waited += 1
        self.evaluations.append((iterations, value))
        if self.waited >= self.patience:
            self.stopped_at = iterations
        return self.stopped_at is not None

    def restore(self) -> None:
        """The best state scored into the model (none scored yet: the model stays as it is)."""
        if self.best_state is not None:
            self.model.load_state_dict(self.best_state)

    # -- checkpoint ---------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        evaluations = torch.tensor(self.evaluations, dtype=torch.float64).reshape(-1, 2)
        return dict(evaluations=evaluations, waited=self.waited,
                    best_iteration=-1 if self.best_iteration is None else self.best_iteration,
                    stopped_at=-1 if self.stopped_at is None else self.stopped_at,
                    best_state={} if self.best_state is None else {k: v.cpu() for k, v in self.best_state.items()})

    def check_state(self, state: dict, iteration: int) -> None:
        """A ValueError unless ``state`` is one this run could have saved after ``iteration`` iterations:
        scores at multiples of ``every`` up to it, a best among them with the model's state, a count
        since the best that agrees with the scores, a stop only at the last score and only at ``patience``."""
        evaluations = state["evaluations"]
        if not (isinstance(evaluations, torch.Tensor) and evaluations.dtype == torch.float64
                and evaluations.dim() == 2 and evaluations.shape[1] == 2):
            raise ValueError("its early-stopping scores are not (iteration, score) pairs")
        done = [int(i) for i in evaluations[:, 0].tolist()]
        if done != list(range(self.every, iteration + 1, self.every)) or evaluations[:, 0].tolist() != done:
            raise ValueError(f"its early-stopping scores are not every {self.every} iterations up to {iteration}")
        scores = evaluations[:, 1].tolist()
        best, waited, stopped = state["best_iteration"], state["waited"], state["stopped_at"]
        finite = [i for i, s in enumerate(scores) if math.isfinite(s)]
        expected_best = max(finite, key=lambda i: (scores[i], -i)) if finite else None
        if best != (-1 if expected_best is None else done[expected_best]):
            raise ValueError("its best early-stopping iteration is not the one with the best score")
        if waited != len(done) - 1 - (-1 if expected_best is None else expected_best) or waited > self.patience:
            raise ValueError("its count of scores since the best does not match its scores")
        if stopped != (iteration if waited >= self.patience else -1):
            raise ValueError("its early stop does not match its scores")
        own = self.model.state_dict()
        saved = state["best_state"]
        if not isinstance(saved, dict) or (saved and set(saved) != set(own)) or (not saved) != (best == -1) or any(
                not isinstance(saved[k], torch.Tensor) or saved[k].shape != own[k].shape
                or saved[k].dtype != own[k].dtype for k in saved):
            raise ValueError("its best state is not this model's")

    def load_state_dict(self, state: dict) -> None:
        """A state checked by :meth:`check_state` into this object (the best state onto the model's device)."""
        self.evaluations = [(int(i), float(s)) for i, s in state["evaluations"].tolist()]
        self.waited = state["waited"]
        self.best_iteration = None if state["best_iteration"] == -1 else state["best_iteration"]
        self.stopped_at = None if state["stopped_at"] == -1 else state["stopped_at"]
        device = self.model.device
        self.best_state = {k: v.to(device) for k, v in state["best_state"].items()} or None
