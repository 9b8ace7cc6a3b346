#!/usr/bin/env python3
"""Plots of a `graft bench` run: reads OUTDIR/results.json, writes OUTDIR/pareto.png and
OUTDIR/categories.png (one pair per temperature after the first: pareto_t0.7.png, ...).

  pareto.png      several budgets: speedup over ar against the verification budget N, one
                  line per method (llama.cpp's peers as flat lines); one budget: speedup
                  against tau (tokens per target pass), one point per method and peer
                  (ar = the 1.0 line)
  categories.png  per-category speedup bars, one bar per method at its best budget
  fixed_budget.png  with `graft bench --fixed-budget` (results.json "fixed_budget"): the
                  paper's Pareto figure, tau against verified nodes per pass and against
                  draft passes per step, one line per method (tree, pruned, graft, chain,
                  suffix) through its budgets, ar as the (1, 1) point

Usage: plot_bench.py OUTDIR   (needs matplotlib; `graft bench` calls it at the end)
"""
import json
import os
import sys


def load(outdir):
    path = os.path.join(outdir, "results.json")
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        sys.exit(f"plot_bench: {path} not found (run `graft bench -o {outdir}` first)")
    except json.JSONDecodeError as e:
        sys.exit(f"plot_bench: {path} is not valid JSON: {e}")


def speedup(entry):
    v = entry.get("speedup")
    return float(v) if v is not None else None


def plot_pareto(plt, res, table, temp, path):
    methods, peers = {}, {}
    for c in res["configs"]:
        if c["method"] == "ar" or format_temp(c["temperature"]) != temp:
            continue
        e = table.get(c["name"], {})
        s = speedup(e)
        if s is None:
            continue
        if c.get("peer"):
            peers[c["name"]] = (s, e.get("tau", 0.0))
        else:
            methods.setdefault(c["method"], []).append((c["budget"], s, e.get("tau", 0.0)))
    budgets = sorted({c["budget"] for c in res["configs"] if c["method"] != "ar" and not c.get("peer")})
    if len(budgets) <= 1:
        plot_tau(plt, res, methods, peers, temp, path)
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.axhline(1.0, color="gray", linestyle="--", linewidth=1, label="ar")
    for name, (s, _) in peers.items():
        ax.axhline(s, linestyle="-.", linewidth=1, label=f"{name} (llama.cpp)")
    for m, pts in methods.items():
        pts.sort()
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        style = dict(marker="o", linewidth=2 if m == "graft" else 1.2)
        if m == "oracle":
            style.update(linestyle=":", color="black")
        ax.plot(xs, ys, label=m, **style)
    if budgets and len(budgets) > 1:
        ax.set_xscale("log", base=2)
        ax.set_xticks(budgets)
        ax.set_xticklabels([str(b) for b in budgets])
    ax.set_xlabel("verification budget N (tree nodes per target pass)")
    ax.set_ylabel("speedup over ar (decode tokens/s)")
    ax.set_title(f"graft bench: speedup vs budget (T={temp}, {status_text(res)})")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    save(plt, fig, path)


def plot_tau(plt, res, methods, peers, temp, path):
    """One budget: each method and peer is a point (tau, speedup), so the plot shows what
    longer acceptance buys once its cost is paid."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.axhline(1.0, color="gray", linestyle="--", linewidth=1, label="ar")
    for m, pts in methods.items():
        _, s, tau = pts[0]
        style = dict(marker="*" if m == "graft" else "o", s=140 if m == "graft" else 50)
        if m == "oracle":
            style.update(color="black")
        ax.scatter([tau], [s], label=m, zorder=3, **style)
        ax.annotate(m, (tau, s), textcoords="offset points", xytext=(5, 4), fontsize=8)
    for i, (name, (s, tau)) in enumerate(peers.items()):
        ax.scatter([tau], [s], marker="s", facecolors="none", edgecolors="tab:red", s=50,
                   label="llama.cpp's tools (named)" if i == 0 else None, zorder=3)
        ax.annotate(name, (tau, s), textcoords="offset points", xytext=(5, -10), fontsize=7, color="tab:red")
    budget = next((pts[0][0] for pts in methods.values()), None)
    ax.set_xlabel("tau (new tokens per target pass)")
    ax.set_ylabel("speedup over ar (decode tokens/s)")
    n = f", N={budget}" if budget else ""
    ax.set_title(f"graft bench: speedup vs tau (T={temp}{n}, {status_text(res)})")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    save(plt, fig, path)


def plot_categories(plt, res, table, temp, path):
    cats = list(res.get("categories", []))
    names = [m for m in dict.fromkeys(c["method"] for c in res["configs"] if format_temp(c["temperature"]) == temp)]
    names = [m for m in names if m in table]
    width = 0.8 / max(1, len(names))
    fig, ax = plt.subplots(figsize=(max(7, 1.4 * (len(cats) + 1)), 4.5))
    groups = cats + ["overall"]
    for i, m in enumerate(names):
        e = table[m]
        ys = []
        for cat in cats:
            ce = e.get("categories", {}).get(cat)
            ys.append(speedup(ce) or 0.0 if ce else 0.0)
        ys.append(speedup(e) or 0.0)
        xs = [g + (i - (len(names) - 1) / 2) * width for g in range(len(groups))]
        label = m if m == "ar" or e.get("peer") else f"{m} (N={e.get('budget')})"
        ax.bar(xs, ys, width=width, label=label)
    ax.axhline(1.0, color="gray", linestyle="--", linewidth=1)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, rotation=20)
    ax.set_ylabel("speedup over ar")
    ax.set_title(f"graft bench: speedup per category (T={temp}, best budget per method)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, ncol=3)
    save(plt, fig, path)


# The methods of the paper's figure, in its order; others in the table are left out.
PARETO_METHODS = ("tree", "pruned", "graft", "chain", "suffix")


def plot_fixed_budget(plt, res, temp, path):
    """Two panels sharing tau (new tokens per target pass) as y: verified nodes per pass,
    and draft passes per step, one line per method through its budgets (labelled N)."""
    rows = [r for r in res["fixed_budget"].get("rows", []) if format_temp(r["temperature"]) == temp]
    lines = {}
    for r in rows:
        if r["method"] in PARETO_METHODS and r.get("n", 0) > 0:
            lines.setdefault(r["method"], []).append(r)
    if not lines:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    panels = (("nodes_per_pass", "verified nodes per target pass"), ("draft_passes_per_step", "draft passes per step"))
    for ax, (key, label) in zip(axes, panels):
        for r in rows:
            if r["method"] == "ar":
                ax.scatter([r[key]], [r["tau"]], marker="s", color="gray", zorder=3, label="ar")
        for m in PARETO_METHODS:
            pts = sorted(lines.get(m, []), key=lambda r: r["budget"])
            if not pts:
                continue
            style = dict(marker="*" if m == "graft" else "o", linewidth=2 if m == "graft" else 1.2,
                         markersize=10 if m == "graft" else 5)
            ax.plot([r[key] for r in pts], [r["tau"] for r in pts], label=m, **style)
            for r in pts:
                ax.annotate(f"N={r['budget']}", (r[key], r["tau"]), textcoords="offset points", xytext=(4, 3),
                            fontsize=6)
        ax.set_xlabel(label)
        ax.grid(True, alpha=0.3)
    axes[0].set_xscale("log", base=2)
    axes[0].set_ylabel("tau (new tokens per target pass)")
    axes[1].legend(fontsize=8)
    fig.suptitle(f"graft bench --fixed-budget: tau against verification and drafting (T={temp}, {status_text(res)})")
    save(plt, fig, path)
    return True


def save(plt, fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def format_temp(t):
    # The same form as C++ "%g" for the temperatures people use (0, 0.7, 1).
    return f"{float(t):g}"


def status_text(res):
    st = res.get("status", {})
    return f"{st.get('prompts_done', '?')}/{st.get('prompts_total', '?')} prompts"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    outdir = sys.argv[1]
    res = load(outdir)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_bench: matplotlib is missing (.venv/bin/pip install matplotlib)")
    by_temp = res.get("summary_by_temp", {})
    if not by_temp or not res.get("rows"):
        sys.exit("plot_bench: no finished prompts in results.json yet")
    written = []
    temps = list(dict.fromkeys(format_temp(c["temperature"]) for c in res["configs"]))
    for i, temp in enumerate(t for t in temps if t in by_temp):
        table = by_temp[temp]
        suffix = "" if i == 0 else f"_t{temp}"
        for name, fn in (("pareto", plot_pareto), ("categories", plot_categories)):
            path = os.path.join(outdir, f"{name}{suffix}.png")
            fn(plt, res, table, temp, path)
            written.append(path)
        if isinstance(res.get("fixed_budget"), dict):
            path = os.path.join(outdir, f"fixed_budget{suffix}.png")
            if plot_fixed_budget(plt, res, temp, path):
                written.append(path)
    print("plots: " + ", ".join(written))


if __name__ == "__main__":
    main()
