"""``trnsci demo`` on a one-library install: that library's kernel rows come first, the libraries that
are not installed are listed after them (they were listed before, above the rows that did run)."""

import types

import torch

from trnsci import demo


def test_missing_libraries_listed_after_the_rows(monkeypatch):
    import trnblas

    A = torch.randn(40, 30, generator=torch.Generator().manual_seed(0))
    B = torch.randn(30, 20, generator=torch.Generator().manual_seed(1))
    case = demo.KernelCase("trnblas", "gemm", "40x30 @ 30x20", lambda: trnblas.gemm(1.0, A, B), 1e-5, ("gemm_kernel",))
    monkeypatch.setattr(demo, "kernel_case_modules",
                        lambda: {"trnblas": types.SimpleNamespace(kernel_cases=lambda: [case])})
    lines = []
    assert demo.kernel_part(echo=lines.append) is True
    row = next(i for i, s in enumerate(lines) if "40x30 @ 30x20" in s)
    missing = [i for i, s in enumerate(lines) if "no demo kernel cases (not installed" in s]
    assert len(missing) == 5 and min(missing) > row, lines
    assert lines[-1].strip() == "1 of 1 kernel cases agree with torch", lines


def test_columns_line_up_with_a_long_problem(monkeypatch):
    """A problem text longer than the default column (44) widens the column instead of pushing its row's
    later columns out of line with the header."""
    import trnblas

    A = torch.randn(40, 30, generator=torch.Generator().manual_seed(0))
    B = torch.randn(30, 20, generator=torch.Generator().manual_seed(1))
    long_shape = "40x30 @ 30x20 fp32, a problem text of more than forty-four characters"
    cases = [demo.KernelCase("trnblas", "gemm", s, lambda: trnblas.gemm(1.0, A, B), 1e-5, ("gemm_kernel",))
             for s in ("40x30 @ 30x20", long_shape)]
    monkeypatch.setattr(demo, "kernel_case_modules",
                        lambda: {"trnblas": types.SimpleNamespace(kernel_cases=lambda: cases)})
    lines = []
    assert demo.kernel_part(echo=lines.append) is True
    head = next(s for s in lines if "vs torch: rel err" in s)
    rows = [s for s in lines if "gemm_kernel" in s and "@" in s]
    assert len(rows) == 2
    col = head.index("vs torch")
    assert all(r[col:col + 3] == "ok " for r in rows), "\n".join([head, *rows])
