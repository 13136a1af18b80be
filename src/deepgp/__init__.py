"""deepgp: deep Gaussian processes with latent variables, trained by importance-weighted VI.

Salimbeni, Dutordoir, Hensman & Deisenroth, "Deep Gaussian Processes with Importance-Weighted
Variational Inference", ICML 2019.
"""

from .config import ModelConfig, TrainConfig, parse_spec
from .estimator import DeepGPRegressor
from .kernels import RBF, Matern32, Matern52
from .layers import GPLayer, LatentVariableLayer
from .likelihoods import GaussianLikelihood
from .linalg import CholeskyError
from .memory import MemoryBudgetError
from .model import DeepGP
from .natgrad import NaturalGradientError
from .objectives import elbo_iw, elbo_vi
from .training import fit
from .version import __version__

__all__ = [
    "DeepGP", "GPLayer", "LatentVariableLayer", "GaussianLikelihood", "RBF", "Matern52", "Matern32",
    "CholeskyError", "NaturalGradientError", "MemoryBudgetError", "elbo_vi", "elbo_iw", "fit", "parse_spec",
    "__version__", "DeepGPRegressor", "ModelConfig", "TrainConfig",
]
