"""Input checks: bad data gets a ValueError naming the argument and the problem."""

from __future__ import annotations

import numpy as np
import torch


def as_matrix(name: str, value, dtype=torch.float64, device=None, allow_vector: bool = False,
              min_rows: int = 1) -> torch.Tensor:
    """Convert an array-like to a finite [N, D] tensor.

    A 1-D input is a column ([N] → [N, 1]) only where ``allow_vector`` (targets); for inputs it
    is ambiguous (N points in 1-D, or one point in N-D?) and refused.
    """
    if value is None:
        raise ValueError(f"{name} is None; expected a 2-D array")
    if hasattr(value, "toarray") and hasattr(value, "nnz"):  # a scipy.sparse matrix
        raise ValueError(f"{name} is a sparse matrix; pass a dense array ({name}.toarray())")
    if isinstance(value, torch.Tensor):
        t = value.detach()
        if t.layout != torch.strided or t.device.type not in ("cpu", "cuda"):
            raise ValueError(f"{name} must be a dense tensor on the CPU or a GPU, got {t.layout} on {t.device}")
        if t.dtype.is_complex or t.dtype == torch.bool:
            raise ValueError(f"{name} must be real numbers, got dtype {t.dtype}")
    else:
        try:
            arr = np.asarray(value)
        except Exception as exc:  # ragged lists and the like
            raise ValueError(f"{name} could not be read as an array: {exc}") from None
        if arr.dtype.kind not in "biuf":
            raise ValueError(f"{name} must be numeric, got an array of dtype {arr.dtype} (strings or objects?)")
        t = torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float64))
    if t.dim() == 1 and allow_vector:
        t = t.unsqueeze(-1)
    if t.dim() != 2:
        hint = " (reshape a single feature with x.reshape(-1, 1))" if t.dim() == 1 else ""
        raise ValueError(f"{name} must be 2-D [num_points, num_dims], got shape {tuple(t.shape)}{hint}")
    if t.shape[0] < min_rows:
        raise ValueError(f"{name} has {t.shape[0]} points; at least {min_rows} are needed")
    if t.shape[1] == 0:
        raise ValueError(f"{name} has no columns")
    if not bool(torch.isfinite(t).all()):
        bad = (~torch.isfinite(t)).nonzero()[:3].tolist()
        raise ValueError(f"{name} contains NaN or infinite values (first at row, column {bad})")
    out = t.to(dtype=dtype, device=device)
    if out.dtype != t.dtype and not bool(torch.isfinite(out).all()):  # finite, but beyond float32's range
        bad = (~torch.isfinite(out)).nonzero()[:3].tolist()
        raise ValueError(f"{name} has values beyond the range of {str(out.dtype).removeprefix('torch.')} "
                         f"(±{torch.finfo(out.dtype).max:.3g}; first at row, column {bad}); use float64")
    return out


def max_magnitude(role: str, dtype) -> float:
    """The largest |value| accepted in training data of ``dtype``; a heuristic, far above standardised data.

    * ``role="input"`` (X): sqrt(1 / ε), 6.7e7 in float64 and 2.9e3 in float32. The kernels form
      |x − z|² as |x|² + |z|² − 2xᵀz in one matrix product (kernels.py), whose rounding error ε|x|²
      must stay below 1 inside exp(−|x − z|²/2ℓ²) for x and z close together (at the initial
      lengthscales ℓ ≥ 1; learnt lengthscales may shrink, which training reports if it fails).
    * ``role="target"`` (Y): the fourth root of the largest number, 1.2e77 in float64 and 1.4e9 in
      float32, so that squared residuals over a noise variance, summed over the data, stay finite.
    """
    if role not in ("input", "target"):
        raise ValueError(f"role must be 'input' or 'target', got {role!r}")
    info = torch.finfo(dtype)
    return (1.0 / info.eps) ** 0.5 if role == "input" else float(info.max) ** 0.25


def check_magnitude(X: torch.Tensor, Y: torch.Tensor | None, dtype) -> None:
    """A ValueError naming X or Y if training data hold values too large for ``dtype``'s arithmetic."""
    for name, t, role in (("X", X, "input"), ("Y", Y, "target")):
        if t is None or not t.numel():
            continue
        big, limit = float(t.abs().max()), max_magnitude(role, dtype)
        if big > limit:
            raise ValueError(f"{name} has values as large as {big:.3g}, beyond the {limit:.2g} that "
                             f"{str(dtype).removeprefix('torch.')} arithmetic allows here; standardise {name} first "
                             "(DeepGPRegressor does it itself)")


def as_xy(X, Y, dtype=torch.float64, device=None, input_dim=None, output_dim=None, min_rows: int = 1):
    """Check a pair (X [N, D], Y [N, D_y] or [N]) and convert both to tensors."""
    X = as_matrix("X", X, dtype, device, min_rows=min_rows)
    Y = as_matrix("Y", Y, dtype, device, allow_vector=True, min_rows=min_rows)
    if X.shape[0] != Y.shape[0]:
        raise ValueError(f"X and Y have different numbers of points: {X.shape[0]} and {Y.shape[0]}")
    check_dims(X, Y, input_dim, output_dim)
    return X, Y


def as_model_data(model, X, Y=None):
    """X [N, D] (and Y [N, D_y]) for ``model``: checked against its ``input_dim`` (and ``output_dim``) and
    made tensors of its ``dtype`` on its ``device``; (X, None) without Y."""
    if Y is None:
        X = as_matrix("X", X, model.dtype, model.device)
        check_dims(X, None, model.input_dim)
        return X, None
    return as_xy(X, Y, model.dtype, model.device, model.input_dim, model.output_dim)


def check_dims(X, Y=None, input_dim=None, output_dim=None):
    if input_dim is not None and X.shape[1] != input_dim:
        raise ValueError(f"X has {X.shape[1]} columns but the model was built for {input_dim} inputs")
    if Y is not None and output_dim is not None and Y.shape[1] != output_dim:
        raise ValueError(f"Y has {Y.shape[1]} columns but the model was built for {output_dim} outputs")


def check_positive_int(name: str, value, minimum: int = 1, maximum: int | None = None) -> int:
    """``value`` as an int if it is an integer in [minimum, maximum]; a ValueError naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be an integer <= {maximum}, got {value!r}")
    return int(value)


MAX_SEED = 2**63 - 1  # torch.manual_seed's range


def check_seed(seed) -> int | None:
    """A seed: None (unseeded) or an integer in [0, 2**63 − 1]."""
    return None if seed is None else check_positive_int("seed", seed, minimum=0, maximum=MAX_SEED)


def check_positive_float(name: str, value, above: float = 0.0) -> float:
    """``value`` as a float if it is a finite number > ``above``; a ValueError naming ``name`` otherwise."""
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if not ok or not np.isfinite(value) or value <= above:
        raise ValueError(f"{name} must be a finite number > {above:g}, got {value!r}")
    return float(value)


def check_device(device) -> torch.device | None:
    """A torch device from ``device`` (None stays None: the CPU), refused with a clear message when
    the name is unknown or the device is not there (instead of an assertion deep inside torch)."""
    if device is None:
        return None
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device must be a torch device such as 'cpu', 'cuda' or 'cuda:1', got {device!r}") from err
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or a CUDA device such as 'cuda' or 'cuda:1', got {device!r}")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            why = "this torch is a CPU-only build" if torch.version.cuda is None else "no GPU is visible"
            raise ValueError(f"device {str(device)!r} was requested but CUDA is not available ({why}); "
                             "use device='cpu'")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"device {str(device)!r} does not exist: "
                             f"{torch.cuda.device_count()} CUDA device(s) visible")
    return dev


DTYPES = {"float64": torch.float64, "float32": torch.float32}


def torch_dtype(dtype) -> torch.dtype:
    """torch.float64 / torch.float32 (or their names) → the torch dtype; anything else is an error."""
    name = str(dtype).removeprefix("torch.")
    if name not in DTYPES:
        raise ValueError(f"dtype must be float64 (the default) or float32, got {dtype!r}")
    return DTYPES[name]
