"""The captured training step: one iteration of :func:`deepgp.fit` replayed as one CUDA graph.

On a GPU an eager step is bound by launching its ~3,000 small kernels from Python, not by its
arithmetic. :class:`CapturedStep` records the whole iteration once — the minibatch gather, the
bound, its backward pass, Adam and the natural-gradient step — and then replays it with one
launch per iteration. Replay repeats the recorded kernels on the same memory, so the step works
on fixed buffers (the minibatch indices, γ, the learning rate) that the host refills between
replays, and it can take no decision on the host. The two decisions of the eager step become
flags on the device, read once after each replay with the bound:

* a Cholesky factor that failed at its first jitter (:attr:`deepgp.linalg.Numerics.deferred`): the
  state from before the step is put back (the step copies it aside first) and the step is redone
  eagerly, where the jitter retries happen — a failed step is never kept;
* a natural-gradient step that was not positive definite at γ
  (:meth:`deepgp.natgrad.NaturalGradient.step_deferred` leaves q(v) as it was): the host halves from
  γ/2 on the same gradients (:meth:`~deepgp.natgrad.NaturalGradient.complete_deferred`), as the eager
  step would have;
* a non-finite bound: the state is put back, and fit raises as it does eagerly.

The recorded function is :meth:`CapturedStep.body`, the eager step's arithmetic on the fixed
buffers. Without CUDA (``graph=False``) :meth:`~CapturedStep.run` calls it directly — the same
buffers, flags and redo logic — which is how the tests check them on the CPU. The redo, the halving
and the divergence check around it are :class:`deepgp.steps.Captured`'s.
"""

from __future__ import annotations

import contextlib

import torch

from .linalg import PLAIN, Numerics
from .natgrad import NaturalGradient

# eager runs of the body on a side stream before capture (CUDA's libraries create their handles
# and workspaces on first use, which must not happen while recording)
WARMUP = 3


def capturable_adam(params, lr: float) -> torch.optim.Adam:
    """Adam as a captured step needs it: state on the device (``capturable``), the multi-tensor
    implementation (it takes the learning rate as a device tensor while recording)."""
    return torch.optim.Adam(params, lr=lr, foreach=True, capturable=True)


class CapturedStep:
    """One training iteration on fixed buffers; replayed from a CUDA graph when ``graph``.

    Args:
        model: the DeepGP being trained.
        X: its (checked) training inputs [N, D], on the model's device.
        Y: its training targets [N, D_y].
        objective: ``objective(model, xb, yb, numerics=...)`` → the bound (a scalar tensor).
        adam: the optimiser of every parameter but the q(v) ``natural`` trains (made by
            :func:`capturable_adam` when ``graph``).
        natural: the natural-gradient optimiser of the final layer's q(v) (and the inner layers', with
            natgrad_inner); None: Adam trains every q(v).
        batch_size: B, the length of every minibatch.
        graph: record a CUDA graph after :data:`WARMUP` eager runs (CUDA only).
        numerics: how the bound computes; its Cholesky failures are flagged on the device here.

    :meth:`run` returns ``(bound, cholesky_failed, natgrad_failed)`` as Python values — the last a
    list, one flag per layer of ``natural``: the one host read of an iteration.
    """

    def __init__(self, model, X: torch.Tensor, Y: torch.Tensor, objective, adam: torch.optim.Adam,
                 natural: NaturalGradient | None, batch_size: int, graph: bool, numerics: Numerics = PLAIN):
        if graph and X.device.type != "cuda":
            raise ValueError(f"a CUDA graph needs the model on a GPU, not {X.device}")
        self.model, self.X, self.Y, self.objective, self.adam = model, X, Y, objective, adam
        self.natural, self.graph = natural, graph
        device = X.device
        self.idx = torch.zeros(batch_size, dtype=torch.long, device=device)
        self.gamma = torch.zeros((), dtype=torch.float64, device=device)
        self.lr = torch.zeros((), dtype=torch.float64, device=device)
        self.cholesky_failed = torch.zeros((), dtype=torch.bool, device=device)
        self.numerics = numerics.deferring(self.cholesky_failed)
        self.out: torch.Tensor | None = None  # [2 + natural layers]: bound, cholesky failed, natgrad failed
        self.grads: list[tuple[torch.Tensor, torch.Tensor]] = []  # each natural layer's ∂(−F)/∂(m, R)
        self.written: list[torch.Tensor | None] = []
        self.backup: list[torch.Tensor] | None = None
        self.runs = 0
        self.cuda_graph: torch.cuda.CUDAGraph | None = None
        self.stream = torch.cuda.Stream(device) if graph else None

    # -- the state a failed step restores --------------------------------------------------------
    def _state(self) -> list[torch.Tensor]:
        """Every tensor a step changes: the parameters and Adam's buffers."""
        tensors = [p.data for p in self.model.parameters()]
        for p in (p for group in self.adam.param_groups for p in group["params"]):
            tensors.extend(t for t in self.adam.state[p].values() if isinstance(t, torch.Tensor))
        return tensors

    def _saved(self) -> list[torch.Tensor]:
        """The copies the step makes of the state before it changes it (allocated by the first :meth:`run`)."""
        if self.backup is None:
            raise RuntimeError("the captured step has not run yet: there is no state from before it")
        return self.backup

    def restore(self) -> None:
        """Put back the state from before the last step."""
        with torch.no_grad():
            torch._foreach_copy_(self._state(), self._saved())

    # -- the step --------------------------------------------------------------------------------
    def body(self) -> None:
        """One iteration with no host read, on the buffers: what a replay repeats."""
        with torch.no_grad():
            torch._foreach_copy_(self._saved(), self._state())
            self.cholesky_failed.zero_()
        self.adam.zero_grad(set_to_none=True)
        if self.natural is not None:
            self.natural.zero_grad(set_to_none=True)
        xb, yb = self.X[self.idx], self.Y[self.idx]
        bound = self.objective(self.model, xb, yb, numerics=self.numerics)  # Cholesky failures: flagged
        (-bound).backward()
        self.adam.step()
        # the gradients this body wrote (a replay rewrites the recorded ones): kept for the host's
        # halving, and so that the graph's buffers stay referenced after an eager redo replaces .grad
        self.written = [p.grad for p in self.model.parameters()]
        self.grads = [] if self.natural is None else self.natural.gradients()
        failed = [] if self.natural is None else self.natural.step_deferred(self.grads, self.gamma)
        self.out = torch.stack([bound.detach().double(), self.cholesky_failed.double(), *(f.double() for f in failed)])

    def run(self, idx: torch.Tensor, lr: float, gamma: float) -> tuple[float, bool, list[bool]]:
        """The iteration on minibatch ``idx`` [B] with learning rate ``lr`` and step ``gamma``."""
        with torch.no_grad():
            self.idx.copy_(idx)
            self.gamma.fill_(gamma)
            self.lr.fill_(lr)
        if self.backup is None:  # Adam's buffers exist once it has stepped (fit's first iteration is eager)
            self.backup = [t.clone() for t in self._state()]
        if not self.graph:
            self.body()
        elif self.cuda_graph is not None:
            self.cuda_graph.replay()
        else:
            self._warm_up_or_record()
        self.runs += 1
        if self.out is None:  # (body, which every path above runs or replays, sets it)
            raise RuntimeError("the captured step wrote no bound")
        bound, cholesky_failed, *natgrad_failed = self.out.tolist()
        return bound, bool(cholesky_failed), [bool(f) for f in natgrad_failed]

    def _warm_up_or_record(self) -> None:
        stream = self.stream
        if stream is None:  # (__init__ makes one with graph, the only case that records)
            raise RuntimeError("a captured step without a graph has no stream to record on")
        stream.wait_stream(torch.cuda.current_stream())
        # (torch's Cholesky on CUDA ≥ 11.3 is cuSOLVER's, batched or not: nothing waits on the host)
        with torch.cuda.stream(stream):
            if self.runs < WARMUP:
                self.body()
            else:
                with _lr_as(self.adam, self.lr):
                    self.cuda_graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(self.cuda_graph, stream=stream):
                        self.body()
        torch.cuda.current_stream().wait_stream(stream)
        if self.cuda_graph is not None:
            self.cuda_graph.replay()  # recording ran nothing: this is the step


@contextlib.contextmanager
def _lr_as(adam: torch.optim.Adam, lr: torch.Tensor):
    """While recording, Adam reads its learning rate from the device tensor ``lr`` (refilled before
    each replay); outside, the groups keep their Python floats for the schedule and checkpoints."""
    floats = [group["lr"] for group in adam.param_groups]
    for group in adam.param_groups:
        group["lr"] = lr
    try:
        yield
    finally:
        for group, value in zip(adam.param_groups, floats):
            group["lr"] = value
