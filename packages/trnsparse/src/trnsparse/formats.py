"""Sparse matrix formats: COO, CSR, CSC and BSR, and conversions between them.

CSR and COO are the interchange formats (fast on the host); BSR -- dense
``block_size x block_size`` tiles, 128 for the Tensor Engine -- is the
device format. Every format has ``shape``, ``dtype``, ``device``, ``nnz``,
``density``, ``to_coo``/``to_csr``/``to_csc``/``to_bsr``/``to_dense``,
``to_scipy``/``to_torch``, ``A @ x``, ``A + B``, ``A.T`` and ``matvec``.

Canonical form: CSR, CSC and BSR always hold sorted indices with
duplicates summed (the constructor sorts and sums if the caller's arrays
are not canonical, without touching the caller's arrays). COO keeps what
it is given, duplicates included, exactly like SciPy: every operation
treats duplicates as summed, and :meth:`COOMatrix.sum_duplicates` returns
the canonical COO.
"""

from __future__ import annotations

import math
import numbers
import sys
from typing import Any

import numpy as np
import torch

from trnsci import dispatch, precision, validate
from trnsci.dispatch import traceable_as

from . import _host, arrays

#: float32, float64, complex64, complex128, and bfloat16/float16 (stored as given; every operation computes in
#: float32 and rounds its result to the input dtype once)
VALUE_DTYPES = validate.BLAS_DTYPES + (torch.bfloat16, torch.float16)
_INDEX_DTYPES = (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64)

#: The functions behind the operator protocol (``A @ x``, ``x @ A``, ``A + B``, ``s * A``, ``A.T``, ``matvec``) and the
#: device SpMV behind ``CSRMatrix.__trnsci_spmv__``, by name. :mod:`trnsparse.ops` (``spmv``, ``spmm``,
#: ``spgemm``, ``sparse_add``, ``sparse_scale``, ``sparse_transpose``) and :mod:`trnsparse._nki.ops`
#: (``device_spmv``) build on the classes here and hand their functions in when imported, so this module
#: imports neither.
_OPERATIONS: dict[str, Any] = {}


# --------------------------------------------------------------- validation

def _shape(shape: Any, where: str) -> tuple[int, int]:
    if isinstance(shape, torch.Size):
        shape = tuple(shape)
    if not isinstance(shape, (tuple, list)) or len(shape) != 2:
        raise ValueError(f"{where}: shape must be a pair (rows, cols), got {shape!r}")
    m = validate.integer(shape[0], "shape[0]", where, minimum=0)
    n = validate.integer(shape[1], "shape[1]", where, minimum=0)
    return m, n


def _values(x: Any, name: str, where: str, ndim: int = 1) -> torch.Tensor:
    t = validate.tensor(x, name, where)
    validate.dtype(t, name, VALUE_DTYPES, where)
    validate.ndim(t, name, ndim, where)
    return t


def _index(x: Any, name: str, where: str) -> torch.Tensor:
    t = validate.tensor(x, name, where)
    if t.dtype not in _INDEX_DTYPES:
        raise TypeError(f"{where}: {name} must hold integers, got dtype {str(t.dtype).replace('torch.', '')}")
    validate.ndim(t, name, 1, where)
    return t.to(torch.int64)


def _in_range(idx: torch.Tensor, bound: int, name: str, what: str, where: str) -> None:
    if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= bound):
        bad = idx[(idx < 0) | (idx >= bound)][0].item()
        raise ValueError(f"{where}: {name} out of range: {bad} is not in [0, {bound}) ({what})")


def _ptrs(ptr: torch.Tensor, count: int, nnz: int, name: str, where: str) -> None:
    if ptr.numel() != count + 1:
        raise ValueError(f"{where}: {name} must have {count + 1} entries (one more than the number of rows), "
                         f"got {ptr.numel()}")
    if int(ptr[0]) != 0:
        raise ValueError(f"{where}: {name}[0] must be 0, got {int(ptr[0])}")
    if count and not bool((ptr[1:] >= ptr[:-1]).all()):
        raise ValueError(f"{where}: {name} must be non-decreasing (monotone)")
    if int(ptr[-1]) != nnz:
        raise ValueError(f"{where}: {name}[-1] must equal the number of stored entries {nnz}, got {int(ptr[-1])}")


def _same_device(where: str, **named: torch.Tensor) -> None:
    validate.same_device(where, **named)


def _dtype_arg(dtype: Any, where: str) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        dt = dtype
    elif not isinstance(dtype, (np.dtype, str, type)):  # np.dtype() would take any object's .dtype
        raise TypeError(f"{where}: dtype must be one of float32, float64, complex64, complex128; "
                        f"got a {type(dtype).__name__}")
    else:
        try:
            dt = {np.dtype(np.float16): torch.float16,
                  np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64,
                  np.dtype(np.complex64): torch.complex64, np.dtype(np.complex128): torch.complex128}[np.dtype(dtype)]
        except (TypeError, KeyError):
            raise TypeError(f"{where}: dtype must be one of float32, float64, complex64, complex128, bfloat16, "
                            "float16; "
                            f"got {dtype!r}") from None
    if dt not in VALUE_DTYPES:
        raise TypeError(f"{where}: dtype must be one of float32, float64, complex64, complex128, bfloat16, "
                        f"float16; got {dt}")
    return dt


# --------------------------------------------------------------- base class

class _Array:
    """One of a matrix's arrays (``values``, ``col_indices``, ...).

    Reading is a dict lookup. Assigning goes through
    :meth:`SparseMatrix._assign`: the matrix is re-checked as its constructor
    checks it and everything derived from the old arrays is dropped.
    """

    def __init__(self, key: str, doc: str):
        self.key, self.__doc__ = key, doc

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, owner=None):
        return self if obj is None else obj.__dict__[self.key]

    def __set__(self, obj, value):
        obj._assign(self.name, value)


class SparseMatrix:
    """Common behaviour of the four formats (not instantiated directly)."""

    format = ""
    ndim = 2
    __array_priority__ = 100  # so ``ndarray @ A`` defers to us
    _ARRAYS: tuple[str, ...] = ()  # the constructor's array arguments, in order

    def _assign(self, name: str, value) -> None:
        """Replace one array: rebuild through the public constructor (same checks, same canonical form).

        The instance dict is replaced whole, so no cache (int32 index copies,
        sorted copy, canonical flags) outlives the arrays it was derived from.
        """
        args = [value if a == name else getattr(self, a) for a in self._ARRAYS]
        extra = (self.block_size,) if self.format == "bsr" else ()
        fresh = type(self)(*args, self._shape, *extra)
        self.__dict__.clear()
        self.__dict__.update(fresh.__dict__)

    # -- properties
    @property
    def shape(self) -> tuple[int, int]:
        return self._shape

    @property
    def dtype(self) -> torch.dtype:
        return self._values_tensor().dtype

    @property
    def device(self) -> torch.device:
        return self._values_tensor().device

    @property
    def nnz(self) -> int:
        """Number of stored entries (BSR: entries of the stored blocks)."""
        return int(self._values_tensor().numel())

    @property
    def density(self) -> float:
        """``nnz / (rows * cols)`` (0.0 for an empty shape)."""
        m, n = self._shape
        return self.nnz / (m * n) if m * n else 0.0

    def __len__(self):
        raise TypeError("sparse matrix length is ambiguous; use .shape[0]")

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(shape={self._shape}, nnz={self.nnz}, dtype="
                f"{str(self.dtype).replace('torch.', '')}, density={self.density:.4g})")

    # -- conversions every format has
    def to_csc(self) -> CSCMatrix:
        """This matrix in CSC format."""
        csr = self.to_csr()
        vals, rows, cptr = arrays.csr_transpose(csr.values, csr.col_indices, csr.row_ptrs, csr.shape)
        return CSCMatrix._make(vals, rows, cptr, self._shape)

    def to_bsr(self, block_size: int = 128, threshold: float = 0.0) -> BSRMatrix:
        """This matrix in BSR format (see :meth:`BSRMatrix.from_csr`)."""
        return BSRMatrix.from_csr(self.to_csr(), block_size=block_size, threshold=threshold)

    def to_scipy(self):
        """A SciPy sparse array of the same format and dtype (a copy on the host; bfloat16/float16 values,
        which SciPy's kernels do not take, become float32 exactly)."""
        import scipy.sparse as sp

        csr = self.to_csr()
        vals = csr.values.detach().cpu()
        data = arrays.np_view(precision.upcast(vals))
        out = sp.csr_array((data.copy(), arrays.np_view(csr.col_indices.cpu()).copy(),
                            arrays.np_view(csr.row_ptrs.cpu()).copy()), shape=self._shape)
        return {"csr": out, "coo": out.tocoo(), "csc": out.tocsc()}.get(self.format, out)

    def to_torch(self) -> torch.Tensor:
        """A torch sparse tensor of the matching layout (CSR -> ``sparse_csr`` ...)."""
        csr = self.to_csr().sorted_indices()
        return torch.sparse_csr_tensor(csr.row_ptrs, csr.col_indices, csr.values, size=self._shape,
                                       check_invariants=False)

    def to(self, dtype=None, device=None):
        """A copy with values cast to ``dtype`` and/or moved to ``device``."""
        raise NotImplementedError

    def __trnsci_upcast__(self, dtype: torch.dtype) -> SparseMatrix:
        """This matrix with its values in ``dtype``: :mod:`trnsci.precision`'s protocol, how a bfloat16/float16
        matrix enters a computation in float32. The copy is kept on the matrix while its arrays are the same,
        unmodified tensors (and with it the device layouts cached on the copy), so repeated products of one
        half-precision matrix convert it once."""
        from .layouts import cached

        key = "_f32_form" if dtype == torch.float32 else f"_{str(dtype).replace('torch.', '')}_form"
        return cached(self, key, (self._values_tensor(), *_index_arrays(self)), lambda: self.to(dtype))

    # -- linear-operator protocol
    def matvec(self, x):
        """``A @ x`` for a dense 1-D ``x`` (or 2-D ``X``, columns)."""
        t = x if isinstance(x, torch.Tensor) else None
        if t is not None and t.dim() == 2 or isinstance(x, np.ndarray) and x.ndim == 2:
            return _OPERATIONS["spmm"](self, x)
        return _OPERATIONS["spmv"](self, x)

    def __matmul__(self, other):
        if isinstance(other, SparseMatrix):
            return _OPERATIONS["spgemm"](self, other)
        if isinstance(other, (torch.Tensor, np.ndarray)):
            return self.matvec(other)
        return NotImplemented

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """The products with a dense tensor, ``A @ x``, ``x @ A`` and ``torch.matmul`` of either order, as
        :meth:`__matmul__` / :meth:`__rmatmul__` compute them; any other torch function returns
        ``NotImplemented`` (torch then raises a TypeError).

        Eager ``A @ x`` never comes here (Python calls :meth:`__matmul__` first). Under ``torch.compile``
        both orders do: Dynamo hands a product of a tensor and an object defining this method to it (as
        ``Tensor.__rmatmul__(x, A)`` for ``A @ x``, see :func:`trnsci.dispatch._dynamo_reverse_matmul`)
        instead of failing to put the object in the graph, and then traces the public ``spmv``/``spmm``
        the product runs, so ``A @ x`` and ``x @ A`` compile as they do."""
        if kwargs or len(args) != 2:
            return NotImplemented
        if func is torch.Tensor.__rmatmul__:  # Tensor.__rmatmul__(x, A) is A @ x
            a, b = args[1], args[0]
        elif func is torch.Tensor.__matmul__ or func is torch.matmul:
            a, b = args
        elif func is torch.Tensor.matmul:
            if torch.compiler.is_compiling() and not dispatch.dynamo_orders_matmul():
                # this Dynamo passes A @ x as Tensor.matmul(x, A) too: x @ A would be a wrong answer
                raise TypeError("A @ x on a sparse matrix: this torch.compile cannot tell A @ x from x @ A; "
                                "call trnsparse.spmv(A, x) / trnsparse.spmm(A, X) inside the compiled function")
            a, b = args
        else:
            return NotImplemented
        if isinstance(a, SparseMatrix):
            return a.__matmul__(b)
        return b.__rmatmul__(a) if isinstance(b, SparseMatrix) else NotImplemented

    def __rmatmul__(self, other):
        if isinstance(other, (torch.Tensor, np.ndarray)):
            t = validate.tensor(other, "x", "x @ A")
            if t.dim() not in (1, 2):
                raise ValueError(f"x @ A: x must be 1-D or 2-D, got shape {tuple(t.shape)}")
            at = _OPERATIONS["product_transpose"](self)
            r = at.matvec(t) if t.dim() == 1 else at.matvec(t.transpose(0, 1)).transpose(0, 1)
            return r.numpy() if isinstance(other, np.ndarray) else r
        return NotImplemented

    def __add__(self, other):
        if isinstance(other, SparseMatrix):
            return _OPERATIONS["sparse_add"](self, other)
        return NotImplemented

    def __sub__(self, other):
        if isinstance(other, SparseMatrix):
            return _OPERATIONS["sparse_add"](self, other, 1.0, -1.0)
        return NotImplemented

    def __mul__(self, other):
        if isinstance(other, numbers.Number) and not isinstance(other, bool):
            return _OPERATIONS["sparse_scale"](self, other)
        return NotImplemented

    __rmul__ = __mul__

    def __truediv__(self, other):
        if isinstance(other, numbers.Number) and not isinstance(other, bool):
            return _OPERATIONS["sparse_scale"](self, 1.0 / other)
        return NotImplemented

    def __neg__(self):
        return _OPERATIONS["sparse_scale"](self, -1.0)

    @property
    def T(self):
        """The transpose, in the same format."""
        return _OPERATIONS["sparse_transpose"](self)

    def transpose(self):
        return self.T


# --------------------------------------------------------------- CSR

def _compressed(values, indices, ptrs, n_major, n_minor, names, where):
    """Check and canonicalize a compressed (CSR-like) triple; ``names`` = (indices, ptrs, minor-axis noun).

    CSR is (col_indices, row_ptrs) over rows; CSC is the same layout over
    columns. Duplicates are summed and indices sorted within each major
    slice, without touching the caller's tensors.
    """
    idx_name, ptr_name, noun = names
    values = _values(values, "values", where)
    indices = _index(indices, idx_name, where)
    ptrs = _index(ptrs, ptr_name, where)
    _same_device(where, **{"values": values, idx_name: indices, ptr_name: ptrs})
    if indices.numel() != values.numel():
        raise ValueError(f"{where}: {idx_name} has {indices.numel()} entries but values has {values.numel()}")
    _ptrs(ptrs, n_major, values.numel(), ptr_name, where)
    _in_range(indices, n_minor, idx_name, f"{n_minor} {noun}", where)
    if not arrays.csr_is_canonical(indices, ptrs, values.numel()):
        major = arrays.row_indices(ptrs, values.numel())
        values, major, indices = arrays.coo_canonical(values, major, indices, (n_major, n_minor))
        ptrs = arrays.ptrs_from_sorted(major, n_major)
    return values, indices, ptrs


class CSRMatrix(SparseMatrix):
    """Compressed Sparse Row matrix.

    Parameters
    ----------
    values : (nnz,) tensor, float32/float64/complex64/complex128
    col_indices : (nnz,) integer tensor, entries in ``[0, n)``
    row_ptrs : (m + 1,) integer tensor, non-decreasing, ``row_ptrs[0] == 0``,
        ``row_ptrs[-1] == nnz``; row ``i`` owns ``row_ptrs[i]:row_ptrs[i+1]``.
    shape : (m, n)

    Raises
    ------
    TypeError
        Non-tensor arguments, integer values, non-integer indices.
    ValueError
        Lengths that disagree, indices out of range, ``row_ptrs`` not
        monotone, tensors on different devices.

    Notes
    -----
    Indices are stored as int64. If the columns of a row are unsorted or
    repeated, the stored matrix is the canonical one (sorted, duplicates
    summed); the caller's tensors are never modified.

    Examples
    --------
    >>> import torch, trnsparse
    >>> A = trnsparse.CSRMatrix(torch.tensor([1., 2., 3.]), torch.tensor([0, 2, 1]),
    ...                         torch.tensor([0, 2, 3]), (2, 3))
    >>> A.to_dense()
    tensor([[1., 0., 2.],
            [0., 3., 0.]])
    >>> A @ torch.ones(3)
    tensor([3., 3.])
    """

    format = "csr"
    _ARRAYS = ("values", "col_indices", "row_ptrs")
    values = _Array("_vals", "(nnz,) stored values.")

    def __init__(self, values, col_indices, row_ptrs, shape):
        m, n = _shape(shape, "CSRMatrix")
        values, col_indices, row_ptrs = _compressed(values, col_indices, row_ptrs, m, n,
                                                    ("col_indices", "row_ptrs", "columns"), "CSRMatrix")
        self._set(values, col_indices, row_ptrs, (m, n))

    def _set(self, values, col_indices, row_ptrs, shape, sorted_=True):
        d = self.__dict__  # not through the setters below: nothing is cached yet
        d["_vals"], d["_cols"], d["_ptrs"], d["_sorted"] = values, col_indices, row_ptrs, sorted_
        self._shape = shape

    @classmethod
    def _make(cls, values, col_indices, row_ptrs, shape, sorted_=True) -> CSRMatrix:
        """Trusted constructor: index arrays without duplicates, no checks.

        ``sorted_=False`` marks a result whose columns are not sorted inside
        rows (SpGEMM output, as in SciPy); :meth:`sorted_indices` sorts.
        int32 index arrays (SciPy kernels' output) are kept as the cached
        host indices and widened to int64 only when ``col_indices`` /
        ``row_ptrs`` are read.
        """
        obj = cls.__new__(cls)
        if col_indices.dtype == torch.int32:
            obj.__dict__["_idx32"] = (col_indices, row_ptrs)
            col_indices = row_ptrs = None
        obj._set(values, col_indices, row_ptrs, tuple(shape), sorted_)
        return obj

    @property
    def col_indices(self) -> torch.Tensor:
        """(nnz,) int64 column index of every stored entry."""
        c = self.__dict__["_cols"]
        if c is None:
            c = self.__dict__["_cols"] = self.__dict__["_idx32"][0].to(torch.int64)
            self.__dict__.setdefault("_idx32_seen", {})["_cols"] = c._version  # widened from the int32 copy
        return c

    @col_indices.setter
    def col_indices(self, value):
        self._assign("col_indices", value)

    @property
    def row_ptrs(self) -> torch.Tensor:
        """(m + 1,) int64 row pointers."""
        p = self.__dict__["_ptrs"]
        if p is None:
            p = self.__dict__["_ptrs"] = self.__dict__["_idx32"][1].to(torch.int64)
            self.__dict__.setdefault("_idx32_seen", {})["_ptrs"] = p._version  # widened from the int32 copy
        return p

    @row_ptrs.setter
    def row_ptrs(self, value):
        self._assign("row_ptrs", value)

    def __trnsci_spmv__(self):
        """The device-SpMV seam for iterative solvers in other libraries (trnsolver's ``cg``).

        Returns an object with ``run(p)`` (``p`` and the result ``[n, 1]`` float32: one
        ``csr_spmv_kernel`` launch on the device layout cached on this matrix), ``counts()``
        (that launch's closed form) and ``kernel`` (its name) -- or a string saying why this
        matrix has none (not square, not float32, ...). A solver that finds the method keeps
        its iteration on the device without importing trnsparse.
        """
        device_spmv = _OPERATIONS.get("device_spmv")
        return "trnsparse's NKI lowerings are not loaded" if device_spmv is None else device_spmv(self)

    def _host_indices(self):
        """(col_indices, row_ptrs) as int32 when they fit, cached: SciPy's kernels read half the bytes.

        Rebuilt when ``col_indices`` / ``row_ptrs`` were modified in place since (version counters)."""
        d = self.__dict__
        c = d.get("_idx32")
        if c is not None:
            seen = d.get("_idx32_seen", {})
            for name in ("_cols", "_ptrs"):
                t = d[name]
                if t is not None and seen.get(name) != t._version:
                    c = None
                    break
        if c is None:
            cols, ptrs = self.col_indices, self.row_ptrs
            if self.values.numel() < 2**31 - 1 and max(self._shape) < 2**31 - 1:
                c = (cols.to(torch.int32), ptrs.to(torch.int32))
            else:
                c = (cols, ptrs)
            d["_idx32"] = c
            d["_idx32_seen"] = {"_cols": cols._version, "_ptrs": ptrs._version}
        return c

    def _settled_key(self):
        """This matrix's part of a settled call's key (:mod:`trnsci.settled`, kind ``"owner"``): the
        arrays a caller can reach, each by identity and version counter (an index array that is None --
        widened when first read -- is a state too), the shape, the host routes' generation and the
        torch thread count (a settled runner reads the arrays, follows the measured route). A subclass,
        or values that require grad, settle nothing (``TypeError``)."""
        d = self.__dict__
        v, c, p = d["_vals"], d["_cols"], d["_ptrs"]
        if type(self) is not CSRMatrix or v.requires_grad:
            raise TypeError("no settled routes for this matrix")
        return (id(v), v._version, id(c), -1 if c is None else c._version, id(p), -1 if p is None else p._version,
                self._shape, _host.generation[0], torch.get_num_threads())

    @property
    def has_sorted_indices(self) -> bool:
        """True when column indices are sorted inside every row."""
        return self._sorted

    def sorted_indices(self) -> CSRMatrix:
        """This matrix with column indices sorted inside rows (``self`` if already sorted)."""
        if self._sorted:
            return self
        if "_sorted_cache" in self.__dict__:
            return self.__dict__["_sorted_cache"]
        if arrays.host_ok(self.values):
            ptr = arrays.np_view(self.row_ptrs)
            idx = arrays.np_view(self.col_indices).copy()
            data = arrays.np_view(self.values).copy()
            arrays.sparsetools.csr_sort_indices(self._shape[0], ptr, idx, data)
            out = CSRMatrix._make(torch.from_numpy(data), torch.from_numpy(idx), self.row_ptrs, self._shape)
        else:
            key = self.row_indices * max(self._shape[1], 1) + self.col_indices
            order = torch.argsort(key)
            out = CSRMatrix._make(self.values[order], self.col_indices[order], self.row_ptrs, self._shape)
        self.__dict__["_sorted_cache"] = out
        return out

    def _values_tensor(self):
        return self.values

    @property
    def row_indices(self) -> torch.Tensor:
        """Row index of every stored entry (int64, length ``nnz``)."""
        return arrays.row_indices(self.row_ptrs, self.nnz)

    @property
    def has_canonical_format(self) -> bool:
        """Sorted indices and no duplicates (CSR never holds duplicates)."""
        return self._sorted

    @classmethod
    def from_dense(cls, A, threshold: float = 0.0) -> CSRMatrix:
        """See :func:`trnsparse.from_dense`."""
        return from_dense(A, threshold)

    def to_csr(self) -> CSRMatrix:
        return self

    def to_coo(self) -> COOMatrix:
        return COOMatrix._make(self.values, self.row_indices, self.col_indices, self._shape,
                               canonical=True if self._sorted else None)

    def to_dense(self) -> torch.Tensor:
        """The dense ``(m, n)`` tensor."""
        return arrays.csr_to_dense(self.values, self.col_indices, self.row_ptrs, self._shape)

    def to(self, dtype=None, device=None) -> CSRMatrix:
        dt = self.dtype if dtype is None else _dtype_arg(dtype, "CSRMatrix.to")
        dev = self.device if device is None else validate.device(device, f"{type(self).__name__}.to")
        d = self.__dict__
        if d["_cols"] is None and d["_ptrs"] is None and dev == self.device:
            # int32 host indices not widened yet (a SciPy kernel's result): the copy keeps them so
            return CSRMatrix._make(self.values.to(dt), *d["_idx32"], self._shape, self._sorted)
        return CSRMatrix._make(self.values.to(dev, dt), self.col_indices.to(dev), self.row_ptrs.to(dev),
                               self._shape, self._sorted)


# --------------------------------------------------------------- CSC

class CSCMatrix(SparseMatrix):
    """Compressed Sparse Column matrix.

    Parameters
    ----------
    values : (nnz,) tensor
    row_indices : (nnz,) integer tensor, entries in ``[0, m)``
    col_ptrs : (n + 1,) integer tensor, non-decreasing, column ``j`` owns
        ``col_ptrs[j]:col_ptrs[j+1]``
    shape : (m, n)

    Examples
    --------
    >>> import torch, trnsparse
    >>> A = trnsparse.CSCMatrix(torch.tensor([1., 2.]), torch.tensor([1, 0]),
    ...                         torch.tensor([0, 1, 2]), (2, 2))
    >>> A.to_dense()
    tensor([[0., 2.],
            [1., 0.]])
    """

    format = "csc"
    _ARRAYS = ("values", "row_indices", "col_ptrs")
    values = _Array("_vals", "(nnz,) stored values.")
    row_indices = _Array("_rows", "(nnz,) int64 row index of every stored entry.")
    col_ptrs = _Array("_cptrs", "(n + 1,) int64 column pointers.")

    def __init__(self, values, row_indices, col_ptrs, shape):
        m, n = _shape(shape, "CSCMatrix")
        values, row_indices, col_ptrs = _compressed(values, row_indices, col_ptrs, n, m,
                                                    ("row_indices", "col_ptrs", "rows"), "CSCMatrix")
        self._set(values, row_indices, col_ptrs, (m, n))

    def _set(self, values, row_indices, col_ptrs, shape):
        d = self.__dict__
        d["_vals"], d["_rows"], d["_cptrs"], d["_shape"] = values, row_indices, col_ptrs, shape

    @classmethod
    def _make(cls, values, row_indices, col_ptrs, shape) -> CSCMatrix:
        obj = cls.__new__(cls)
        obj._set(values, row_indices, col_ptrs, tuple(shape))
        return obj

    def _values_tensor(self):
        return self.values

    def _transpose_csr(self) -> CSRMatrix:
        """A^T as CSR, sharing this matrix's arrays (no copy)."""
        return CSRMatrix._make(self.values, self.row_indices, self.col_ptrs, (self._shape[1], self._shape[0]))

    def to_csr(self) -> CSRMatrix:
        vals, cols, rptr = arrays.csr_transpose(self.values, self.row_indices, self.col_ptrs,
                                               (self._shape[1], self._shape[0]))
        return CSRMatrix._make(vals, cols, rptr, self._shape)

    def to_csc(self) -> CSCMatrix:
        return self

    def to_coo(self) -> COOMatrix:
        return self.to_csr().to_coo()

    def to_dense(self) -> torch.Tensor:
        return self._transpose_csr().to_dense().transpose(0, 1).contiguous()

    def to_torch(self) -> torch.Tensor:
        return torch.sparse_csc_tensor(self.col_ptrs, self.row_indices, self.values, size=self._shape,
                                       check_invariants=False)

    def to(self, dtype=None, device=None) -> CSCMatrix:
        dt = self.dtype if dtype is None else _dtype_arg(dtype, "CSCMatrix.to")
        dev = self.device if device is None else validate.device(device, f"{type(self).__name__}.to")
        return CSCMatrix._make(self.values.to(dev, dt), self.row_indices.to(dev), self.col_ptrs.to(dev),
                               self._shape)


# --------------------------------------------------------------- COO

def _coo_checked(values, row_indices, col_indices, m, n):
    where = "COOMatrix"
    values = _values(values, "values", where)
    row_indices = _index(row_indices, "row_indices", where)
    col_indices = _index(col_indices, "col_indices", where)
    _same_device(where, values=values, row_indices=row_indices, col_indices=col_indices)
    for name, t in (("row_indices", row_indices), ("col_indices", col_indices)):
        if t.numel() != values.numel():
            raise ValueError(f"{where}: {name} has {t.numel()} entries but values has {values.numel()}")
    _in_range(row_indices, m, "row_indices", f"{m} rows", where)
    _in_range(col_indices, n, "col_indices", f"{n} columns", where)
    return values, row_indices, col_indices


class COOMatrix(SparseMatrix):
    """Coordinate (triplet) matrix; duplicates allowed and always summed.

    Parameters
    ----------
    values : (nnz,) tensor
    row_indices, col_indices : (nnz,) integer tensors in ``[0, m)``, ``[0, n)``
    shape : (m, n)

    Examples
    --------
    >>> import torch, trnsparse
    >>> A = trnsparse.COOMatrix(torch.tensor([1., 2., 5.]), torch.tensor([1, 0, 1]),
    ...                         torch.tensor([1, 0, 1]), (2, 2))
    >>> A.nnz, A.sum_duplicates().nnz
    (3, 2)
    >>> A.to_dense()
    tensor([[2., 0.],
            [0., 6.]])
    """

    format = "coo"
    _ARRAYS = ("values", "row_indices", "col_indices")
    values = _Array("_vals", "(nnz,) stored values.")
    row_indices = _Array("_rows", "(nnz,) int64 row index of every stored entry.")
    col_indices = _Array("_cols", "(nnz,) int64 column index of every stored entry.")

    def __init__(self, values, row_indices, col_indices, shape):
        m, n = _shape(shape, "COOMatrix")
        self._set(*_coo_checked(values, row_indices, col_indices, m, n), (m, n), None)

    def _set(self, values, row_indices, col_indices, shape, canonical):
        d = self.__dict__  # not through the setters below: nothing is cached yet
        d["_vals"], d["_rows"], d["_cols"], d["_canonical"] = values, row_indices, col_indices, canonical
        self._shape = shape

    @classmethod
    def _make(cls, values, row_indices, col_indices, shape, canonical=None) -> COOMatrix:
        obj = cls.__new__(cls)
        obj._set(values, row_indices, col_indices, tuple(shape), canonical)
        return obj

    def _values_tensor(self):
        return self.values

    @property
    def has_canonical_format(self) -> bool:
        """True when entries are sorted row-major with no duplicates."""
        if self._canonical is None:
            n = self._shape[1]
            key = self.row_indices * n + self.col_indices
            self._canonical = bool((key[1:] > key[:-1]).all()) if key.numel() > 1 else True
        return self._canonical

    def sum_duplicates(self) -> COOMatrix:
        """The canonical COO: sorted row-major, duplicate entries summed (a new matrix)."""
        if self.has_canonical_format:
            return self
        vals, rows, cols = arrays.coo_canonical(self.values, self.row_indices, self.col_indices, self._shape)
        return COOMatrix._make(vals, rows, cols, self._shape, canonical=True)

    def to_coo(self) -> COOMatrix:
        return self

    def to_csr(self) -> CSRMatrix:
        c = self.sum_duplicates()
        return CSRMatrix._make(c.values, c.col_indices, arrays.ptrs_from_sorted(c.row_indices, self._shape[0]),
                               self._shape)

    def to_dense(self) -> torch.Tensor:
        m, n = self._shape
        out = torch.zeros(m, n, dtype=self.dtype, device=self.device)
        if self.nnz:
            out.index_put_((self.row_indices, self.col_indices), self.values, accumulate=True)
        return out

    def to_torch(self) -> torch.Tensor:
        return torch.sparse_coo_tensor(torch.stack([self.row_indices, self.col_indices]), self.values,
                                       size=self._shape, check_invariants=False)

    def to(self, dtype=None, device=None) -> COOMatrix:
        dt = self.dtype if dtype is None else _dtype_arg(dtype, "COOMatrix.to")
        dev = self.device if device is None else validate.device(device, f"{type(self).__name__}.to")
        return COOMatrix._make(self.values.to(dev, dt), self.row_indices.to(dev), self.col_indices.to(dev),
                               self._shape, self._canonical)


# --------------------------------------------------------------- BSR

class BSRMatrix(SparseMatrix):
    """Block Sparse Row matrix: dense ``block_size x block_size`` tiles.

    Parameters
    ----------
    blocks : (n_blocks, b, b) tensor
        The stored tiles, in block-row-major order. Edge tiles of a matrix
        whose shape is not a multiple of ``b`` are zero-padded: entries
        outside ``shape`` must be zero.
    block_col_indices : (n_blocks,) integer tensor in ``[0, ceil(n / b))``
    block_row_ptrs : (ceil(m / b) + 1,) integer tensor, non-decreasing
    shape : (m, n)
    block_size : int, default 128
        ``b``; 128 is the Tensor Engine tile the kernels use.

    Notes
    -----
    The layout is the one the kernels read: ``blocks`` is one contiguous
    ``(n_blocks, b, b)`` array (one DMA descriptor per tile, HBM bytes
    proportional to the stored tiles), ``block_row_ptrs`` / ``block_col_indices``
    address it, and :attr:`block_row_indices` gives each tile's block row for
    COO-style gathers. ``nnz`` counts every entry of every stored tile.

    Examples
    --------
    >>> import torch, trnsparse
    >>> A = torch.zeros(4, 4); A[0, 1] = 1.0; A[3, 3] = 2.0
    >>> B = trnsparse.BSRMatrix.from_dense(A, block_size=2)
    >>> B.n_blocks, B.block_col_indices.tolist()
    (2, [0, 1])
    >>> torch.equal(B.to_dense(), A)
    True
    """

    format = "bsr"
    _ARRAYS = ("blocks", "block_col_indices", "block_row_ptrs")
    blocks = _Array("_blocks", "(n_blocks, b, b) stored tiles.")
    block_col_indices = _Array("_bcols", "(n_blocks,) int64 block column of every stored tile.")
    block_row_ptrs = _Array("_bptrs", "(ceil(m / b) + 1,) int64 block-row pointers.")

    def __init__(self, blocks, block_col_indices, block_row_ptrs, shape, block_size: int = 128):
        where = "BSRMatrix"
        blocks = _values(blocks, "blocks", where, ndim=3)
        block_col_indices = _index(block_col_indices, "block_col_indices", where)
        block_row_ptrs = _index(block_row_ptrs, "block_row_ptrs", where)
        m, n = _shape(shape, where)
        b = validate.integer(block_size, "block_size", where, minimum=1)
        _same_device(where, blocks=blocks, block_col_indices=block_col_indices, block_row_ptrs=block_row_ptrs)
        if tuple(blocks.shape[1:]) != (b, b):
            raise ValueError(f"{where}: blocks must have shape (n_blocks, {b}, {b}) for block_size={b}, "
                             f"got {tuple(blocks.shape)}")
        mb, nb = -(-m // b), -(-n // b)
        nblk = blocks.shape[0]
        if block_col_indices.numel() != nblk:
            raise ValueError(f"{where}: block_col_indices has {block_col_indices.numel()} entries but blocks "
                             f"holds {nblk} blocks")
        _ptrs(block_row_ptrs, mb, nblk, "block_row_ptrs", where)
        _in_range(block_col_indices, nb, "block_col_indices", f"{nb} block columns", where)
        brow = arrays.row_indices(block_row_ptrs, nblk)
        # entries in the padding of ragged edge tiles must be zero
        if nblk and (m % b or n % b):
            edge = torch.zeros(nblk, b, b, dtype=torch.bool, device=blocks.device)
            ar = torch.arange(b, device=blocks.device)
            if m % b:
                edge |= (brow == mb - 1)[:, None, None] & (ar >= m % b)[None, :, None]
            if n % b:
                edge |= ((block_col_indices == nb - 1)[:, None, None]
                         & (torch.arange(b, device=blocks.device) >= n % b)[None, None, :])
            if bool((blocks.detach()[edge] != 0).any()):
                raise ValueError(f"{where}: blocks hold nonzero entries outside shape {(m, n)} "
                                 f"(the padding of ragged edge blocks must be zero)")
        key = brow * max(nb, 1) + block_col_indices
        if nblk > 1 and not bool((key[1:] > key[:-1]).all()):
            order = torch.argsort(key, stable=True)
            ks = key[order]
            uniq, inv = torch.unique_consecutive(ks, return_inverse=True)
            blocks = torch.zeros(uniq.numel(), b, b, dtype=blocks.dtype, device=blocks.device).index_add(
                0, inv, blocks[order])
            brow, block_col_indices = uniq // max(nb, 1), uniq % max(nb, 1)
            block_row_ptrs = arrays.ptrs_from_sorted(brow, mb)
        self._set(blocks, block_col_indices, block_row_ptrs, (m, n), b)

    def _set(self, blocks, block_col_indices, block_row_ptrs, shape, b):
        d = self.__dict__
        d["_blocks"], d["_bcols"], d["_bptrs"] = blocks, block_col_indices, block_row_ptrs
        self._shape, self.block_size = shape, b

    @classmethod
    def _make(cls, blocks, block_col_indices, block_row_ptrs, shape, b) -> BSRMatrix:
        obj = cls.__new__(cls)
        obj._set(blocks, block_col_indices, block_row_ptrs, tuple(shape), int(b))
        return obj

    def _values_tensor(self):
        return self.blocks

    @property
    def n_blocks(self) -> int:
        """Number of stored tiles."""
        return int(self.blocks.shape[0])

    @property
    def n_block_rows(self) -> int:
        return -(-self._shape[0] // self.block_size)

    @property
    def n_block_cols(self) -> int:
        return -(-self._shape[1] // self.block_size)

    @property
    def padded_shape(self) -> tuple[int, int]:
        """Shape rounded up to whole tiles (what a kernel sees)."""
        return self.n_block_rows * self.block_size, self.n_block_cols * self.block_size

    @property
    def block_row_indices(self) -> torch.Tensor:
        """Block row of every stored tile (int64, length ``n_blocks``)."""
        return arrays.row_indices(self.block_row_ptrs, self.n_blocks)

    @property
    def block_density(self) -> float:
        """Stored tiles / all tiles."""
        tot = self.n_block_rows * self.n_block_cols
        return self.n_blocks / tot if tot else 0.0

    @classmethod
    def from_dense(cls, A, block_size: int = 128, threshold: float = 0.0) -> BSRMatrix:
        """Tile a dense matrix; keep the tiles holding an entry with ``|a| > threshold``.

        Kept tiles keep all their entries (exactly); NaN counts as above
        any threshold.

        Examples
        --------
        >>> import torch, trnsparse
        >>> B = trnsparse.BSRMatrix.from_dense(torch.eye(5), block_size=2)
        >>> B.n_blocks, B.padded_shape
        (3, (6, 6))
        """
        where = "BSRMatrix.from_dense"
        A = _values(A, "A", where, ndim=2)
        m, n = A.shape
        b = _block_size(block_size, m, n, where)
        thr = _threshold(threshold, where)
        mb, nb = -(-m // b), -(-n // b)
        Ap = A
        if mb * b != m or nb * b != n:
            Ap = torch.zeros(mb * b, nb * b, dtype=A.dtype, device=A.device)
            Ap[:m, :n] = A
        tiles = Ap.reshape(mb, b, nb, b).transpose(1, 2)  # (mb, nb, b, b) view
        keep = ~(tiles.abs() <= thr).all(dim=3).all(dim=2) if thr > 0 else (tiles != 0).any(dim=3).any(dim=2)
        idx = torch.nonzero(keep)
        blocks = tiles[idx[:, 0], idx[:, 1]].contiguous()
        return cls._make(blocks, idx[:, 1].contiguous(), arrays.ptrs_from_sorted(idx[:, 0], mb), (m, n), b)

    @classmethod
    def from_csr(cls, csr, block_size: int = 128, threshold: float = 0.0) -> BSRMatrix:
        """Tile a sparse matrix (any format); keep tiles with an entry ``|a| > threshold``.

        Examples
        --------
        >>> import torch, trnsparse
        >>> A = trnsparse.eye_sparse(3)
        >>> trnsparse.BSRMatrix.from_csr(A, block_size=2).n_blocks
        2
        """
        where = "BSRMatrix.from_csr"
        if not isinstance(csr, SparseMatrix):
            raise TypeError(f"{where}: csr must be a trnsparse matrix, got {type(csr).__name__}")
        csr = csr.to_csr()
        m, n = csr.shape
        b = _block_size(block_size, m, n, where)
        thr = _threshold(threshold, where)
        mb, nb = -(-m // b), -(-n // b)
        rows, cols = csr.row_indices, csr.col_indices
        key = (rows // b) * max(nb, 1) + cols // b
        uniq, inv = torch.unique(key, sorted=True, return_inverse=True)
        blocks = torch.zeros(uniq.numel(), b, b, dtype=csr.dtype, device=csr.device)
        blocks.index_put_((inv, rows % b, cols % b), csr.values, accumulate=True)
        brow, bcol = uniq // max(nb, 1), uniq % max(nb, 1)
        if uniq.numel():
            keep = ~(blocks.abs() <= thr).flatten(1).all(1)
            blocks, brow, bcol = blocks[keep], brow[keep], bcol[keep]
        return cls._make(blocks, bcol, arrays.ptrs_from_sorted(brow, mb), (m, n), b)

    def to_dense(self) -> torch.Tensor:
        m, n = self._shape
        b = self.block_size
        mb, nb = self.n_block_rows, self.n_block_cols
        T = torch.zeros(mb, nb, b, b, dtype=self.dtype, device=self.device)
        if self.n_blocks:
            T = T.index_put((self.block_row_indices, self.block_col_indices), self.blocks)
        return T.transpose(1, 2).reshape(mb * b, nb * b)[:m, :n].contiguous()

    def to_coo(self) -> COOMatrix:
        return self.to_csr().to_coo()

    def to_csr(self) -> CSRMatrix:
        """The CSR matrix of the nonzero entries of the stored tiles."""
        m, n = self._shape
        b = self.block_size
        k, i, j = torch.nonzero(self.blocks, as_tuple=True)
        vals = self.blocks[k, i, j]
        rows = self.block_row_indices[k] * b + i
        cols = self.block_col_indices[k] * b + j
        key = rows * max(n, 1) + cols
        order = torch.argsort(key)
        return CSRMatrix._make(vals[order], cols[order], arrays.ptrs_from_sorted(rows[order], m), (m, n))

    def to_bsr(self, block_size: int = 128, threshold: float = 0.0) -> BSRMatrix:
        if type(block_size) is int and block_size == self.block_size and type(threshold) is float and threshold == 0.0:
            return self
        return BSRMatrix.from_csr(self.to_csr(), block_size, threshold)

    def to_scipy(self):
        """A SciPy ``bsr_array`` (a ``csr_array`` when the shape is not a multiple of the block size,
        which SciPy's BSR cannot represent)."""
        import scipy.sparse as sp

        if self.padded_shape != self._shape:
            return self.to_csr().to_scipy()
        blocks = precision.upcast(self.blocks.detach().cpu())  # bf16/fp16: SciPy's kernels do not take them; exact
        return sp.bsr_array((arrays.np_view(blocks).copy(),
                             arrays.np_view(self.block_col_indices.cpu()).copy(),
                             arrays.np_view(self.block_row_ptrs.cpu()).copy()),
                            shape=self._shape, blocksize=(self.block_size,) * 2)

    def to_torch(self) -> torch.Tensor:
        """A torch ``sparse_bsr`` tensor; a ``sparse_csr`` one when the shape is not a multiple of the
        block size (torch's BSR holds whole blocks only, and the padded shape must not leak out)."""
        if self.padded_shape != self._shape:
            return self.to_csr().to_torch()
        return torch.sparse_bsr_tensor(self.block_row_ptrs, self.block_col_indices, self.blocks,
                                       size=self._shape, check_invariants=False)

    def to(self, dtype=None, device=None) -> BSRMatrix:
        dt = self.dtype if dtype is None else _dtype_arg(dtype, "BSRMatrix.to")
        dev = self.device if device is None else validate.device(device, f"{type(self).__name__}.to")
        return BSRMatrix._make(self.blocks.to(dev, dt), self.block_col_indices.to(dev),
                               self.block_row_ptrs.to(dev), self._shape, self.block_size)


# --------------------------------------------------------------- helpers

def _index_arrays(A: SparseMatrix) -> tuple[torch.Tensor, torch.Tensor]:
    """A matrix's two index arrays (the sources of the caches derived from its pattern)."""
    if isinstance(A, CSRMatrix):
        return A.col_indices, A.row_ptrs
    if isinstance(A, CSCMatrix):
        return A.row_indices, A.col_ptrs
    if isinstance(A, BSRMatrix):
        return A.block_col_indices, A.block_row_ptrs
    return A.row_indices, A.col_indices


def _block_size(block_size: Any, m: int, n: int, where: str) -> int:
    """A tile size up to ``max(m, n, 128)``: a larger tile would only pad (and could not be allocated)."""
    return validate.integer(block_size, "block_size", where, minimum=1, maximum=max(m, n, 128))


def _threshold(threshold: Any, where: str) -> float:
    t = validate.scalar(threshold, "threshold", where, complex_ok=False)
    if not math.isfinite(t) or t < 0:
        raise ValueError(f"{where}: threshold must be finite and >= 0, got {threshold!r}")
    return float(t)


def as_sparse(A: Any, name: str, where: str) -> SparseMatrix:
    """``A`` if it is a trnsparse matrix; SciPy sparse input converted; else TypeError."""
    if isinstance(A, SparseMatrix):
        return A
    if _is_scipy_sparse(A):
        return from_scipy(A)
    raise TypeError(f"{where}: {name} must be a trnsparse matrix (CSRMatrix, COOMatrix, CSCMatrix, BSRMatrix) "
                    f"or a scipy.sparse matrix, got {type(A).__name__}")


def _is_scipy_sparse(A: Any) -> bool:
    mod = type(A).__module__
    if not mod.startswith("scipy.sparse"):
        return False
    import scipy.sparse as sp

    return sp.issparse(A)


def _is_scipy_sparse_traced(A: Any) -> bool:
    sp = sys.modules.get("scipy.sparse")
    return sp is not None and sp.issparse(A)


traceable_as(_is_scipy_sparse, _is_scipy_sparse_traced)  # torch.compile: no str method on a type's module


def from_dense(A, threshold: float = 0.0) -> CSRMatrix:
    """Dense matrix -> CSR, keeping the entries with ``|a| > threshold``.

    Parameters
    ----------
    A : (m, n) tensor or ndarray, float32/float64/complex64/complex128
    threshold : float, default 0.0
        Entries with ``|a| <= threshold`` are dropped (with 0.0: exact zeros).
        NaN entries are always kept.

    Returns
    -------
    CSRMatrix

    Examples
    --------
    >>> import torch, trnsparse
    >>> trnsparse.from_dense(torch.tensor([[0., 1e-9], [2., 0.]]), threshold=1e-6).nnz
    1
    """
    where = "from_dense"
    A = _values(A, "A", where, ndim=2)
    thr = _threshold(threshold, where)
    vals, cols, ptr = arrays.dense_to_csr(A, thr)
    return CSRMatrix._make(vals, cols, ptr, tuple(A.shape))


def from_scipy(sp_matrix, format: str = "csr") -> SparseMatrix:
    """A SciPy sparse matrix/array -> trnsparse matrix (default CSR), dtype preserved.

    float32, float64, complex64 and complex128 are kept as they are;
    integer and bool data become float64 (exact below 2**53); other dtypes
    raise ``TypeError``. ``format`` is ``"csr"``, ``"csc"``, ``"coo"`` or
    ``"bsr"`` (BSR keeps SciPy's blocksize if it is square).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp, trnsparse
    >>> A = trnsparse.from_scipy(sp.eye(3, dtype=np.float32, format="csr"))
    >>> A.dtype, A.nnz
    (torch.float32, 3)
    """
    where = "from_scipy"
    if not _is_scipy_sparse(sp_matrix):
        raise TypeError(f"{where}: sp_matrix must be a scipy.sparse matrix or array, got "
                        f"{type(sp_matrix).__name__}")
    fmt = validate.choice(format, "format", {"csr": ("csr",), "csc": ("csc",), "coo": ("coo",), "bsr": ("bsr",)}, where)
    dt = sp_matrix.dtype
    if dt.kind in "biu":
        sp_matrix = sp_matrix.astype(np.float64)
    elif dt not in (np.float32, np.float64, np.complex64, np.complex128):
        raise TypeError(f"{where}: sp_matrix has dtype {dt}; expected float32, float64, complex64 or complex128")
    m, n = sp_matrix.shape
    if fmt == "bsr" and sp_matrix.format == "bsr" and sp_matrix.blocksize[0] == sp_matrix.blocksize[1]:
        B = sp_matrix.copy()
        B.sum_duplicates()
        return BSRMatrix._make(torch.from_numpy(np.ascontiguousarray(B.data)),
                               torch.from_numpy(B.indices.astype(np.int64)),
                               torch.from_numpy(B.indptr.astype(np.int64)), (m, n), B.blocksize[0])
    if fmt == "csc":
        C = sp_matrix.tocsc(copy=True)
        C.sum_duplicates()
        return CSCMatrix._make(torch.from_numpy(np.ascontiguousarray(C.data)),
                               torch.from_numpy(C.indices.astype(np.int64)),
                               torch.from_numpy(C.indptr.astype(np.int64)), (m, n))
    if fmt == "coo" and sp_matrix.format == "coo":
        C = sp_matrix
        return COOMatrix._make(torch.from_numpy(np.array(C.data)), torch.from_numpy(C.row.astype(np.int64)),
                               torch.from_numpy(C.col.astype(np.int64)), (m, n))
    C = sp_matrix.tocsr(copy=True)
    C.sum_duplicates()  # also sorts
    csr = CSRMatrix._make(torch.from_numpy(np.ascontiguousarray(C.data)),
                          torch.from_numpy(C.indices.astype(np.int64)),
                          torch.from_numpy(C.indptr.astype(np.int64)), (m, n))
    if fmt == "coo":
        return csr.to_coo()
    if fmt == "bsr":
        b = sp_matrix.blocksize[0] if sp_matrix.format == "bsr" else 128
        return BSRMatrix.from_csr(csr, block_size=b)
    return csr


def from_torch(t) -> SparseMatrix:
    """A torch sparse tensor (COO, CSR, CSC or BSR layout) -> the matching trnsparse format.

    A dense tensor gives a CSR matrix of its nonzeros (see :func:`from_dense`).

    Examples
    --------
    >>> import torch, trnsparse
    >>> trnsparse.from_torch(torch.eye(3).to_sparse_csr()).format
    'csr'
    """
    where = "from_torch"
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{where}: t must be a torch.Tensor, got {type(t).__name__}")
    validate.dtype(t, "t", VALUE_DTYPES, where)
    if t.dim() != 2:
        raise ValueError(f"{where}: t must be 2-D, got shape {tuple(t.shape)}")
    shape = tuple(t.shape)
    if t.layout == torch.strided:
        return from_dense(t)
    if t.layout == torch.sparse_coo:
        idx = t._indices()
        return COOMatrix(t._values(), idx[0], idx[1], shape)
    if t.layout == torch.sparse_csr:
        return CSRMatrix(t.values(), t.col_indices(), t.crow_indices(), shape)
    if t.layout == torch.sparse_csc:
        return CSCMatrix(t.values(), t.row_indices(), t.ccol_indices(), shape)
    if t.layout == torch.sparse_bsr:
        b = t.values().shape[1]
        if t.values().shape[1] != t.values().shape[2]:
            raise ValueError(f"{where}: only square blocks are supported, got {tuple(t.values().shape[1:])}")
        return BSRMatrix(t.values(), t.col_indices(), t.crow_indices(), shape, block_size=b)
    raise ValueError(f"{where}: unsupported layout {t.layout}")


def eye_sparse(n: int, dtype: torch.dtype = torch.float32, device=None) -> CSRMatrix:
    """The ``n x n`` identity as CSR.

    Examples
    --------
    >>> import trnsparse
    >>> trnsparse.eye_sparse(3).nnz
    3
    """
    where = "eye_sparse"
    n = validate.integer(n, "n", where, minimum=0, maximum=validate.INDEX_MAX)
    dt = _dtype_arg(dtype, where)
    dev = torch.device("cpu") if device is None else validate.device(device, where)
    return CSRMatrix._make(torch.ones(n, dtype=dt, device=dev), torch.arange(n, device=dev),
                           torch.arange(n + 1, device=dev), (n, n))


def random_sparse(m: int, n: int, density: float = 0.01, *, dtype: torch.dtype = torch.float32,
                  device=None, seed=None, format: str = "csr") -> SparseMatrix:
    """A random ``m x n`` matrix with ``round(density * m * n)`` distinct stored entries.

    Positions are uniform without replacement and values uniform in
    [0, 1) (complex: real and imaginary parts), like ``scipy.sparse.random``.

    Parameters
    ----------
    m, n : int
    density : float in [0, 1]
    dtype : torch dtype, default float32
    device : torch device, default CPU
    seed : int or torch.Generator, optional
    format : {"csr", "coo", "csc", "bsr"}

    Examples
    --------
    >>> import trnsparse
    >>> A = trnsparse.random_sparse(100, 50, density=0.1, seed=0)
    >>> A.shape, A.nnz
    ((100, 50), 500)
    """
    where = "random_sparse"
    m = validate.integer(m, "m", where, minimum=0, maximum=validate.INDEX_MAX)
    n = validate.integer(n, "n", where, minimum=0, maximum=validate.INDEX_MAX)
    d = validate.scalar(density, "density", where, complex_ok=False)
    if not 0 <= d <= 1:
        raise ValueError(f"{where}: density must be in [0, 1], got {density!r}")
    dt = _dtype_arg(dtype, where)
    fmt = validate.choice(format, "format", {"csr": ("csr",), "csc": ("csc",), "coo": ("coo",), "bsr": ("bsr",)}, where)
    if isinstance(seed, torch.Generator):
        g = seed
    elif seed is None:
        g = torch.Generator().manual_seed(int(torch.randint(0, 2**62, (1,))))
    else:
        g = torch.Generator().manual_seed(validate.integer(seed, "seed", where, minimum=0, maximum=validate.SEED_MAX))
    total = m * n
    k = int(round(d * total))
    if k > total // 2:
        keys = torch.randperm(total, generator=g)[:k]
    else:
        keys = torch.empty(0, dtype=torch.int64)
        while keys.numel() < k:
            draw = torch.randint(0, total, (int((k - keys.numel()) * 1.1) + 16,), generator=g)
            keys = torch.unique(torch.cat([keys, draw]))
        if keys.numel() > k:
            keys = keys[torch.randperm(keys.numel(), generator=g)[:k]]
    keys, _ = torch.sort(keys)
    real = torch.float32 if dt in (torch.float32, torch.complex64) else torch.float64
    vals = torch.rand(k, generator=g, dtype=real)
    if dt.is_complex:
        vals = torch.complex(vals, torch.rand(k, generator=g, dtype=real))
    dev = torch.device("cpu") if device is None else validate.device(device, where)
    rows, cols = (keys // n).to(dev), (keys % n).to(dev)
    csr = CSRMatrix._make(vals.to(dev, dt), cols, arrays.ptrs_from_sorted(rows, m), (m, n))
    if fmt == "csr":
        return csr
    if fmt == "coo":
        return csr.to_coo()
    if fmt == "csc":
        return csr.to_csc()
    return csr.to_bsr()
