"""``tilelang.utils.tensor``: comparing tensors with an allowed share of mismatches, and dtype queries.

Contract
--------
* ``torch_assert_close(a, b, rtol=1e-2, atol=1e-3, max_mismatched_ratio=0.001, ...)``: ``a`` and ``b`` are
  torch tensors or NumPy arrays (any dtype tilesim knows, bf16/fp8 included). Elements differ when
  ``|a - b| > atol + rtol * |b|`` (NaNs equal when ``equal_nan``). Raises ``AssertionError`` when more
  than ``int(numel * max_mismatched_ratio)`` differ, naming the count, the first mismatch and the largest
  differences; returns ``True`` otherwise. Shapes must match; dtypes too with ``check_dtype``.
* ``is_float8_dtype(dtype)``: a torch/NumPy dtype or a name is one of the FP8 types.
* ``get_tensor_supply(supply_type)`` returns ``supply(param) -> tensor`` for a kernel parameter (a buffer of
  ``kernel.params``), made as ``kernel.get_profiler(supply_type)`` makes its inputs.
"""

from __future__ import annotations

import numpy as np

from ..binding import numpy_to_torch
from ..config import TensorSupplyType
from ..optional import loaded
from ..supply import make_input

__all__ = ["TensorSupplyType", "get_tensor_supply", "is_float8_dtype", "torch_assert_close", "as_float64"]


def _dtype_name(x) -> str:
    return str(getattr(x, "dtype", x)).replace("torch.", "")


def is_float8_dtype(dtype) -> bool:
    return _dtype_name(dtype).startswith("float8")


def as_float64(x) -> np.ndarray:
    """Values of a torch tensor or array-like as float64 NumPy (bf16/fp8 included)."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):
        t = x.detach().cpu()
        if t.dtype.is_floating_point:
            t = t.float()
        return t.numpy().astype(np.float64)
    a = np.asarray(x)
    return a.astype(np.float64) if a.dtype != np.float64 else a


def torch_assert_close(tensor_a, tensor_b, rtol=1e-2, atol=1e-3, max_mismatched_ratio=0.001, verbose=False,
                       equal_nan=True, check_device=True, check_dtype=True, check_layout=True,
                       check_stride=False, base_name="LHS", ref_name="RHS"):
    """Assert ``tensor_a`` is close to ``tensor_b`` but for a share of mismatches (see the module doc)."""
    if tuple(np.shape(tensor_a)) != tuple(np.shape(tensor_b)):
        raise AssertionError(f"shape mismatch: {base_name} {tuple(np.shape(tensor_a))} vs "
                             f"{ref_name} {tuple(np.shape(tensor_b))}")
    if check_dtype and _dtype_name(tensor_a) != _dtype_name(tensor_b):
        raise AssertionError(f"dtype mismatch: {base_name} {_dtype_name(tensor_a)} vs "
                             f"{ref_name} {_dtype_name(tensor_b)}")
    a, b = as_float64(tensor_a), as_float64(tensor_b)
    with np.errstate(invalid="ignore"):
        close = np.abs(a - b) <= atol + rtol * np.abs(b)
    if equal_nan:
        close |= np.isnan(a) & np.isnan(b)
    close |= (a == b)  # equal infinities
    bad = ~close
    n_bad, total = int(bad.sum()), a.size
    allowed = int(total * max_mismatched_ratio)
    if verbose:
        print(f"Number of mismatched elements: {n_bad} / {total} (allowed: {allowed})")
    if n_bad <= allowed:
        return True
    flat = int(np.argmax(bad.reshape(-1)))
    idx = [int(i) for i in np.unravel_index(flat, a.shape)] if a.ndim else []
    av, bv = a.reshape(-1)[flat], b.reshape(-1)[flat]
    with np.errstate(invalid="ignore", divide="ignore"):
        diff = np.abs(a - b)
        rel = diff / (np.abs(b) + 1e-12)
    raise AssertionError(
        f"Too many mismatched elements: {n_bad} > {allowed} ({max_mismatched_ratio * 100:.2f}% allowed, "
        f"got {n_bad / max(total, 1) * 100:.2f}%).\n"
        f"First mismatch at index {idx}: {base_name}={av:.6f}, {ref_name}={bv:.6f}\n"
        f"Greatest absolute difference: {np.nanmax(diff)}, greatest relative difference: {np.nanmax(rel)}")


def get_tensor_supply(supply_type=TensorSupplyType.Integer, tensor_type: str = "auto"):
    """A function making one input tensor per kernel parameter, as the profiler does (see the module doc)."""
    rng = np.random.default_rng(0)

    def supply(param):
        x = make_input(param, supply_type, rng)
        if tensor_type == "torch" or (tensor_type == "auto" and loaded("torch") is not None):
            return numpy_to_torch(x) if isinstance(x, np.ndarray) else x
        return x
    return supply
