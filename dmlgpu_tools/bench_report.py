"""Reports of a benchmark run: results.json, one PNG per operator, and results.md with the targets."""
from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

TARGET_SIZE = 256 << 20
#: The numpy front end against CuPy's asarray -> invert -> asnumpy (issue 12): from this size
#: up, (speed-up needed with `out=`, without); below it, no slower.
FRONT_END_LARGE = 64 << 20
FRONT_END_SPEEDUP = (1.5, 1.2)


def _best_copy(records, bits, size):
    copies = [r["gbps"] for r in records if r["kind"] == "peer" and r["op"] == "copy"
              and r["bits"] == bits and r["size"] == size]
    return max(copies) if copies else None


def _best_peer(records, op, bits, size):
    peers = [(r["gbps"], r["peer"]) for r in records if r["kind"] == "peer" and r["op"] == op
             and r["bits"] == bits and r["size"] == size]
    return max(peers) if peers else None


def targets(records) -> list[dict]:
    """Each target of the performance issue, with the measurement and whether it is met."""
    rows = []
    for r in records:
        if r["kind"] != "kernel" or r["size"] < TARGET_SIZE:
            continue
        copy = _best_copy(records, r["bits"], r["size"])
        if copy is None:
            continue
        need = 0.95 if r["layout"] == "contiguous" else 0.7
        rows.append({"target": f"{r['layout']} kernel >= {need} x copy", "case": _case(r),
                     "value": f"{r['gbps']:.0f} GB/s = {r['gbps'] / copy:.3f} x copy ({copy:.0f} GB/s)",
                     "met": r["gbps"] >= need * copy})
        peer = _best_peer(records, r["op"], r["bits"], r["size"])
        if r["layout"] == "contiguous" and peer:
            rows.append({"target": "contiguous kernel >= peer's operator", "case": _case(r),
                         "value": f"{r['gbps']:.0f} vs {peer[1]} {peer[0]:.0f} GB/s ({r['gbps'] / peer[0]:.3f} x)",
                         "met": r["gbps"] >= peer[0]})
    for r in records:
        if r["kind"] == "runtime" and "met" in r:
            value = ", ".join(f"{k}={_fmt(v)}" for k, v in r.items() if k not in ("kind", "case", "target", "met"))
            rows.append({"target": r["target"], "case": r["case"], "value": value, "met": r["met"]})
        if r["kind"] == "numpy_target":
            rows.append({"target": f">= {r['target']} x numpy (numpy time / ours)",
                         "case": f"{r['case']}, uint32 {r['size'] >> 20} MiB",
                         "value": f"{r['seconds'] * 1e3:.2f} ms vs numpy {r['numpy_seconds'] * 1e3:.2f} ms "
                                  f"({r['ratio']:.3f} x)", "met": r["met"]})
        if r["kind"] == "search":
            rows.append({"target": ">= 1 x numpy's exact search (numpy time / ours)", "case": r["case"],
                         "value": f"{r['seconds'] * 1e3:.2f} ms ({r['g_distances_per_s']:.2f} G distances/s) vs numpy "
                                  f"{r['numpy_seconds'] * 1e3:.2f} ms ({r['ratio']:.2f} x)", "met": r["ratio"] >= 1})
        if r["kind"] == "front_end" and "cupy_seconds" in r:
            rows += _front_end_rows(r)
        if r["kind"] == "front_end" and "torch_seconds" in r:
            rows.append({"target": "numpy front end >= 0.9 x torch from_numpy->cuda->op->cpu",
                         "case": f"bit_not uint32 {_size(r['size'])}",
                         "value": f"{r['seconds'] * 1e3:.1f} ms vs {r['torch_seconds'] * 1e3:.1f} ms "
                                  f"({r['torch_seconds'] / r['seconds']:.2f} x)",
                         "met": r["torch_seconds"] / r["seconds"] >= 0.9})
    return rows


def _front_end_rows(r) -> list[dict]:
    """The front end against CuPy with and without `out=`, each with the transfer floors."""
    rows = []
    large = r["size"] >= FRONT_END_LARGE
    for (ours, theirs, label), speedup in zip((("out_seconds", "cupy_out_seconds", "with out="),
                                               ("seconds", "cupy_seconds", "without out=")), FRONT_END_SPEEDUP):
        need = speedup if large else 1.0
        ratio = r[theirs] / r[ours]
        rows.append({"target": f">= {need} x CuPy {label}" if large else f"{_size(r['size'])} no slower than CuPy ({label})",
                     "case": f"bit_not uint32 {_size(r['size'])}",
                     "value": f"{r[ours] * 1e3:.2f} ms vs {r[theirs] * 1e3:.2f} ms ({ratio:.2f} x); "
                              + _floors(r), "met": ratio >= need})
    return rows


def _floors(r) -> str:
    """Both ways' bytes over PCIe and over the host memcpy, as measured in the same run."""
    moved = 2 * r["size"]
    pcie = (r["size"] / r["pcie_h2d_gbps"] + r["size"] / r["pcie_d2h_gbps"]) / 1e9
    return (f"floors: PCIe {pcie * 1e3:.2f} ms ({r['pcie_h2d_gbps']:.1f} / {r['pcie_d2h_gbps']:.1f} GB/s, "
            f"{r['pcie_source']}), memcpy {moved / r['memcpy_threads_gbps'] / 1e6:.2f} ms "
            f"({r['memcpy_threads_gbps']:.1f} GB/s on {r['memcpy_threads']} threads; "
            f"1 thread {moved / r['memcpy_gbps'] / 1e6:.2f} ms, {r['memcpy_gbps']:.1f} GB/s)")


def _case(r) -> str:
    io = r["in_type"] if r["in_type"] == r["out_type"] else f"{r['in_type']}->{r['out_type']}"
    return f"{r['op']} {io} {r['size'] >> 20} MiB{' in place' if r['in_place'] else ''}"


def _size(n) -> str:
    return f"{n >> 30} GiB" if n >= 1 << 30 else f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


_CLOCK_FIELDS = (("sm_clock", "SM", "MHz"), ("mem_clock", "memory", "MHz"), ("temperature", "", "°C"),
                 ("power", "", "W"))


def clocks_text(sample) -> str:
    """One `bench.gpu_clocks` sample (or a warm-up's {"before", "after"} pair of them) as text:
    "SM 1980 MHz, memory 2619 MHz, 45 °C, 120.50 W"; "not read" where nvidia-smi gave nothing."""
    if not sample:
        return "not read"
    if "before" in sample or "after" in sample:
        return f"before {clocks_text(sample.get('before'))}, after {clocks_text(sample.get('after'))}"
    parts = []
    for key, label, unit in _CLOCK_FIELDS:
        value = str(sample.get(key, "")).strip()
        if value:
            value = value if value.endswith(unit) or not value[:1].isdigit() else f"{value} {unit}"
            parts.append(f"{label} {value}" if label else value)
    return ", ".join(parts) or "not read"


def markdown(env, records) -> str:
    lines = [f"# dmlgpu benchmark: {env['device']}", "",
             f"{env['device_type']}, {env['driver']}; numpy {env['numpy']}"
             + (f"; torch {env['torch']} on {env['cuda_device']}" if "torch" in env else "")
             + (f"; cupy {env['cupy']}" if "cupy" in env else "") + f"; {env['time']}.", "",
             f"GPU clocks: warm-up {clocks_text(env['clocks_warm_up'])}; "
             f"after kernels {clocks_text(env.get('clocks_after_kernels'))}; end {clocks_text(env.get('clocks_end'))}"
             f" (parts run: {', '.join(env.get('parts', ()))}).", ""]
    if env.get("plots", []) is None:
        lines += [f"Plots: {NO_PLOTS}.", ""]
    lines += ["## Targets", "", "| target | case | measured | met |", "|---|---|---|---|"]
    for row in targets(records):
        lines.append(f"| {row['target']} | {row['case']} | {row['value']} | {'yes' if row['met'] else '**no**'} |")
    lines += ["", "## Kernel bandwidth (GB/s, bytes read + written, GPU timestamps)", ""]
    sizes = sorted({r["size"] for r in records if r["kind"] == "kernel"})
    lines.append("| case | layout | " + " | ".join(_size(s) for s in sizes) + " |")
    lines.append("|---|---|" + "---|" * len(sizes))
    table = defaultdict(dict)
    for r in records:
        if r["kind"] == "kernel":
            io = r["in_type"] if r["in_type"] == r["out_type"] else f"{r['in_type']}->{r['out_type']}"
            table[(f"{r['op']} {io}{' in place' if r['in_place'] else ''}", r["layout"])][r["size"]] = r["gbps"]
    for (case, layout), by_size in table.items():
        lines.append(f"| {case} | {layout} | " + " | ".join(
            f"{by_size[s]:.0f}" if s in by_size else "" for s in sizes) + " |")
    peers = [r for r in records if r["kind"] == "peer"]
    if peers:
        lines += ["", "## Peers (GB/s, CUDA events)", "", "| peer | op | bits | " +
                  " | ".join(_size(s) for s in sizes) + " |", "|---|---|---|" + "---|" * len(sizes)]
        ptable = defaultdict(dict)
        for r in peers:
            ptable[(r["peer"], r["op"], r["bits"])][r["size"]] = r["gbps"]
        for (peer, op, bits), by_size in sorted(ptable.items()):
            lines.append(f"| {peer} | {op} | {bits} | " + " | ".join(
                f"{by_size[s]:.0f}" if s in by_size else "" for s in sizes) + " |")
    lines += ["", "## End to end and the runtime", ""]
    for r in records:
        if r["kind"] in ("front_end", "numpy_target", "runtime", "search"):
            lines.append("- " + ", ".join(f"{k}={_fmt(v)}" for k, v in r.items()))
    return "\n".join(lines) + "\n"


def _fmt(v):
    return f"{v:.3g}" if isinstance(v, float) else str(v)


#: What results.md and the console say when the PNG plots cannot be drawn.
NO_PLOTS = "no PNG plots: matplotlib is not installed (pip install matplotlib tqdm, or dmlgpu's wheel with its extra: pip install 'dmlgpu-<version>-<tags>.whl[bench]')"


def plots(out: Path, records) -> list[str] | None:
    """One PNG per operator: bandwidth against size, our layouts and widths with the peers;
    None (and a line on stderr) where matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"dmlgpu bench: {NO_PLOTS}", file=sys.stderr)
        return None
    written = []
    for op in sorted({r["op"] for r in records if r["kind"] == "kernel"}):
        fig, axes = plt.subplots(1, 4, figsize=(20, 4.5), sharey=True)
        for ax, bits in zip(axes, (8, 16, 32, 64)):
            series = defaultdict(list)
            for r in records:
                if r["kind"] == "kernel" and r["op"] == op and r["bits"] == bits:
                    series[f"dmlgpu {r['layout']}{' in place' if r['in_place'] else ''}"].append((r["size"], r["gbps"]))
                elif r["kind"] == "peer" and r["bits"] == bits and r["op"] in (op, "copy"):
                    series[f"{r['peer']} {r['op']}"].append((r["size"], r["gbps"]))
            for label, points in sorted(series.items()):
                points.sort()
                style = "--" if label.endswith("copy") else "-"
                ax.plot([p[0] for p in points], [p[1] for p in points], style, marker="o", label=label)
            ax.set_xscale("log", base=2)
            ax.set_title(f"{op}, {bits}-bit elements")
            ax.set_xlabel("input bytes")
            ax.grid(True, alpha=0.3)
        axes[0].set_ylabel("GB/s (read + written)")
        axes[-1].legend(fontsize=7, loc="lower right")
        fig.tight_layout()
        path = out / f"bandwidth-{op}.png"
        fig.savefig(path, dpi=80)
        plt.close(fig)
        written.append(path.name)
    return written


def write_report(out: Path, env: dict, records: list[dict]) -> None:
    env = dict(env, plots=plots(out, records))
    (out / "results.json").write_text(json.dumps({"environment": env, "records": records}, indent=1))
    text = markdown(env, records)
    (out / "results.md").write_text(text)
    print(text[:text.index("## Kernel bandwidth")] if "## Kernel bandwidth" in text else text)
