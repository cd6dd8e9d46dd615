"""The benchmark report: Markdown and figures from the results of :func:`trnsci.bench.main`."""

from __future__ import annotations

import math
import os
from collections import defaultdict
from pathlib import Path

LIB_ORDER = ("trnblas", "trnfft", "trnsparse", "trnsolver", "trnrand", "trntensor", "trnsci.chem")


def _t(s: float) -> str:
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.1f} us"


def _note(r: dict) -> str:
    """Why a row misses, as its benchmark case says (``Case.note``, measured where the case lives)."""
    return r.get("note") or ""


def _lib_key(lib: str) -> int:
    return LIB_ORDER.index(lib) if lib in LIB_ORDER else len(LIB_ORDER)


# ------------------------------------------------------------------ figures

def plots(doc: dict, outdir: Path) -> dict[str, str]:
    """Write the PNG figures; returns ``{figure id: file name}``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker  # noqa: F401 -- matplotlib.ticker.NullFormatter below

    outdir.mkdir(parents=True, exist_ok=True)
    made: dict[str, str] = {}
    # time vs size: per library, one panel per op with two or more sizes, one line per implementation
    by_lib: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in doc["rows"]:
        if "error" not in r and r.get("size"):
            by_lib[r["library"]][r["op"]].append(r)
    for lib in sorted(by_lib, key=_lib_key):
        ops = {op: rs for op, rs in by_lib[lib].items() if len({r["size"] for r in rs}) >= 2}
        if not ops:
            continue
        n = len(ops)
        cols = min(3, n)
        nrows = math.ceil(n / cols)
        fig, axes = plt.subplots(nrows, cols, figsize=(3.6 * cols, 2.8 * nrows), squeeze=False)
        for ax, (op, rs) in zip(axes.flat, sorted(ops.items())):
            rs = sorted(rs, key=lambda r: r["size"])
            lines = {"trnsci": [(r["size"], r["trnsci_s"]) for r in rs]}
            for r in rs:
                for peer, v in r["peers"].items():
                    lines.setdefault(peer, []).append((r["size"], v["median_s"]))
            for name, pts in lines.items():
                xs, ys = zip(*sorted(pts))
                ax.loglog(xs, ys, "o-" if name == "trnsci" else ".--", label=name, lw=1.2, ms=3)
            ax.set_title(op, fontsize=8)
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            ax.set_xlabel("size (elements / n)", fontsize=7)
            ax.set_ylabel("median time (s)", fontsize=7)
            ax.tick_params(labelsize=6)
            ax.legend(fontsize=6)
        for ax in list(axes.flat)[n:]:
            ax.axis("off")
        fig.suptitle(f"{lib}: time vs size (log-log, this machine)", fontsize=9)
        fig.tight_layout()
        name = f"time_{lib.replace('.', '_')}.png"
        fig.savefig(outdir / name, dpi=72)
        plt.close(fig)
        made[f"time:{lib}"] = name
    # every row's ratio, by library (log scale; the 1.1x target line)
    rows = [r for r in doc["rows"] if "error" not in r]
    if rows:
        rows = sorted(rows, key=lambda r: (_lib_key(r["library"]), r["case"]))
        fig, ax = plt.subplots(figsize=(7.5, 0.16 * len(rows) + 1.2))
        libs = sorted({r["library"] for r in rows}, key=_lib_key)
        colors = {lib: plt.cm.tab10(i) for i, lib in enumerate(libs)}
        ys = list(range(len(rows)))[::-1]
        ax.barh(ys, [r["ratio"] for r in rows], color=[colors[r["library"]] for r in rows], height=0.7)
        ax.set_yticks(ys)
        ax.set_yticklabels([f"{r['library']} {r['case']}"[:48] for r in rows], fontsize=5)
        ax.set_xscale("log")
        ax.axvline(1.0, color="k", lw=0.8)
        ax.axvline(1.1, color="r", lw=0.8, ls="--")
        ax.set_xlabel("trnsci time / best peer's (log; dashed: 1.1x target)", fontsize=7)
        ax.tick_params(axis="x", labelsize=6)
        ax.set_title("Every row: ratio to the best peer (this machine, this run)", fontsize=8)
        fig.tight_layout()
        fig.savefig(outdir / "ratios.png", dpi=72)
        plt.close(fig)
        made["ratios"] = "ratios.png"
    # error vs size (FFT and solver families)
    acc: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for a in doc.get("accuracy", []):
        acc[a["library"]][a["op"]].append(a)
    for lib in sorted(acc, key=_lib_key):
        ops = acc[lib]
        cols = min(3, len(ops))
        nrows = math.ceil(len(ops) / cols)
        fig, axes = plt.subplots(nrows, cols, figsize=(3.6 * cols, 2.8 * nrows), squeeze=False)
        for ax, (op, pts) in zip(axes.flat, sorted(ops.items())):
            impls: dict[str, list] = defaultdict(list)
            for p in pts:
                impls[p["impl"]].append((p["size"], max(p["error"], 1e-18)))
            for impl, v in sorted(impls.items()):
                xs, ys = zip(*sorted(v))
                ax.loglog(xs, ys, "o-", label=impl, lw=1.2, ms=3)
            ax.set_title(op, fontsize=8)
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            ax.set_xlabel("n", fontsize=7)
            ax.set_ylabel("relative error vs float64 reference", fontsize=7)
            ax.tick_params(labelsize=6)
            ax.legend(fontsize=6)
        for ax in list(axes.flat)[len(ops):]:
            ax.axis("off")
        fig.suptitle(f"{lib}: error vs size", fontsize=9)
        fig.tight_layout()
        name = f"error_{lib}.png"
        fig.savefig(outdir / name, dpi=72)
        plt.close(fig)
        made[f"error:{lib}"] = name
    # kernel roofline (modeled)
    ks = [k for k in doc.get("kernels", []) if k.get("hbm_bytes") and k.get("flops")]  # Tensor Engine kernels
    if ks:
        import importlib

        TARGETS = importlib.import_module("trnsci.nki.emulator.profile").TARGETS

        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        xs = [k["flops"] / k["hbm_bytes"] for k in ks]
        lo, hi = min(xs) / 3, max(xs) * 3
        for tname, style in (("trn1", "-"), ("trn2", "--")):
            t = TARGETS[tname]
            grid = [lo * (hi / lo) ** (i / 60) for i in range(61)]
            label = f"{tname} roof (fp32 TE {t.te_flops_fp32 / 1e12:.0f} TF/s, DMA {t.dma_bytes_per_s / 1e9:.0f} GB/s)"
            ax.loglog(grid, [min(t.te_flops_fp32, g * t.dma_bytes_per_s) for g in grid], "k" + style, lw=0.8,
                      label=label)
            ys = [k["flops"] / k["modeled_s"][tname] for k in ks]
            ax.loglog(xs, ys, "o" if tname == "trn1" else "x", ms=4, label=f"kernels, {tname} (modeled)")
        for k, x in zip(ks, xs):
            ax.annotate(f"{k['library'][3:]}:{k['case']}", (x, k["flops"] / k["modeled_s"]["trn1"]),
                        fontsize=5, alpha=0.7)
        ax.set_xlabel("arithmetic intensity (matmul flop / HBM byte)", fontsize=8)
        ax.set_ylabel("modeled flop/s", fontsize=8)
        ax.set_title("Demo kernels with matmuls, NKI emulator: roofline (modeled, not measured)", fontsize=9)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, loc="lower right")
        fig.tight_layout()
        fig.savefig(outdir / "kernel_roofline.png", dpi=72)
        plt.close(fig)
        made["roofline"] = "kernel_roofline.png"
    return made


# ------------------------------------------------------------------ markdown

def markdown(doc: dict, figures: dict[str, str], md_dir: Path, plots_dir: Path | None = None) -> str:
    """The report (docs/benchmarks.md) as Markdown; figure links relative to ``md_dir``."""
    m = doc["machine"]
    prefix = ""
    if plots_dir is not None:
        prefix = os.path.relpath(plots_dir, md_dir).replace(os.sep, "/") + "/"
    out = ["# Benchmarks", "",
           "Generated by `" + m.get("command", "trnsci bench") + "` -- do not edit by hand; re-run the command. "
           "Every number is a median of interleaved rounds in one process on the machine below; "
           "times on a shared machine move with its load, ratios measured in the same run much less. "
           "Kernel figures come from the NKI emulator's cost model and are **modeled**, not measured.", "",
           "## Machine", "",
           "| | |", "|---|---|",
           f"| CPU | {m.get('cpu', '?')}, {m.get('logical_cpus', '?')} logical CPUs |",
           f"| torch | {m.get('version_torch')} (threads {m.get('torch_threads')}, "
           f"BLAS {m.get('torch_blas_info', '?')}, MKL {'yes' if m.get('torch_mkl') else 'no'}) |",
           f"| thread settings | {_env(m.get('thread_env'))} |",
           f"| NumPy / SciPy | {m.get('version_numpy')} (BLAS {m.get('numpy_blas', '?')}) / "
           f"{m.get('version_scipy')}{_blas_threads(m)} |",
           f"| opt_einsum / PySCF | {m.get('version_opt_einsum')} / {m.get('version_pyscf')} |",
           f"| load average (1, 5, 15 min) | start {_load(m.get('loadavg'))}, end {_load(m.get('loadavg_end'))} "
           "(other jobs shared the machine) |",
           f"| Python / platform | {m.get('python')} / {m.get('platform')} |",
           f"| run time | {m.get('seconds')} s |", ""]
    for c in doc.get("compare", []):
        cm = c["machine"]
        out += [f"A second run at {cm.get('torch_threads', '?')} torch thread(s) (`{cm.get('command', '?')}`, load "
                f"{_load(cm.get('loadavg'))}) gives the extra ratio column in the tables.", ""]
    rows = [r for r in doc["rows"] if "error" not in r]
    broken = [r for r in doc["rows"] if "error" in r]
    misses = [r for r in rows if not r["meets_target"]]
    threads = doc.get("machine", {}).get("torch_threads", "?")
    out += ["## Summary", "",
            f"{len(rows)} rows; at {threads} thread(s) {len(rows) - len(misses)} meet the target (trnsci within "
            "1.1x of the best peer where the call takes over 100 us, within 1.2x + 1 us below that), "
            f"{len(misses)} do not{_unsteady_count(rows)}."]
    for c in doc.get("compare", []):
        verdicts = c.get("verdicts")
        if verdicts:
            got = [v for v in verdicts.values() if v.get("meets_target") is not None]
            met = sum(1 for v in got if v["meets_target"])
            out.append(f"At {c['machine'].get('torch_threads', '?')} threads {met} of {len(got)} meet it, "
                       f"{len(got) - met} do not{_unsteady_count(got)}.")
    out += ["Rows that miss at either thread count are listed below with the reason.", ""]
    for c in doc.get("compare", []):
        for key, v in (c.get("verdicts") or {}).items():
            lib, case = key.split("|", 1)
            r = next((r for r in rows if r["library"] == lib and r["case"] == case), None)
            if r is not None and r["meets_target"] and v.get("meets_target") is False:
                misses.append({**r, "ratio": v["ratio"], "_at": c["machine"].get("torch_threads", "?")})
    if "ratios" in figures:
        out += [f"![every row's ratio]({prefix}{figures['ratios']})", ""]
    if misses:
        out += ["Where trnsci is slower than a peer, and why (where we know):", "",
                "| case | ratio | best peer | why |", "|---|---:|---|---|"]
        for r in sorted(misses, key=lambda r: -r["ratio"]):
            why = _note(r) or "not yet explained"
            at = f" ({r['_at']} threads)" if "_at" in r else ""
            flag = " (unsteady timing)" if r.get("unsteady") and "_at" not in r else ""
            out.append(f"| {r['library']} {r['case']}{at} | {r['ratio']:.2f}x{flag} | {r['best_peer']} | {why} |")
        out.append("")
    for e in doc.get("errors", {}).values():
        out.append(f"- Not run: {e}")
    for r in broken:
        out.append(f"- Failed: {r['library']} {r['case']}: {r['error']}")
    if doc.get("errors") or broken:
        out.append("")
    by_lib: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_lib[r["library"]].append(r)
    for lib in sorted(by_lib, key=_lib_key):
        out += [f"## {lib}", ""]
        if f"time:{lib}" in figures:
            out += [f"![{lib}: time vs size]({prefix}{figures[f'time:{lib}']})", ""]
        if f"error:{lib}" in figures:
            out += [f"![{lib}: error vs size]({prefix}{figures[f'error:{lib}']})", ""]
        comp = doc.get("compare", [])
        extra_h = "".join(f" ratio at {c['machine'].get('torch_threads', '?')} thr. |" for c in comp)
        out += [f"| case | trnsci | peers (median, spread) | ratio |{extra_h} target |",
                "|---|---:|---|---:|" + "---:|" * len(comp) + "---|"]
        for r in by_lib[lib]:
            peers = "; ".join(f"{n} {_t(v['median_s'])} ({v['spread']:.0%})" for n, v in r["peers"].items())
            ok = "yes" if r["meets_target"] else f"**no** (<= {r['target']:.2f}x)"
            extra = "".join(f" {_verdict(c, r['library'] + '|' + r['case'])} |" for c in comp)
            out.append(f"| {r['case']} | {_t(r['trnsci_s'])} ({r['trnsci_spread']:.0%}) | {peers} | "
                       f"{r['ratio']:.2f}x |{extra} {ok} |")
        out.append("")
    ks = doc.get("kernels", [])
    if ks:
        out += ["## Kernels (NKI emulator, modeled)", "",
                "Each library's demo kernel cases run through backend `\"simulator\"`. HBM bytes are counted "
                "exactly; *min* is the compulsory traffic (every kernel input read once, every output written "
                "once); instructions are per engine; times and Tensor Engine utilisation (ideal TE time at peak "
                "/ modeled time, engines overlapping) come from the emulator's cost model for trn1 and, "
                "re-timed with its clocks and DMA rate, trn2 -- **modeled, not measured**.", ""]
        if "roofline" in figures:
            out += [f"![kernel roofline (modeled)]({prefix}{figures['roofline']})", ""]
        out += ["| kernel case | shape | HBM bytes | x min | tensor / vector / scalar / gpsimd / dma instr | "
                "trn1 modeled | TE util trn1 | trn2 modeled | TE util trn2 |",
                "|---|---|---:|---:|---|---:|---:|---:|---:|"]
        for k in ks:
            if "hbm_bytes" not in k:
                out.append(f"| {k['library']} {k['case']} | {k['shape']} | - | - | no profile | - | - | - | - |")
                continue
            i = k["instructions"]
            over = k["hbm_bytes"] / k["hbm_min_bytes"] if k["hbm_min_bytes"] else float("nan")
            inst = " / ".join(str(i.get(e, 0)) for e in ("tensor", "vector", "scalar", "gpsimd", "dma"))
            out.append(f"| {k['library']} {k['case']} | {k['shape']} | {k['hbm_bytes']:,} | {over:.2f} | {inst} | "
                       f"{k['modeled_s']['trn1'] * 1e6:.2f} us | {k['te_util']['trn1']:.1%} | "
                       f"{k['modeled_s']['trn2'] * 1e6:.2f} us | {k['te_util']['trn2']:.1%} |")
        out.append("")
    return "\n".join(out) + "\n"


def _env(v) -> str:
    return ", ".join(f"`{k}={x}`" for k, x in v.items()) if v else "none set (each library's default)"


def _ratio(v) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _blas_threads(m: dict) -> str:
    """The OpenBLAS pools' thread counts, and that trnsci's own calls hold them at one (trnsci.hostblas)."""
    got = m.get("openblas_threads")
    if not got:
        return ""
    return (f"; OpenBLAS threads {'/'.join(str(n) for n in got)} for the peers, 1 inside trnsci's host routes "
            "when torch runs more than one (`trnsci.hostblas`)")


def _verdict(compare: dict, key: str) -> str:
    """A compared run's ratio for one row, bold when that run missed its target, marked when unsteady."""
    v = (compare.get("verdicts") or {}).get(key)
    if v is None:
        return _ratio(compare.get("ratios", {}).get(key))
    text = _ratio(v.get("ratio"))
    if v.get("unsteady"):
        text += " (unsteady)"
    return f"**{text}**" if v.get("meets_target") is False else text


def _unsteady_count(rows) -> str:
    n = sum(1 for r in rows if r.get("unsteady"))
    return f" ({n} with unsteady timing: spread over 50% after retries, the machine was busy)" if n else ""


def _load(v) -> str:
    return ", ".join(f"{x:.2f}" for x in v) if v else "?"
