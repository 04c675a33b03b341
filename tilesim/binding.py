"""The argument contract: how a call's arguments become what a program runs on.

Every path that takes a user's tensors goes through this module: ``JITKernel`` on the host
(:func:`bind_host`), the CUDA runtime with device tensors (:func:`split_call`, :func:`check_shape`,
:func:`bind_dims`, :func:`output_shape`, :func:`empty_like`), the eager ``@tilesim.jit`` path (its
shape messages), the profiler (:func:`numpy_to_torch`) and the test helpers (:func:`to_host`).

Contract
--------
Types
  * A *parameter* is an ``ir.nodes.Buffer`` (a tensor) or an ``ir.nodes.Var`` (a scalar) of a
    ``PrimFunc``; ``out_idx`` (a tuple of parameter indices) names the outputs, which the caller does
    not pass: they are allocated and returned.
  * A *tensor argument* is a NumPy array, a torch tensor (CPU or CUDA), a CuPy array, a numba device
    array, or any object with ``__array__`` or ``__dlpack__`` (host memory) or
    ``__cuda_array_interface__`` (device memory). A *scalar argument* is a Python or NumPy number.
Calls (:func:`normalise_out_idx`, :func:`split_call`)
  * ``out_idx`` may be ``None``, an index or a list of indices, negative ones counting from the end;
    out of range → ``KernelTypeError``.
  * The inputs are the parameters not in ``out_idx``, in declaration order; they are passed
    positionally, or by parameter name. The result has one value per parameter, ``None`` at outputs.
  * Wrong count, unknown name, a name given twice, or an output passed → ``KernelRuntimeError``.
Scalars (:func:`scalar_arg`)
  * Converted to the parameter's compute type (float → ``compute_dtype``, bool → ``bool``, else
    ``int``). A real number (Python, NumPy or a 0-d array/tensor) is required: ``None``, a string, a
    complex number or a tensor → ``KernelRuntimeError``; an integer parameter also refuses a float
    with a fraction and a value outside its dtype's range.
Dtypes (:func:`check_dtype`, :func:`dtype_error`)
  * An ``int4`` tensor is passed packed two per byte (int8, last axis halved, element ``2i`` in the low
    nibble); it is unpacked for the run and packed back (outputs are returned packed).
  * A host array's dtype must be exactly ``dtypes.np_dtype(p.dtype)``: nothing is converted
    implicitly. (The CUDA runtime also accepts a device array of the parameter's storage type for the
    narrow floats CuPy lacks; it reports a mismatch with :func:`dtype_error`.)
Shapes (:func:`check_shape`, :func:`bind_dims`, :func:`check_derived`, :func:`output_shape`)
  * A tensor's rank must be the parameter's; an ``int`` dimension must match; a ``T.dynamic``
    dimension (a ``Var``) is bound by the first tensor that has it, and every other tensor must agree;
    a dimension given by an expression of symbols is checked once every symbol is bound. Every
    symbolic dimension of the program must be bound by an input.
  * :func:`eval_dim` / :func:`host_value` evaluate an expression of bound symbols on the host with the
    interpreter's meaning of every operator (integer division, casts), so the host and the device
    agree on shapes, grids and workspace sizes.
Conversion (:func:`to_host`, :func:`numpy_to_torch`, :func:`empty_like`)
  * NumPy arrays are used as they are; torch CPU tensors share memory (``bfloat16``/fp8 through a
    raw integer view; torch's packed ``float4_e2m1fn_x2`` ``(..., n)`` is unpacked to ``float4_e2m1fn``
    ``(..., 2 n)``, a copy, and fp4 outputs are packed back: TileLang's fp4 convention; an ``int8``/``uint8``
    tensor ``(..., n)`` bound to a ``float4_e2m1fn`` parameter is read the same way and written back
    packed); torch CUDA or non-contiguous tensors, CuPy arrays and numba device arrays are
    copied to the host; ``__array__`` objects go through ``np.asarray``, DLPack producers through
    ``np.from_dlpack``; anything else (a list, a number, ``None``) → ``KernelRuntimeError`` naming the
    argument.
  * No result is ever dropped. A tensor the kernel writes (:func:`written_globals`: a store, a tile
    copy, fill, reduction or atomic into it, through any view) that had to be copied — a strided or
    transposed NumPy view, a non-contiguous or device torch tensor, a CuPy or numba array — is copied
    back into the caller's tensor after the run (:meth:`HostArray.finish`). A written argument that
    cannot be written — a read-only array, or an ``__array__``/DLPack object NumPy had to copy — is
    refused before the run with a ``KernelRuntimeError`` naming it. Read-only inputs are fine.
  * Outputs are returned in the caller's framework: on the host path NumPy arrays, or torch CPU
    tensors when any argument is a torch tensor (or, for a call without tensor arguments, when the program
    has imported torch: TileLang returns torch tensors); on the device path the CUDA runtime allocates them
    with :func:`empty_like` in the device arguments' framework (torch on their device, CuPy).
Errors
  * Every argument error is a ``KernelRuntimeError`` that names the argument and the kernel
    (``argument 'A' of main: ...``) and points at the parameter's declaration; CuPy's missing narrow
    float types are a ``KernelTypeError``.
Invariants of a :class:`HostBinding`
  * ``arrays[uid]`` is C-contiguous, writeable, of ``np_dtype(p.dtype)`` and of the checked shape;
    ``scalars[uid]`` holds every scalar parameter and every symbolic dimension (``int``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import dtypes as dt
from .backends.interp.exprs import ev
from .backends.interp.options import InterpOptions
from .backends.interp.state import Ctx
from .errors import InternalError, KernelRuntimeError, KernelTypeError
from .ir import nodes as N
from .ir.traverse import regions, walk_stmts
from .optional import loaded, require

__all__ = ["TORCH_RAW", "HostArray", "HostBinding", "bind_dims", "bind_host", "check_derived", "check_dtype", "is_tensor_like",
           "written_globals",
           "check_shape", "conflict_error", "dtype_error", "dtype_name", "empty_like", "eval_dim", "fmt_shape",
           "framework", "host_value", "is_device", "normalise_out_idx", "numpy_to_torch", "output_shape",
           "rank_error", "scalar_arg", "shape_of", "split_call", "to_host"]

#: torch dtypes NumPy cannot view directly, and the raw integer type of the same width
TORCH_RAW = {"bfloat16": "int16", "float8_e4m3fn": "uint8", "float8_e5m2": "uint8"}


# ------------------------------------------------------------------------------------------ frameworks
def framework(v) -> str:
    """``"numpy"``, ``"torch"``, ``"cupy"``, ``"numba"`` (a numba device array) or ``"other"``."""
    if isinstance(v, np.ndarray):
        return "numpy"
    torch = loaded("torch")
    if torch is not None and isinstance(v, torch.Tensor):
        return "torch"
    cupy = loaded("cupy")
    if cupy is not None and isinstance(v, cupy.ndarray):
        return "cupy"
    if type(v).__module__.startswith("numba") and hasattr(v, "copy_to_host"):
        return "numba"
    return "other"


def is_tensor_like(v) -> bool:
    """``v`` is an array or tensor of a known framework (or exposes an array interface)."""
    return (framework(v) != "other" or hasattr(v, "__array_interface__") or hasattr(v, "__cuda_array_interface__")
            or hasattr(v, "__dlpack__"))


def is_device(v) -> bool:
    """``v`` lives in GPU memory (a CUDA torch tensor, or anything with ``__cuda_array_interface__``)."""
    kind = framework(v)
    if kind == "torch":
        return v.device.type == "cuda"
    return kind == "numba" or hasattr(v, "__cuda_array_interface__")


def shape_of(v) -> tuple:
    """The shape of a tensor argument, without copying it anywhere."""
    if hasattr(v, "shape"):
        shape = tuple(int(s) for s in v.shape)
        if str(getattr(v, "dtype", "")) == "torch.float4_e2m1fn_x2" and shape:  # packed: two values per byte
            shape = shape[:-1] + (2 * shape[-1],)
        return shape
    return to_host(v).array.shape


class HostArray:
    """A caller's tensor as a NumPy array (``array``), and how to give results back (``finish``).

    ``copy_back``: ``array`` is a private copy (written back by :meth:`finish` when ``written``);
    ``in_place``: writes to ``array`` reach the caller's object (False for ``__array__``/DLPack
    objects NumPy may have copied); ``written``: the kernel may write it (True unless the binding
    knows better)."""

    def __init__(self, obj):
        self.obj = obj
        self.kind = framework(obj)
        self.copy_back = False
        self.in_place = True
        self.written = True  # bind_host clears it for tensors the kernel only reads
        self.packed_fp4 = False  # ``array`` unpacks the caller's packed fp4 bytes
        self.array = self._to_numpy(obj)

    def _to_numpy(self, obj):
        if self.kind == "numpy":
            return obj
        if self.kind == "torch":
            torch = loaded("torch")
            t = obj.detach()
            if t.device.type != "cpu" or not t.is_contiguous():
                self.copy_back = True
                t = t.cpu().contiguous()
            name = str(t.dtype).replace("torch.", "")
            if name in TORCH_RAW:
                return t.view(getattr(torch, TORCH_RAW[name])).numpy().view(dt.np_dtype(name))
            if name == "float4_e2m1fn_x2":  # two fp4 codes per byte, the even element in the low nibble
                self.copy_back = True
                return unpack_fp4(t.view(torch.uint8).numpy())
            return t.numpy()
        if self.kind == "cupy":
            self.copy_back = True
            return obj.get()
        if self.kind == "numba":
            self.copy_back = True
            return obj.copy_to_host()
        if hasattr(obj, "__array__") or hasattr(obj, "__dlpack__"):
            self.in_place = hasattr(obj, "__array_interface__")
            try:
                return np.asarray(obj) if hasattr(obj, "__array__") else np.from_dlpack(obj)
            except Exception as e:  # noqa: BLE001 - a foreign object's conversion: report it as the argument's
                raise KernelRuntimeError(f"cannot convert a {type(obj).__name__} to an array: {e}") from None
        raise KernelRuntimeError(f"cannot use a {type(obj).__name__} as a tensor",
                                 hint="pass NumPy arrays, torch tensors or objects with __array__/__dlpack__")

    def finish(self):
        """Copy ``array`` back into the caller's tensor where it was a copy and the kernel wrote it."""
        if not (self.copy_back and self.written):
            return
        if self.kind == "numpy":
            if self.packed_fp4:  # TileLang's packed fp4 storage in an int8/uint8 array
                np.copyto(self.obj, pack_fp4(self.array).view(self.obj.dtype))
            else:
                np.copyto(self.obj, self.array)
        elif self.kind == "torch":
            res = numpy_to_torch(self.array)
            if self.array.dtype == dt.np_dtype("float4_e2m1fn"):  # torch copies packed fp4 as raw bytes
                self.obj.view(res.view(loaded("torch").uint8).dtype).copy_(res.view(loaded("torch").uint8))
                return
            self.obj.copy_(res.to(self.obj.device))
        elif self.kind == "cupy":
            self.obj.set(self.array)
        elif self.kind == "numba":
            self.obj.copy_to_device(self.array)


def to_host(obj) -> HostArray:
    """``obj`` converted to NumPy (see the module docstring for what is copied)."""
    return HostArray(obj)


def unpack_fp4(packed: np.ndarray) -> np.ndarray:
    """``float4_e2m1fn`` values ``(..., 2 n)`` of packed bytes ``(..., n)`` (element ``2i`` in the low nibble)."""
    codes = np.stack([packed & 0xF, packed >> 4], axis=-1).astype(np.uint8)
    return codes.reshape(*packed.shape[:-1], 2 * packed.shape[-1]).view(dt.np_dtype("float4_e2m1fn"))


def pack_fp4(arr: np.ndarray) -> np.ndarray:
    """The packed bytes ``(..., n / 2)`` of ``float4_e2m1fn`` values ``(..., n)``: torch's and TileLang's
    ``float4_e2m1fn_x2`` storage. An odd last dimension is a ``KernelRuntimeError``."""
    if not arr.ndim or arr.shape[-1] % 2:
        raise KernelRuntimeError(f"a float4_e2m1fn tensor of shape {arr.shape} cannot be returned to torch: torch "
                                 "stores fp4 as float4_e2m1fn_x2 (two values per byte along the last dimension)",
                                 hint="give fp4 outputs an even last dimension")
    codes = np.ascontiguousarray(arr).view(np.uint8) & 0xF
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)


def numpy_to_torch(arr: np.ndarray):
    """A torch CPU tensor with ``arr``'s values and dtype (``bfloat16``/fp8 through raw integer views;
    ``float4_e2m1fn`` as torch's packed ``float4_e2m1fn_x2``, the last dimension halved, as TileLang returns it)."""
    torch = require("torch", "returning torch tensors")
    name = dt.canon(arr.dtype)
    if name == "float4_e2m1fn":
        return torch.from_numpy(pack_fp4(arr)).view(torch.float4_e2m1fn_x2)
    if name in TORCH_RAW:
        raw = np.dtype(TORCH_RAW[name])
        return torch.from_numpy(arr.view(raw).copy()).view(getattr(torch, name))
    return torch.from_numpy(np.ascontiguousarray(arr))


def empty_like(kind: str, shape: tuple, dtype: str, device=None):
    """An uninitialised device output of ``dtype`` in the framework ``kind`` (``"torch"`` or ``"cupy"``)."""
    if kind == "torch":
        torch = require("torch", "torch outputs")
        return torch.empty(shape, dtype=getattr(torch, dtype), device=device or "cuda")
    if kind == "cupy":
        if dtype in dt.NARROW_FLOATS and dtype != "float16":
            raise KernelTypeError(f"CuPy has no {dtype} arrays: pass torch tensors for {dtype} outputs")
        return require("cupy", "CuPy outputs").empty(shape, dtype=dt.np_dtype(dtype))
    raise InternalError(f"empty_like: no device allocation for framework {kind!r}")


# ------------------------------------------------------------------------------------------ calls
def normalise_out_idx(out_idx, nparams: int) -> tuple:
    """``out_idx`` (None, an index or a list; negative from the end) as a tuple of distinct indices."""
    if out_idx is None:
        return ()
    def is_index(i):
        return isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_))

    idx = [out_idx] if is_index(out_idx) else out_idx
    if not isinstance(idx, (list, tuple, range)) or not all(is_index(i) for i in idx):
        raise KernelTypeError(f"out_idx must be an int or a list of ints, got {out_idx!r:.60}",
                              hint="e.g. out_idx=[-1] for the last parameter")
    out = []
    for i in map(int, idx):
        if not -nparams <= i < nparams:
            raise KernelTypeError(f"out_idx {i} is out of range for {nparams} parameters")
        out.append(i % nparams)
    return tuple(sorted(set(out), key=out.index))


def split_call(pf: N.PrimFunc, out_idx: tuple, args: tuple, kwargs: dict | None = None) -> list:
    """One value per parameter of ``pf`` (``None`` at the outputs ``out_idx``) from a call's arguments."""
    inputs = [i for i in range(len(pf.params)) if i not in out_idx]
    if not kwargs and len(args) == len(inputs):  # the common call: all inputs by position
        values: list = [None] * len(pf.params)
        for i, v in zip(inputs, args):
            values[i] = v
        return values
    names = ", ".join(pf.params[i].name for i in inputs)
    kwargs = kwargs or {}
    if len(args) + len(kwargs) != len(inputs) or len(args) > len(inputs):
        got = f"{len(args)}" + (f" positional and {len(kwargs)} keyword" if kwargs else "")
        raise KernelRuntimeError(f"kernel {pf.name} takes {len(inputs)} argument(s) ({names}), got {got}", pf.loc,
                                 hint="outputs listed in out_idx are allocated and returned, not passed")
    values: list = [None] * len(pf.params)
    for i, v in zip(inputs, args):
        values[i] = v
    by_name = {p.name: i for i, p in enumerate(pf.params)}
    for name, v in kwargs.items():
        i = by_name.get(name)
        if i is None:
            raise KernelRuntimeError(f"kernel {pf.name} has no parameter '{name}'", pf.loc,
                                     hint=f"its arguments are: {names}")
        if i in out_idx:
            raise KernelRuntimeError(f"argument '{name}' of {pf.name} is an output", pf.loc,
                                     hint="outputs listed in out_idx are allocated and returned, not passed")
        if inputs.index(i) < len(args):
            raise KernelRuntimeError(f"argument '{name}' of {pf.name} is given twice (by position and by name)",
                                     pf.loc)
        values[i] = v
    return values


def scalar_arg(pf: N.PrimFunc, p: N.Var, v):
    """The value of scalar parameter ``p``, in its compute type (see the module docstring's rules)."""
    def bad(what, hint=None):
        return KernelRuntimeError(f"argument '{p.name}' of {pf.name} is a scalar {p.dtype}, got {what}", p.loc,
                                  hint=hint or f"pass a Python number for '{p.name}'")

    if isinstance(v, np.ndarray) and v.ndim > 0 or hasattr(v, "shape") and getattr(v, "ndim", 0) > 0:
        raise bad("a tensor")
    if hasattr(v, "item") and not isinstance(v, (np.generic, np.ndarray)):
        v = v.item()  # a 0-d torch tensor / CuPy array
    if isinstance(v, np.ndarray):
        v = v.item()
    if isinstance(v, (bool, np.bool_)):
        v = bool(v)
    elif not isinstance(v, (int, float, np.integer, np.floating)):
        raise bad("None" if v is None else f"a {type(v).__name__} ({v!r:.40})")
    if dt.is_float(p.dtype):
        return dt.compute_dtype(p.dtype).type(v)
    if p.dtype == "bool":
        return bool(v)
    if isinstance(v, (float, np.floating)) and not float(v).is_integer():
        raise bad(f"{v!r}, which is not an integer", hint=f"pass an int, e.g. int({v!r})")
    iv = int(v)
    if dt.is_int(p.dtype):
        info = np.iinfo(dt.np_dtype(p.dtype))
        if not info.min <= iv <= info.max:
            raise bad(f"{iv}, outside the range of {p.dtype} [{info.min}, {info.max}]")
    return iv


# ------------------------------------------------------------------------------------------ dtypes
def dtype_name(d) -> str:
    """``d`` (a NumPy dtype or a name) as tilesim names dtypes, or as NumPy does where tilesim has no name."""
    try:
        return dt.canon(d)
    except Exception:  # noqa: BLE001 - an array type tilesim has no name for: show NumPy's
        return str(d)


def dtype_error(pf: N.PrimFunc, p: N.Buffer, got) -> KernelRuntimeError:
    """The error for argument ``p`` of dtype ``got`` (a NumPy dtype or a dtype name)."""
    return KernelRuntimeError(f"argument '{p.name}' of {pf.name}: expected dtype {p.dtype}, got {dtype_name(got)}",
                              p.loc, hint=f"convert it first, e.g. x.astype({p.dtype!r}) / tensor.to(torch.{p.dtype})")


def check_dtype(pf: N.PrimFunc, p: N.Buffer, got: np.dtype) -> None:
    if got != dt.np_dtype(p.dtype):
        raise dtype_error(pf, p, got)


# ------------------------------------------------------------------------------------------ shapes
def fmt_shape(shape) -> str:
    """A declared shape as the user wrote it: ``(M, 128)``."""
    return "(" + ", ".join(str(s) if isinstance(s, int) else getattr(s, "name", "?") for s in shape) + ")"


def rank_error(where: str, name: str, declared, shape, loc) -> KernelRuntimeError:
    return KernelRuntimeError(f"argument '{name}' of {where}: expected {len(declared)} dimension(s) "
                              f"{fmt_shape(declared)}, got shape {tuple(shape)}", loc)


def conflict_error(where: str, name: str, d: int, sym: str, got: int, before: int, loc) -> KernelRuntimeError:
    return KernelRuntimeError(f"argument '{name}' of {where}: dimension {d} ({sym}) is {got} but another argument "
                              f"set {sym} = {before}", loc)


def check_shape(pf: N.PrimFunc, p: N.Buffer, shape: tuple, dims: dict) -> None:
    """Check ``shape`` against ``p``'s rank and constant dims; bind its symbolic dims into ``dims``."""
    shape = tuple(shape)
    if len(shape) != p.ndim:
        raise rank_error(pf.name, p.name, p.shape, shape, p.loc)
    for d, (want, got) in enumerate(zip(p.shape, shape)):
        if isinstance(want, int):
            if want != got:
                raise KernelRuntimeError(f"argument '{p.name}' of {pf.name}: dimension {d} must be {want}, "
                                         f"got shape {shape} (expected {fmt_shape(p.shape)})", p.loc)
        elif isinstance(want, N.Var):
            if want.uid in dims and dims[want.uid] != got:
                raise conflict_error(pf.name, p.name, d, want.name, got, dims[want.uid], p.loc)
            dims[want.uid] = got


def bind_dims(pf: N.PrimFunc, dims: dict) -> dict:
    """``{uid: value}`` of every symbolic dimension of ``pf``; each must have been bound by an input."""
    out = {}
    for dv in pf.dyn_vars:
        if dv.uid not in dims:
            raise KernelRuntimeError(f"symbolic dimension '{dv.name}' of {pf.name} is not bound by any argument",
                                     pf.loc)
        out[dv.uid] = dims[dv.uid]
    return out


def check_derived(pf: N.PrimFunc, p: N.Buffer, shape: tuple, scalars: dict) -> None:
    """Check the dims of ``p`` given by expressions of symbols (``M // 2``) once the symbols are bound."""
    for d, want in enumerate(p.shape):
        if isinstance(want, N.Expr) and not isinstance(want, N.Var):
            val = eval_dim(want, scalars)
            if val != shape[d]:
                raise KernelRuntimeError(f"argument '{p.name}' of {pf.name}: dimension {d} must be {val}, "
                                         f"got shape {tuple(shape)} (expected {fmt_shape(p.shape)})", p.loc)


def output_shape(p: N.Buffer, scalars: dict) -> tuple:
    return tuple(d if isinstance(d, int) else eval_dim(d, scalars) for d in p.shape)


def host_value(e, scalars: dict):
    """The value of expression ``e`` of bound symbols (``scalars``: uid → value), as a Python scalar."""
    if isinstance(e, int):
        return e
    if isinstance(e, N.Const):
        return e.value
    ctx = Ctx(1, InterpOptions(), dict(scalars), {}, np.zeros(1, dtype=np.int64))
    v = ev(e, ctx)
    if isinstance(v, np.ndarray):
        v = v.reshape(-1)[0]
    return v.item() if hasattr(v, "item") else v


def eval_dim(e, scalars: dict) -> int:
    """The value of a shape expression given bound symbols."""
    return int(host_value(e, scalars))


# ------------------------------------------------------------------------------------------ host binding
_WRITTEN: dict = {}


def written_globals(pf: N.PrimFunc) -> frozenset:
    """uids of the global buffers (alias roots) that some statement of ``pf`` writes."""
    hit = _WRITTEN.get(id(pf))
    if hit is not None and hit[0] is pf:
        return hit[1]
    out = set()
    for s in walk_stmts(pf.body):
        for w in regions(s)[1]:
            buf = getattr(w, "buffer", w)
            root = buf.alias_of or buf
            if root.scope == "global":
                out.add(root.uid)
    if len(_WRITTEN) > 4096:
        _WRITTEN.clear()
    _WRITTEN[id(pf)] = (pf, frozenset(out))
    return _WRITTEN[id(pf)][1]


@dataclass
class HostBinding:
    """A call bound on the host (see the module docstring's invariants)."""

    pf: N.PrimFunc
    out_idx: tuple
    arrays: dict = field(default_factory=dict)  # buffer uid -> ndarray
    scalars: dict = field(default_factory=dict)  # var uid -> value (scalar params, symbolic dims)
    converted: list = field(default_factory=list)  # HostArray of every tensor argument
    torch_out: bool = False  # return torch tensors
    int4: list = field(default_factory=list)  # (unpacked array, HostArray) of packed int4 arguments

    def finish(self):
        """Copy results back into the callers' tensors; the outputs (one bare, several as a list, or None)."""
        for arr, c in self.int4:
            c.array[...] = dt.pack_int4(arr)
        for c in self.converted:
            c.finish()
        outs = [self.arrays[self.pf.params[i].uid] for i in self.out_idx]
        outs = [dt.pack_int4(o) if self.pf.params[i].dtype == "int4" else o for i, o in zip(self.out_idx, outs)]
        if self.torch_out:
            outs = [numpy_to_torch(o) for o in outs]
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else outs


def bind_host(pf: N.PrimFunc, out_idx: tuple, values: list, allocate) -> HostBinding:
    """Bind ``values`` (from :func:`split_call`) as NumPy arrays; outputs from ``allocate(shape, dtype)``."""
    b = HostBinding(pf, tuple(out_idx))
    dims: dict = {}
    written = written_globals(pf)
    inputs = [(p, v) for i, (p, v) in enumerate(zip(pf.params, values)) if i not in b.out_idx]
    for p, v in inputs:
        if isinstance(p, N.Var):
            b.scalars[p.uid] = scalar_arg(pf, p, v)
            continue
        try:
            c = to_host(v)
        except KernelRuntimeError as e:
            raise KernelRuntimeError(f"argument '{p.name}' of {pf.name} is a {p.dtype} tensor "
                                     f"{fmt_shape(p.shape)}: {e.message}", p.loc, hint=e.hint) from None
        arr = c.array
        if p.dtype == "float4_e2m1fn" and arr.dtype in (np.int8, np.uint8):  # TileLang's packed fp4 storage
            arr = c.array = unpack_fp4(np.ascontiguousarray(arr).view(np.uint8))
            c.copy_back = True
            c.packed_fp4 = c.kind == "numpy"
        check_dtype(pf, p, arr.dtype)
        if p.dtype == "int4":  # packed two per byte along the last axis
            check_shape(pf, p, arr.shape[:-1] + (2 * arr.shape[-1],) if arr.ndim else arr.shape, dims)
            b.arrays[p.uid] = dt.unpack_int4(arr)
            b.int4.append((b.arrays[p.uid], c))
            b.converted.append(c)
            continue
        check_shape(pf, p, arr.shape, dims)
        c.written = p.uid in written
        if c.written and (not arr.flags.writeable and not c.copy_back or not c.in_place):
            why = "is read-only" if c.in_place else f"is a {type(v).__name__} that NumPy cannot write in place"
            raise KernelRuntimeError(f"argument '{p.name}' of {pf.name} {why}, but the kernel writes it", p.loc,
                                     hint="pass a writeable NumPy array or torch tensor (e.g. x.copy())")
        if not arr.flags.c_contiguous or not arr.flags.writeable:
            arr = np.ascontiguousarray(arr).copy()
            c.copy_back = True
            c.array = arr
        b.arrays[p.uid] = arr
        b.converted.append(c)
    b.scalars.update(bind_dims(pf, dims))
    for p, _ in inputs:
        if isinstance(p, N.Buffer):
            check_derived(pf, p, b.arrays[p.uid].shape, b.scalars)
    for i in b.out_idx:
        p = pf.params[i]
        b.arrays[p.uid] = allocate(output_shape(p, b.scalars), p.dtype)
    arrays_in = [v for p, v in inputs if isinstance(p, N.Buffer)]
    b.torch_out = any(framework(v) == "torch" for v in arrays_in) or (not arrays_in and loaded("torch") is not None)
    return b
