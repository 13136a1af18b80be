"""The conditional density estimators a deep GP is compared with ("peers"): NGBoost, a conditional
neural spline flow (zuko), a deep ensemble and a mixture density network.

Each is a :class:`~deepgp_bench.peers.base.Peer`: ``fit(X, y, X_val, y_val, seed)`` with early stopping
on (X_val, y_val), then the exact ``log_density(X, y)`` and ``sample(X, S, seed)``, y [N] in the
split's standardised units. ``python -m deepgp_bench.peers.run`` fits them on the benchmark's splits.
NGBoost needs ``ngboost``, the flow ``zuko`` (the ``peers`` extra); the ensemble and the MDN torch only.
``deepgp`` is deepgp itself (``DeepGPRegressor()``, trained on all the training rows) in the same run, with
its learning curve.
"""

from __future__ import annotations

from .base import Peer

# the data sets and the peers of a run by default (python -m deepgp_bench.peers.run), in the tables' order
DATASETS = ("boston", "concrete", "energy", "yacht", "winered", "kin8nm", "power", "naval", "forest", "protein")
PEERS = ("ngboost", "ensemble", "mdn", "flow", "deepgp")


def peer_classes() -> dict[str, type[Peer]]:
    """{name: class} of every peer (imported here, so that ``import deepgp_bench.peers`` needs neither
    ngboost nor zuko: each is imported when its peer fits)."""
    from .boosting import NGBoost
    from .deepgp_peer import DeepGPPeer
    from .ensemble import DeepEnsemble
    from .flow import SplineFlow
    from .mdn import MixtureDensityNetwork

    return {cls.name: cls for cls in (NGBoost, DeepEnsemble, MixtureDensityNetwork, SplineFlow, DeepGPPeer)}


def make_peer(name: str, **settings) -> Peer:
    """The peer ``name`` ("ngboost", "ensemble", "mdn", "flow", "deepgp") with ``settings`` over its defaults."""
    classes = peer_classes()
    if name not in classes:
        raise ValueError(f"unknown peer {name!r}; the peers are {sorted(classes)}")
    return classes[name](**settings)
