"""Plots of one experiment's results (matplotlib, Debian's python3-matplotlib):
recall@k against QPS (one line per engine through its GUC sweep, at the
largest client count) and p50/p99 latency against clients (each engine at
its most accurate setting)."""
import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import ticker  # noqa: E402


def _point_key(run):
    return tuple(sorted(run.get("settings", {}).items()))


def _sweep_text(run, engine):
    names = engine.get("sweep_names", [])
    return ",".join(f"{n.split('.')[-1][:12]}={v}" for n, v in run.get("settings", {}).items() if n in names)


def _best_setting(runs):
    """The sweep point with the highest recall, ties to the higher QPS."""
    best = max(runs, key=lambda r: ((r.get("recall") or {}).get("mean", 0), r.get("qps", 0)))
    return _point_key(best)


def plot(doc, path):
    fig, (ax_recall, ax_latency) = plt.subplots(1, 2, figsize=(12, 4.8))
    k = doc["k"]
    recalls = []
    for e in doc["engines"]:
        runs = [r for r in e.get("runs", []) if not r.get("errors") and r.get("qps")]
        if not runs:
            continue
        top = max(r["clients"] for r in runs)
        curve = sorted((r for r in runs if r["clients"] == top), key=lambda r: r["qps"])
        xs = [(r.get("recall") or {}).get("mean", 0) for r in curve]
        ax_recall.plot(xs, [r["qps"] for r in curve], marker="o", label=f"{e['engine']} ({top} clients)")
        recalls.extend(xs)
        for x, r in zip(xs, curve):  # which sweep point each marker is
            ax_recall.annotate(_sweep_text(r, e), (x, r["qps"]), fontsize=7, xytext=(4, 2),
                               textcoords="offset points")
        best = _best_setting(runs)
        line = sorted((r for r in runs if _point_key(r) == best), key=lambda r: r["clients"])
        clients = [r["clients"] for r in line]
        name = f"{e['engine']} {_sweep_text(line[0], e)}".strip()
        p50 = ax_latency.plot(clients, [r["latency_ms"]["p50"] for r in line], marker="o", label=f"{name} p50")
        ax_latency.plot(clients, [r["latency_ms"]["p99"] for r in line], marker="x", linestyle="--",
                        color=p50[0].get_color(), label=f"{name} p99")
    low = min(recalls, default=0.0)
    ax_recall.set_xlim(max(0.0, min(low - 0.05, 0.9)), 1.02)
    ax_latency.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
    ax_recall.set_xlabel(f"recall@{k}")
    ax_recall.set_ylabel("queries per second")
    ax_recall.set_yscale("log")
    ax_recall.yaxis.set_major_formatter(ticker.ScalarFormatter())  # after set_yscale, which resets it
    ax_recall.yaxis.set_minor_formatter(ticker.ScalarFormatter())
    ax_recall.set_title("recall vs throughput")
    ax_recall.grid(True, which="both", alpha=0.3)
    ax_recall.legend(fontsize=8)
    ax_latency.set_xlabel("concurrent clients")
    ax_latency.set_ylabel("latency, ms")
    ax_latency.set_title("latency vs clients")
    ax_latency.grid(True, alpha=0.3)
    ax_latency.legend(fontsize=8)
    env, ds = doc["environment"], doc["dataset"]
    fig.suptitle(f"{doc['experiment']}: {ds['base_rows']:,} x {ds['dim']} ({ds['metric']}), "
                 f"{env['device']}, {doc['date']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
