"""NGBoost (Duan et al., ICML 2020) with a Normal predictive, by the ``ngboost`` package."""

from __future__ import annotations

import numpy as np
import torch

from .base import Peer


class NGBoost(Peer):
    """p(y | x) = N(y; μ(x), σ²(x)), (μ, log σ) boosted by natural gradients of the log score with
    depth-3 regression trees.

    The package's defaults (Normal, LogScore, natural gradient, learning rate 0.01, its default tree
    learner, no row or column subsampling) but the number of boosting stages: at most 2,000, the
    paper's UCI setting (the package's default, 500, is a fixed budget; here the held-out 10% of the
    training rows decides), passed through ``fit(X_val=, Y_val=, early_stopping_rounds=)`` with 200
    rounds (the package documents no value; 200 against 50 on validation parts, README.md). Prediction
    uses the stages up to the best validation loss (``pred_dist(max_iter=)``: the package keeps the
    ``early_stopping_rounds`` stages after it).
    """

    name = "ngboost"
    DEFAULTS = dict(n_estimators=2000, learning_rate=0.01, early_stopping_rounds=200)

    def fit(self, X, y, X_val, y_val, seed=0):
        from ngboost import NGBRegressor
        from ngboost.distns import Normal
        from ngboost.learners import default_tree_learner
        from sklearn.base import clone

        s = self.settings
        # the default learner with a seed: a fit is reproducible (it only breaks ties between split features)
        base = clone(default_tree_learner).set_params(random_state=seed)
        self.model = NGBRegressor(Dist=Normal, Base=base, n_estimators=s["n_estimators"],
                                  learning_rate=s["learning_rate"], verbose=False, random_state=seed)
        self.model.fit(X, y, X_val=X_val, Y_val=y_val, early_stopping_rounds=s["early_stopping_rounds"])
        self.stages = self.model.best_val_loss_itr + 1
        val = self.model.evals_result["val"]["LOGSCORE"]
        self.fit_info = {"best_iteration": self.stages, "iterations": len(val)}
        return self

    def distribution(self, X):
        params = self.model.pred_dist(X.numpy(), max_iter=self.stages).params
        loc, scale = (torch.as_tensor(np.asarray(params[k]), dtype=torch.float64) for k in ("loc", "scale"))
        return torch.distributions.Normal(loc, scale, validate_args=False)
