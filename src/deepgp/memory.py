"""Memory a request needs, estimated from its settings before anything is allocated.

A request whose estimate exceeds the memory available is refused with a :class:`MemoryBudgetError`
(a ``MemoryError``) that names the setting and the estimate, instead of growing until the operating
system kills the process. The estimates count the tensors of the computation as it is written (the
largest ones: those that grow with the points, the samples, the inducing points and the layers'
widths), and round up; they are checked against ``available()``, which an environment variable
can set (:data:`LIMIT_ENV`).

* A model's parameters: :meth:`deepgp.DeepGP.shapes` (the model built on PyTorch's ``meta`` device,
  which allocates nothing), so that the count cannot drift from what :meth:`~deepgp.DeepGP.build` makes.
* A training step: :func:`fit_step_bytes`, the tensors one step of the bound keeps for its backward
  pass and the largest it makes there, per GP layer: the B·K rows of a minibatch of B points and K
  samples, times the layer's M inducing points and L GPs.
* Prediction: :func:`deepgp.prediction.memory_needed`.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import replace

import torch

from .layers import GPLayer
from .linalg import Numerics
from .runtime import training_numerics
from .validation import check_device

LIMIT_ENV = "DEEPGP_MEMORY_LIMIT"  # bytes, or with a unit: "8G", "512M", "2.5GB"; "0"/"off": no check
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_FALLBACK = 4 * 2**30  # where the operating system says nothing


class MemoryBudgetError(MemoryError):
    """A request refused before any allocation: its estimate exceeds the memory available.

    ``setting`` is the setting that asks for the memory (``num_samples``, ``predict_samples``, ...),
    ``value`` its value, ``needed`` and ``available`` bytes, ``what`` the tensors counted.
    """

    def __init__(self, setting: str, value, needed: float, available: float, what: str, also: str = ""):
        self.setting, self.value, self.needed, self.available, self.what, self.also = (
            setting, value, needed, available, what, also)
        super().__init__(self.message())

    def __reduce__(self):  # (raised in a worker process, it is pickled back to the parent)
        return type(self), (self.setting, self.value, self.needed, self.available, self.what, self.also)

    def message(self, option: bool = False) -> str:
        """The one-line message; ``option``: the setting spelt as the command line's option (``--num-samples``)."""
        name = "--" + self.setting.replace("_", "-") if option else self.setting
        return (f"{name}={self.value}{self.also} needs about {_gb(self.needed)} of memory for {self.what}, "
                f"more than the {_gb(self.available)} available; use a smaller {name} "
                f"(or set {LIMIT_ENV} to the memory this process may use)")


def _gb(nbytes: float) -> str:
    return f"{nbytes / 1e9:.3g} GB" if nbytes >= 1e7 else f"{nbytes / 1e6:.3g} MB"


def limit() -> float | None:
    """The limit set by ``DEEPGP_MEMORY_LIMIT`` in bytes; None where unset; inf where "0", "off" or
    "none" (no check). A value that is not a size is a ValueError naming the variable."""
    text = os.environ.get(LIMIT_ENV)
    if text is None or not text.strip():
        return None
    text = text.strip().upper()
    if text in ("0", "OFF", "NONE"):
        return math.inf
    match = re.fullmatch(r"([0-9]+(?:\.[0-9]*)?)\s*([KMGT]?)I?B?", text)
    if not match or float(match[1]) <= 0:
        raise ValueError(f"{LIMIT_ENV} must be a size in bytes such as 8G, 512M or 2.5GB (or off), got "
                         f"{os.environ[LIMIT_ENV]!r}")
    return float(match[1]) * _UNITS[match[2]]


def available(device=None) -> float:
    """Bytes this process may still allocate on ``device`` (None: the CPU): ``DEEPGP_MEMORY_LIMIT``
    where set; else a GPU's free memory (with what PyTorch's allocator holds unused), or the operating
    system's available memory (Linux's ``MemAvailable``, within the cgroup's limit where a container
    sets one; else half the physical memory; else 4 GiB)."""
    set_ = limit()
    if set_ is not None:
        return set_
    if device is not None and torch.device(device).type == "cuda":
        device = torch.device(device)
        cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return float(torch.cuda.mem_get_info(device)[0] + cached)
    room = _meminfo("MemAvailable")
    if room is None:
        try:
            room = float(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")) / 2
        except (ValueError, OSError, AttributeError):
            room = float(_FALLBACK)
    return min(room, _cgroup_room(), _address_space_room())


def _address_space_room() -> float:
    """The process's address-space limit (``ulimit -v``, RLIMIT_AS) less the address space it maps now;
    inf where none is set or it cannot be read: an allocation past it fails as one past the memory does."""
    try:
        import resource  # (POSIX only)

        cap = resource.getrlimit(resource.RLIMIT_AS)[0]
        if cap == resource.RLIM_INFINITY or cap < 0:
            return math.inf
        mapped = _status("VmSize")
    except (ImportError, OSError, ValueError):
        return math.inf
    return math.inf if mapped is None else max(float(cap) - mapped, 0.0)


def _status(field: str) -> float | None:
    """A size in bytes from /proc/self/status (Linux); None elsewhere."""
    return _proc_size("/proc/self/status", field)


def _meminfo(field: str) -> float | None:
    """A size in bytes from /proc/meminfo (Linux); None elsewhere."""
    return _proc_size("/proc/meminfo", field)


def _proc_size(path: str, field: str) -> float | None:
    """The ``field: N kB`` line of the /proc file ``path``, in bytes; None where it cannot be read."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return float(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_room() -> float:
    """The cgroup's memory limit less its use (cgroup v2, else v1); inf where none is set or readable."""
    for limit_file, used_file in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                  ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                   "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            with open(limit_file) as f:
                cap = f.read().strip()
            with open(used_file) as f:
                used = float(f.read().strip())
        except (OSError, ValueError):
            continue
        if cap.isdigit() and float(cap) < 2**60:  # (v1 says "no limit" with a huge number)
            return max(float(cap) - used, 0.0)
        return math.inf
    return math.inf


def require(needed: float, setting: str, value, what: str, device=None, also: str = "") -> None:
    """A :class:`MemoryBudgetError` naming ``setting`` = ``value`` if ``needed`` bytes exceed :func:`available`."""
    room = available(device)
    if needed > room:
        raise MemoryBudgetError(setting, value, needed, room, what, also)


def itemsize(dtype) -> int:
    return torch.empty(0, dtype=dtype).element_size()


def model_bytes(numel: int, dtype) -> int:
    """The most memory building a model of ``numel`` parameters and buffers takes: float64
    placeholders, their copies in the layers, then the cast to ``dtype``."""
    return numel * (2 * 8 + itemsize(dtype))


# the settings an estimate grows with: the model's (ModelConfig) and a training step's (TrainConfig); each can be
# as small as 1 (a width of 1 in each encoder layer)
MODEL_SIZES = ("hidden_dim", "num_inducing", "latent_dim", "encoder_hidden")
STEP_SIZES = ("num_samples", "batch_size")


def dominant_setting(estimate, values: dict) -> str:
    """The setting of ``values`` ({name: value}) that the estimate grows with most: the one whose least value
    divides the estimate most, ``estimate()`` / ``estimate(name=least)`` (every other setting as it is; a
    count too large for a tensor estimated as inf). The first of ``values`` where none makes a difference."""
    whole = estimate()

    def factor(name: str) -> float:
        value = values[name]
        least = tuple(1 for _ in value) if isinstance(value, tuple) else 1
        if value == least:
            return 1.0
        smaller = estimate(**{name: least})
        if math.isinf(smaller):  # (inf / inf: this setting alone does not bring it within a count)
            return 1.0
        return whole / smaller if smaller > 0 else math.inf

    return max(values, key=factor)  # (the first of the largest)


def described(name: str, value, config=None) -> tuple[str, object, str]:
    """(setting, value as the message spells it, what goes with it) for a refusal naming ``name``."""
    if isinstance(value, tuple):
        return name, ",".join(map(str, value)), ""
    if name == "hidden_dim" and config is not None:
        return name, value, f" with num_inducing={config.num_inducing}"
    return name, value, ""


def model_setting(config, estimate) -> tuple[str, object, str]:
    """:func:`described` for the ModelConfig setting of ``config`` that ``estimate`` (bytes, given changed
    settings as keywords) grows with most (:func:`dominant_setting` over :data:`MODEL_SIZES`)."""
    name = dominant_setting(estimate, {n: getattr(config, n) for n in MODEL_SIZES})
    return described(name, getattr(config, name), config)


def gp_layers(model) -> list:
    """The GP layers of ``model`` (a DeepGP's, or a baseline's ``gp_layers``), in order."""
    layers = getattr(model, "layers", None) or getattr(model, "gp_layers", None) or []
    return [layer for layer in layers if isinstance(layer, GPLayer)]


def fit_step_bytes(model, batch: int, num_samples: int, method: str = "iw", inner_sampling: str = "independent",
                   products=None) -> int:
    """Bytes one training step of ``model`` takes at its peak, for ``batch`` points and ``num_samples`` = K.

    Per GP layer, for R = batch·K rows, M inducing points, L GPs, D_in inputs and s bytes a value:
    a marginal conditional (the final layer; every layer with per-sample draws) keeps K(Z, ·), A and
    the products R_lᵀA, R·M·(2s + p + p·L) bytes with p those products' bytes (float32 in training,
    ``products``), and makes as much again in its backward pass, R·M·(4s + 2p·L); a layer's inputs and
    outputs take R·(5·D_in + 4·L)·s. A joint draw (``inner_sampling="joint"``) adds its K × K
    covariances, batch·K²·10s. Measured peaks (CPU) were 0.63 to 0.8 of this.
    """
    s = itemsize(model.dtype)
    p = s if products is None else itemsize(products)
    rows = batch * num_samples
    kept, largest = 0, 0
    layers = gp_layers(model)
    for layer in layers:
        M, L, D_in = layer.num_inducing, layer.num_gps, layer.input_dim
        inner = layer is not layers[-1]
        if inner and method == "iw" and inner_sampling == "joint" and model.has_latent:
            kept += rows * (3 * M + 5 * D_in + 3 * L) * s + batch * num_samples**2 * 10 * s
        elif inner and method == "iw" and inner_sampling == "batch" and model.has_latent:
            kept += rows * (3 * M + 5 * D_in + 3 * L) * s + num_samples * L * M * s
        else:
            kept += rows * (M * (2 * s + p + p * L) + (5 * D_in + 4 * L) * s)
            largest = max(largest, rows * M * (4 * s + 2 * p * L))
    return kept + largest


def check_training(cls, architecture, config, num_data: int, input_dim: int, output_dim: int,
                   device=None) -> None:
    """:func:`check_fit` for a model of the class ``cls`` (a :class:`~deepgp.DeepGP`) and the ModelConfig
    ``architecture``, not built yet, trained by the TrainConfig ``config``: it is built on the ``meta``
    device (which allocates nothing) to count."""
    device = check_device(device)  # (a bad name is the caller's ValueError, not torch's)
    with torch.device("meta"):  # (at most num_data inducing points: DeepGP.from_config takes no more)
        model = cls.build(replace(architecture, num_inducing=min(architecture.num_inducing, num_data)),
                          input_dim, output_dim, num_data)
    check_fit(model, num_data, config.resolved(), device, numerics=training_numerics())


def check_fit(model, num_data: int, config, device=None, *, numerics: Numerics) -> None:
    """A :class:`MemoryBudgetError` if training ``model`` (on ``device``, else its own) on ``num_data`` points
    by the resolved TrainConfig ``config``, stepping with the :class:`~deepgp.linalg.Numerics` ``numerics``,
    needs more memory than is available (:func:`fit_bytes`), naming the setting the estimate grows with most
    (:func:`dominant_setting`): K, B, or one of the model's, for which the model is built again on the
    ``meta`` device (nothing allocated) with that setting at 1."""
    device = device or model.device
    products = numerics.products_dtype

    def estimate(**changed) -> float:
        step = replace(config, **{k: v for k, v in changed.items() if k in STEP_SIZES})
        built = model
        if any(k in MODEL_SIZES for k in changed):
            try:
                with torch.device("meta"):
                    built = type(model).build(replace(model.config, **{k: v for k, v in changed.items()
                                                                      if k in MODEL_SIZES}),
                                              model.input_dim, model.output_dim, num_data)
            except RuntimeError:  # (more elements than a tensor can count)
                return math.inf
        return fit_bytes(built, num_data, min(step.batch_size, num_data), step.num_samples, step.method,
                         step.inner_sampling, products)

    needed = estimate()
    if needed <= available(device):
        return
    values = {n: getattr(config, n) for n in STEP_SIZES}
    if getattr(model, "config", None) is not None:
        values.update({n: getattr(model.config, n) for n in MODEL_SIZES})
    name = dominant_setting(estimate, values)
    if name == "num_samples":  # the rows B·K, times the layers' widths
        widths = [f"num_inducing={layer.num_inducing}" for layer in gp_layers(model)[-1:]]
        widths += [f"hidden_dim={layer.num_gps}" for layer in gp_layers(model)[:-1]][:1]
        setting, value, also = name, config.num_samples, (f" with batches of {min(config.batch_size, num_data)} "
                                                          "points, " + " and ".join(widths))
    else:
        setting, value, also = described(name, values[name], getattr(model, "config", None))
    require(needed, setting, value, f"training {model.spec}", device, also=also)


def fit_bytes(model, num_data: int, batch: int, num_samples: int, method: str, inner_sampling: str,
              products=None) -> int:
    """Bytes training ``model`` takes: a step (:func:`fit_step_bytes`), the parameters with their
    gradients and Adam's two moments (4 copies, and 2 more for the natural-gradient and backward
    passes' temporaries), and the data on the model's device."""
    s = itemsize(model.dtype)
    numel = sum(t.numel() for t in model.state_dict().values())
    data = num_data * (model.input_dim + model.output_dim) * s
    return fit_step_bytes(model, batch, num_samples, method, inner_sampling, products) + 6 * numel * s + data
