from .gp import GPLayer
from .latent import LatentVariableLayer

__all__ = ["GPLayer", "LatentVariableLayer"]
