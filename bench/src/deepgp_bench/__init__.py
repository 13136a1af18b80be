"""deepgp-bench: the paper's experiments on deepgp, beside the library and outside it.

The UCI benchmark's runner (:mod:`deepgp_bench.runner`) and report (:mod:`deepgp_bench.report`), the
paper's baselines (:mod:`deepgp_bench.baselines`) and an estimator that fits them
(:mod:`deepgp_bench.estimator`), the benchmark's settings (:mod:`deepgp_bench.config`) and its
commands (:mod:`deepgp_bench.cli`: ``deepgp-bench benchmark | report``, also ``deepgp benchmark |
report``). It uses deepgp's public API only; ``import deepgp`` never imports it.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("deepgp-bench")
except PackageNotFoundError:  # (a source tree run without installing)
    __version__ = "0+unknown"
