"""Plots of a search with matplotlib (pip install autotune[plot]), imported when first used."""

from . import Replay, replay


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ImportError(
            "autotune.plot needs matplotlib: pip install 'autotune[plot]' (or matplotlib)"
        ) from e
    return plt


def search(path_or_replay, strategy=None, budget=None, seed=None, select=None, ax=None,
           label=None):
    """Best objective value against evaluations of a search: a Replay (autotune.replay), or a
    recorded space (Kernel Tuner cache JSON or autotune database) replayed here with strategy,
    budget, seed and select as autotune.replay takes them. Draws a step line on ax (None: a
    new figure) with the recording's optimum dashed, and returns the matplotlib Figure."""
    if isinstance(path_or_replay, Replay):
        r = path_or_replay
    else:
        r = replay(path_or_replay, strategy=strategy, budget=budget, seed=seed, select=select)
    if not r.trajectory:
        raise ValueError(f"{r.path}: no configuration that succeeded was evaluated")
    plt = _pyplot()
    if ax is None:
        fig, ax = plt.subplots()
    else:
        fig = ax.figure
    evals = [e for e, _ in r.trajectory] + [r.evaluated]
    best = [b for _, b in r.trajectory] + [r.trajectory[-1][1]]
    ax.step(evals, best, where="post", label=label or r.strategy)
    ax.axhline(r.optimum, color="gray", linestyle="--", linewidth=1, label="optimum")
    ax.set_xlabel("evaluations")
    ax.set_ylabel(f"best {r.objective}")
    ax.set_title(f"{r.kernel} on {r.device}"[:80], fontsize="small")
    ax.legend()
    return fig
