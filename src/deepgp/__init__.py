"""deepgp: deep Gaussian processes with latent variables, trained by importance-weighted VI.

Salimbeni, Dutordoir, Hensman & Deisenroth, "Deep Gaussian Processes with Importance-Weighted
Variational Inference", ICML 2019.
"""

from importlib.metadata import PackageNotFoundError, version

from .config import ModelConfig, TrainConfig
from .kernels import RBF, Matern32, Matern52
from .layers import GPLayer, LatentVariableLayer
from .likelihoods import GaussianLikelihood
from .linalg import CholeskyError
from .memory import MemoryBudgetError
from .model import DeepGP, parse_spec
from .natgrad import NaturalGradientError
from .objectives import elbo_iw, elbo_vi
from .training import fit


def _source_version() -> str:
    """The version declared in the source tree's pyproject.toml ("0+unknown" without one): what a tree run
    without installing (``PYTHONPATH=src``, on a GPU machine say) records in its files and results rows."""
    import re
    from pathlib import Path

    try:
        text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8")
    except (OSError, IndexError):  # (IndexError: a package at the file system's root)
        return "0+unknown"
    # the [project] table alone, up to the next table (tomllib is 3.11+; this package runs on 3.10)
    table = re.search(r"^\[project\][ \t]*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    name = table and re.search(r"""^name\s*=\s*["']deepgp["']""", table.group(1), re.M)
    found = table and name and re.search(r"""^version\s*=\s*["']([^"']+)["']""", table.group(1), re.M)
    return found.group(1) if found else "0+unknown"


def _find_version() -> str:
    """The version, declared once in pyproject.toml: a source tree's own first (``PYTHONPATH=src``
    beside an installed deepgp of another version must record the code that ran), else the
    installed package's metadata."""
    found = _source_version()
    if found == "0+unknown":
        try:
            found = version("deepgp")
        except PackageNotFoundError:
            pass
    return found


__version__ = _find_version()
__all__ = [
    "DeepGP", "GPLayer", "LatentVariableLayer", "GaussianLikelihood", "RBF", "Matern52", "Matern32",
    "CholeskyError", "NaturalGradientError", "MemoryBudgetError", "elbo_vi", "elbo_iw", "fit", "parse_spec",
    "__version__", "DeepGPRegressor", "ModelConfig", "TrainConfig",
]


def __getattr__(name):  # DeepGPRegressor on first use: `import deepgp` stays free of scikit-learn
    if name == "DeepGPRegressor":
        from .estimator import DeepGPRegressor

        return DeepGPRegressor
    raise AttributeError(f"module 'deepgp' has no attribute {name!r}")
