"""The device-coverage table: every public function of the six libraries, and what runs it on a NeuronCore.

:func:`coverage_table` walks each library's ``__all__`` and, for every
public function, the code it calls (module-level functions of the library,
followed a few calls deep, including the decorated function under
``numpy_io``-style wrappers): each :class:`trnsci.dispatch.Op` it reaches
is a possible device path, and each of those ops' NKI lowerings names the
kernels it runs (``*_kernel`` globals it reaches). So the table is read
off the code and the registry (:func:`trnsci.dispatch.ops`) and cannot
drift from them; only the *reasons* for the functions without a device
path are written by hand, in :data:`EXCEPTIONS`.

``python -m trnsci.coverage`` prints the Markdown; ``python -m
trnsci.coverage --write`` rewrites ``docs/coverage.md``; a test fails when
the committed file is stale.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import types
import warnings
from pathlib import Path

from trnsci import dispatch

__all__ = ["LIBRARIES", "EXCEPTIONS", "coverage_rows", "coverage_table", "summary", "main"]

LIBRARIES = ("trnblas", "trnfft", "trnsparse", "trnsolver", "trnrand", "trntensor")

_CONFIG = "configuration: no computation"
#: an op with no arithmetic worth a launch: the operands cross to HBM and back for O(1) operations each
_MOVE = ("transfer-bound: {what}; a kernel would move every element to HBM and back for it, more than the "
         "host's one pass over memory it already holds")
_HOST = "host-side planning or bookkeeping: no array computation to move"

#: Why a public function has no device path (per library), or what else the reader should know.
#: A function absent here that reaches no kernel is listed as "no NKI lowering yet".
EXCEPTIONS: dict[str, dict[str, str]] = {
    "trnblas": {
        "rotg": "four scalars in, four out: a host computation (as cuBLAS's host-pointer mode)",
        "plan": _HOST, "plan_gemm": _HOST, "plan_batched_gemm": _HOST, "plan_syrk": _HOST, "plan_trsm": _HOST,
        "her2k": "complex64: the full product through the complex GEMM composition",
        "herk": "complex64: the full product a a^H through the complex GEMM composition",
        "hemv": "real: as symv; complex64 through the GEMM kernel (2-column right-hand side) on split parts, "
                "after torch fills the Hermitian matrix from its triangle (one extra n^2 pass on the host)",
        "gemv": "complex64 through the GEMM kernel (2-column right-hand side) on split parts",
        "trmv": "A read as given, its triangle selected in SBUF (one GEMV run; a unit diagonal adds x); "
                "complex64, and trans='N' above n = 24576, take the triangle formed by torch first",
        "her": "complex64 on the real view of A (depth-2 real update per complex term)",
        "symv": "A read as given, its stored triangle selected in SBUF: two GEMV runs (T x, strict(T)^T x); "
                "above n = 24576 torch fills the symmetric matrix first",
        "her2": "complex64 on the real view of A (depth-2 real update per complex term)",
        "gerc": "complex64 on the real view of A (depth-2 real update per complex term)",
        "dot": "complex64: two real dot kernels on real views", "dotu": "complex64: two real dot kernels on real views",
        "dotc": "complex64: two real dot kernels on real views",
        "iamax": "n >= 2^24 runs on torch (indices carried in fp32)",
        "iamin": "n >= 2^24 runs on torch (indices carried in fp32)",
        "axpy": "complex64: real alpha on the real view, complex alpha on caxpby_kernel",
        "scal": "complex64: real alpha on the real view, complex alpha on caxpby_kernel",
        "rot": "complex64: real s on the real view, complex s on caxpby_kernel",
        "geam": "complex64: real alpha/beta on the real view, complex ones on caxpby_kernel",
        "gemm": ("complex64 as one real GEMM [ar ai] @ [[br, bi], [-bi, br]]; float64 only with "
                 "precision='fp64' (exact integer slices on the float32 kernel, float64 sums on the host)"),
        "df_factors": "host DF setup (PySCF integrals); its contractions run through gemm",
        "dfmp2": "the DF-MP2 driver: SCF and integrals on the host (PySCF); its energy step is mp2_energy",
    },
    "trnfft": {
        "fftfreq": "a small host-built index vector", "rfftfreq": "a small host-built index vector",
        "fftshift": "a roll (pure data movement, torch)", "ifftshift": "a roll (pure data movement, torch)",
        "create_plan": _HOST, "clear_plan_cache": _HOST, "set_precision": _CONFIG, "get_precision": _CONFIG,
        "use_precision": _CONFIG,
        "set_ozaki_product_precision_verified": _CONFIG,
    },
    "trnsparse": {
        "from_dense": "format conversion on the host", "from_scipy": "format conversion on the host",
        "from_torch": "format conversion on the host", "eye_sparse": "constructor", "random_sparse": "constructor",
        "nnz_per_row": "structure statistic on the host", "sparsity_stats": "structure statistic on the host",
        "plan": _HOST,
        "local_window_mask": "mask constructor", "causal_mask": "mask constructor",
        "chebyshev_coeffs": "scalar recurrence on the host",
        "sparse_scale": _MOVE.format(what="one multiply per stored value, the pattern untouched"),
        "sparse_transpose": "a permutation of the stored entries (a stable sort of the column indices and a "
                            "gather): no arithmetic, and the engines have no sort instruction",
        "bsr_diagonal": _MOVE.format(what="a gather of the diagonal tiles' diagonals, no arithmetic"),
        "jacobi": "the diagonal gather and n reciprocals, once per matrix; " + _MOVE.format(
            what="applying it is one multiply per entry"),
        "jacobi_preconditioner_bsr": "bsr_diagonal and n reciprocals, once per matrix; " + _MOVE.format(
            what="applying it is one multiply per entry"),
        "ilu0": "the factorization is a sequential elimination over the stored entries (each row waits for the "
                "rows it reads), once per matrix, on the host; applying it is two csr_spsv_kernel solves",
        "ic0": "the factorization is a sequential elimination over the stored entries (each row waits for the "
               "rows it reads), once per matrix, on the host; applying it is two csr_spsv_kernel solves",
        "schwarz_bounds": _MOVE.format(what="one sqrt(|x|) per element"),
        "screen_quartets": "the decision Q**2 > threshold is taken in float64 so the mask is exact; no engine "
                           "computes in float64 (an fp32 compare flips pairs within rounding of the threshold), "
                           "and it is one compare per element (transfer-bound)",
        "density_screen": "the decisions are taken in float64 so the mask is exact; no engine computes in float64 "
                          "(an fp32 compare flips pairs within rounding of the threshold), and it is a max and a "
                          "compare per element (transfer-bound)",
    },
    "trnsolver": {
        "svd": "min(m, n) <= 128 on one tile of one-sided Jacobi; wider matrices run on torch (the blocked "
               "one-sided Jacobi over 128-column panel pairs is not written)",
        "cg": "dense float32 A (optionally jacobi_preconditioner) or an unpreconditioned trnsparse CSR A; any "
              "other preconditioner with a sparse A runs on torch",
        "bicgstab": "dense float32 A or a trnsparse CSR A, unpreconditioned; a preconditioner M runs on torch",
        "gmres": "dense float32 A, unpreconditioned; a sparse A or an M runs on torch (the SpMV seam is CG's "
                 "and BiCGSTAB's only)",
        "minres": "dense float32 A, unpreconditioned; a sparse A or an M runs on torch (the SpMV seam is CG's "
                  "and BiCGSTAB's only)",
        "plan": _HOST,
        "jacobi_preconditioner": "builds a preconditioner closure", "ssor_preconditioner":
        "builds a preconditioner closure", "block_jacobi_preconditioner": "builds a preconditioner closure",
    },
    "trnrand": {
        "manual_seed": _CONFIG, "get_default_generator": _CONFIG, "plan": _HOST,
        "randperm": "an argsort of 63-bit keys: the engines have no sort instruction and no 64-bit compare, and "
                    "a sorting network of 32-bit limb compares costs O(n log^2 n) instructions against the host's "
                    "O(n log n) sort of data it already holds",
        "multinomial": "with replacement on the threshold kernel (<= 16 rows); without replacement is an argsort "
                       "per row of float64 keys (exponential races): no sort instruction, no float64, on torch",
    },
    "trntensor": {
        "plan_contraction": _HOST, "contract_path": _HOST, "estimate_flops": _HOST, "clear_plan_cache": _HOST,
        "plan_cache_info": _HOST, "set_autotune": _CONFIG, "get_autotune": _CONFIG,
        "to_xla": "device transfer helper", "from_xla": "device transfer helper",
        "einsum": "the op's NKI lowering is the device path: every piece of its plan runs an op with a kernel "
                  "(trntensor.permute/reduce/elementwise: transpose, gather, reduce, elementwise kernels; "
                  "trnblas.gemm/batched_gemm), listed in plan_contraction(...).launches and its plan",
        "multi_einsum": "through einsum (see einsum)", "tensordot": "through einsum (see einsum)",
        "cp_decompose": "its GEMMs (MTTKRP, fit) through trnblas.gemm's kernel under a kernel backend; SVD, "
                        "pinv on torch",
        "cp_reconstruct": "one GEMM through trnblas.gemm's kernel under a kernel backend",
        "tucker_decompose": "its mode products are GEMMs through trnblas.gemm's kernel under a kernel backend; "
                            "SVDs on torch",
        "tucker_reconstruct": "one GEMM per mode through trnblas.gemm's kernel under a kernel backend",
        "tt_decompose": "SVDs on torch (no trnsolver device route used yet)",
        "tt_reconstruct": "GEMMs through trnblas.gemm's kernel under a kernel backend",
    },
}
_COMMON = {"set_backend": _CONFIG, "get_backend": _CONFIG, "use_backend": _CONFIG}

_DEPTH = 6


def _code_objects(code: types.CodeType):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _referenced(fn) -> list:
    """(name, object) for each global the code of ``fn`` loads, and each ``module.attr`` it reads.

    Read from the bytecode (``LOAD_GLOBAL``, then ``LOAD_ATTR`` on a global
    module), so an attribute name that happens to equal a global's name
    (``torch.dot`` in a module that defines ``dot``) is not taken for it.
    """
    import dis

    g = getattr(fn, "__globals__", {})
    found = []
    for code in _code_objects(fn.__code__):
        module = None
        for ins in dis.get_instructions(code):
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and ins.argval in g:
                obj = g[ins.argval]
                found.append((ins.argval, obj))
                module = obj if isinstance(obj, types.ModuleType) else None
                continue
            if module is not None and ins.opname in ("LOAD_ATTR", "LOAD_METHOD"):
                with warnings.catch_warnings():  # e.g. numpy's deprecated aliases
                    warnings.simplefilter("ignore")
                    obj = getattr(module, ins.argval, None)
                if obj is not None:
                    found.append((ins.argval, obj))
            module = None
    return found


def _walk(fn, lib: str, depth: int, seen: set, visit) -> None:
    """Call ``visit(name, obj)`` for every global the code of ``fn`` loads, following the libraries' functions."""
    fn = inspect.unwrap(fn) if callable(fn) else fn
    code = getattr(fn, "__code__", None)
    if code is None or id(fn) in seen:
        return
    seen.add(id(fn))
    for name, obj in _referenced(fn):
        visit(name, obj)
        if depth and callable(obj) and not isinstance(obj, (type, dispatch.Op)):
            mod = getattr(inspect.unwrap(obj), "__module__", "") or ""
            if mod.split(".", 1)[0] in (lib, *LIBRARIES, "trnsci"):  # cross-library compositions too
                _walk(obj, lib, depth - 1, seen, visit)


def _ops_reached(fn, lib: str) -> list[dispatch.Op]:
    found: dict[str, dispatch.Op] = {}

    def visit(name, obj):
        if isinstance(obj, dispatch.Op):
            found[obj.name] = obj

    _walk(fn, lib, _DEPTH, set(), visit)
    return [found[k] for k in sorted(found)]


def _kernels_of(op: dispatch.Op) -> list[str]:
    low = op.lowering_for("nki")
    if low is None:
        return []
    found: set[str] = set()
    lib = op.name.split(".", 1)[0]

    def visit(name, obj):
        if name.endswith("_kernel") and not name.startswith("_") and callable(obj):
            found.add(name)

    _walk(low.fn, lib, 3, set(), visit)
    return sorted(found)


def _dtype_names(dtypes) -> list[str]:
    return [str(d).replace("torch.", "") for d in dtypes or ()]


def coverage_rows(library: str) -> list[dict]:
    """One dict per public function of ``library``: name, ops, kernels, dtypes, device (bool), note."""
    mod = importlib.import_module(library)
    rows = []
    notes = {**_COMMON, **EXCEPTIONS.get(library, {})}
    for name in mod.__all__:
        obj = getattr(mod, name, None)
        if not callable(obj) or inspect.isclass(obj):
            continue
        ops = _ops_reached(obj, library)
        with_kernel = [op for op in ops if op.has_kernel]
        kernels = sorted({k for op in with_kernel for k in _kernels_of(op)})
        dtypes: list[str] = []
        for op in with_kernel:
            for d in _dtype_names(op.lowering_for("nki").dtypes) or ["any"]:
                if d not in dtypes:
                    dtypes.append(d)
        note = notes.get(name, "")
        if note in (_CONFIG, _HOST):  # planning helpers reach ops without running them
            ops, with_kernel, kernels, dtypes = [], [], [], []
        if not with_kernel and not note:
            note = ("registered op without an NKI lowering yet" if ops
                    else "no NKI lowering yet (not a registered op)")
        rows.append({"name": name, "ops": [op.name for op in ops], "device_ops": [op.name for op in with_kernel],
                     "kernels": kernels, "dtypes": dtypes, "device": bool(with_kernel), "note": note})
    return rows


def summary(rows_by_lib: dict[str, list[dict]]) -> tuple[int, int]:
    """(functions with a device path, public functions) over the given libraries."""
    rows = [r for rs in rows_by_lib.values() for r in rs]
    return sum(r["device"] for r in rows), len(rows)


def coverage_table(libraries=LIBRARIES) -> str:
    """The Markdown of ``docs/coverage.md``."""
    by_lib = {lib: coverage_rows(lib) for lib in libraries}
    dev, total = summary(by_lib)
    out = [
        "# Device coverage",
        "",
        "Generated by `python -m trnsci.coverage --write` from the code and the op registry "
        "(`trnsci.dispatch.ops()`); `tests/test_coverage.py` fails when this file is stale. "
        "Do not edit by hand: reasons live in `trnsci.coverage.EXCEPTIONS`.",
        "",
        "A function has a *device path* when the code it calls reaches an op with an NKI lowering "
        "(the kernels listed run it on a NeuronCore, or on the emulator under backend `\"simulator\"`). "
        "Under `\"auto\"` small problems still run on torch (see each op's threshold), and a call the "
        "kernel cannot take (dtype, shape, option) runs on torch with the reason in its plan. "
        "*Kernel dtypes* are what the kernels take; the torch path takes every dtype the function accepts.",
        "",
        f"**{dev} of {total} public functions have a device path.**",
        "",
    ]
    for lib, rows in by_lib.items():
        d, t = summary({lib: rows})
        out += [f"## {lib} ({d} of {t})", "", "| function | device path (op: kernels) | kernel dtypes | notes |",
                "|---|---|---|---|"]
        for r in rows:
            if r["device"]:
                path = "; ".join(
                    f"`{o}`" + (": " + ", ".join(f"`{k}`" for k in _kernels_of(dispatch.ops()[o])) if
                                _kernels_of(dispatch.ops()[o]) else "") for o in r["device_ops"])
            else:
                path = "—"
            out.append(f"| `{r['name']}` | {path} | {', '.join(r['dtypes']) or '—'} | {r['note']} |")
        out.append("")
    return "\n".join(out)


def default_path() -> Path:
    """``docs/coverage.md`` of the source checkout this module belongs to."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "docs").is_dir() and (parent / "mkdocs.yml").exists():
            return parent / "docs" / "coverage.md"
    raise FileNotFoundError("no docs/ directory above trnsci/coverage.py (not a source checkout)")


def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m trnsci.coverage",
                                description="Print the device-coverage table (Markdown), or write docs/coverage.md.")
    p.add_argument("--write", action="store_true", help="write it to docs/coverage.md of this source checkout")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)  # --help, and a typo is an error, not the table
    text = coverage_table()
    if args.write:
        path = default_path()
        path.write_text(text + "\n")
        print(f"wrote {path}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
