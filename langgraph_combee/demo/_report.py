"""The demo's outputs: the closing summary, the JSON record and the plot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langgraph_combee.demo._run import DemoResult, Swap

__all__ = ["draw_plot", "record", "summary", "write_outputs", "write_plot"]

JSON_NAME = "demo.json"
PLOT_NAME = "demo.png"


def record(result: DemoResult) -> dict[str, Any]:
    """The JSON-ready record of a demo run."""
    config = result.config
    windows = result.windows()
    return {
        "config": {
            "model": config.model,
            "task": config.task,
            "tickets": config.tickets,
            "holdout": config.holdout,
            "batch_size": config.batch_size,
            "strategy": config.strategy,
            "window": config.window,
            "seed": config.seed,
            "max_ahead": result.max_ahead,
            "meaning": config.meaning,
        },
        "non_default_settings": result.non_defaults,
        "accuracy": {
            "holdout_before": result.holdout_before,
            "holdout_after": result.holdout_after,
            "holdout_ceiling": result.holdout_ceiling,
            "first_window": windows[0][2] if windows else None,
            "last_window": windows[-1][2] if windows else None,
            "stream": (
                sum(r.correct for r in result.runs) / len(result.runs) if result.runs else None
            ),
        },
        "final_version": result.final_version,
        "bullets": result.bullets,
        "playbook": result.playbook,
        "windows": [{"first": a, "last": b, "accuracy": acc} for a, b, acc in windows],
        "swaps": [
            {
                "version": s.version,
                "after_run": s.after_run,
                "seconds": s.seconds,
                "added": list(s.added),
                "updated": s.updated,
                "removed": s.removed,
                "bullets": s.bullets,
                "updated_rules": list(s.updated_rules),
                "removed_rules": list(s.removed_rules),
            }
            for s in result.swaps
        ],
        "learner": result.learner,
        "learner_finished": result.learner_finished,
        "seconds": result.seconds,
        "runs": [
            {
                "index": r.index,
                "ticket": r.ticket,
                "seconds": r.seconds,
                "version": r.version,
                "correct": r.correct,
                "answer": r.answer,
                "expected": r.expected,
                "rule": r.rule,
                "error": r.error,
            }
            for r in result.runs
        ],
        "holdout": result.holdout,
    }


LABEL_GID = "version-label"
"""The ``gid`` of a version swap's label on the plot."""

_LABEL_STEP = 22.0  # points between two rows of swap labels (two lines of 8 pt text)


def _label_swaps(ax: Any, swaps: list[Swap]) -> float:
    """Label each swap above the plot, a label that would overlap an earlier one a row
    higher; return the height the labels take above the axes, in points."""
    renderer = ax.figure.canvas.get_renderer()
    placed: list[Any] = []
    top = 0.0
    for swap in swaps:
        row = 0
        while True:
            label = ax.annotate(
                f"v{swap.version}\n+{len(swap.added)}",
                (swap.after_run + 0.5, 1.0),
                xycoords=ax.get_xaxis_transform(),
                xytext=(3, 3 + row * _LABEL_STEP),
                textcoords="offset points",
                ha="left",
                va="bottom",
                fontsize=8,
                color="tab:orange",
                annotation_clip=False,
                gid=LABEL_GID,
            )
            box = label.get_window_extent(renderer).expanded(1.1, 1.0)
            if not any(box.overlaps(other) for other in placed):
                break
            label.remove()
            row += 1
        placed.append(box)
        top = max(top, 3 + row * _LABEL_STEP + _LABEL_STEP)
    return top


def draw_plot(result: DemoResult) -> Any:
    """The plot's figure: accuracy over the stream, version swaps marked, held-out
    before/after as lines; the legend sits under the axes, off the lines.

    Raises:
        ImportError: matplotlib is not installed.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import PercentFormatter

    runs = result.runs
    size = result.config.window
    fig, ax = plt.subplots(figsize=(10, 5.5), dpi=110)
    if runs:
        xs = [r.index for r in runs]
        rolling = []
        for i in range(len(runs)):
            chunk = runs[max(0, i + 1 - size) : i + 1]
            rolling.append(sum(r.correct for r in chunk) / len(chunk))
        ax.plot(xs, rolling, color="tab:blue", lw=2, label=f"accuracy, last {size} runs")
        for first, last, accuracy in result.windows():
            ax.hlines(accuracy, first - 0.5, last + 0.5, color="tab:blue", alpha=0.25, lw=6)
    for swap in result.swaps:
        ax.axvline(swap.after_run + 0.5, color="tab:orange", ls=":", lw=1.2)
    ax.axhline(
        result.holdout_before,
        color="grey",
        ls="--",
        lw=1,
        label=f"held-out, v0: {result.holdout_before:.0%}",
    )
    ax.axhline(
        result.holdout_after,
        color="tab:green",
        ls="--",
        lw=1.5,
        label=f"held-out, v{result.final_version}: {result.holdout_after:.0%}",
    )
    if result.holdout_ceiling is not None:
        ax.axhline(
            result.holdout_ceiling,
            color="tab:purple",
            ls="-.",
            lw=1,
            label=f"held-out, hand-written rules: {result.holdout_ceiling:.0%}",
        )
    config = result.config
    ax.set_ylim(-0.02, 1.05)
    right = max([len(runs), 1, *(s.after_run for s in result.swaps)])
    ax.set_xlim(0, right + max(2, right // 12))
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_xlabel("runs served")
    ax.set_ylabel("accuracy")
    # Under the axes, so that it never hides the line, whatever its shape.
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=4, fontsize=8, frameon=False)
    ax.grid(alpha=0.3)
    title = (
        f"{config.task} on {config.model}: learning while serving "
        f"({config.strategy}, batch {config.batch_size})"
    )
    ax.set_title(title, pad=30)
    fig.tight_layout()
    # The labels go in once the layout has fixed the axes' width (their overlap is
    # measured on screen); the title then clears the highest row.
    ax.set_title(title, pad=_label_swaps(ax, result.swaps) + 6)
    fig.tight_layout()
    return fig


def write_plot(result: DemoResult, path: Path) -> None:
    """Write ``draw_plot``'s figure to ``path`` (PNG).

    Raises:
        ImportError: matplotlib is not installed.
    """
    import matplotlib.pyplot as plt

    fig = draw_plot(result)
    fig.savefig(path)
    plt.close(fig)


def write_outputs(result: DemoResult, out: Path) -> dict[str, Path | None]:
    """Write the JSON record and (with matplotlib) the plot into ``out``.

    Returns:
        The paths written; ``"plot"`` is None when matplotlib is missing.
    """
    out.mkdir(parents=True, exist_ok=True)
    plot: Path | None = out / PLOT_NAME
    assert plot is not None
    try:
        write_plot(result, plot)
    except ImportError:
        plot = None
    data = record(result)
    data["files"] = {"json": JSON_NAME, "plot": PLOT_NAME if plot else None}
    path = out / JSON_NAME
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return {"json": path, "plot": plot}


def summary(result: DemoResult) -> str:
    """The closing report: accuracy before and after, the playbook, the learner's cost."""
    windows = result.windows()
    learner = result.learner
    lines = ["", "=== Result ==="]
    lines.append(
        f"Held-out accuracy ({result.config.holdout} tickets): v0 {result.holdout_before:.0%}"
        f" -> v{result.final_version} {result.holdout_after:.0%}"
    )
    if result.holdout_ceiling is not None:
        lines.append(f"Hand-written rules in the prompt (ceiling): {result.holdout_ceiling:.0%}")
    if windows:
        lines.append(
            f"Stream accuracy: first window {windows[0][2]:.0%} -> last window {windows[-1][2]:.0%}"
            f" ({len(result.runs)} runs, {len(result.swaps)} version swaps)"
        )
    if not result.learner_finished:
        lines.append("Note: the learner's last step was still running at the final check.")
    lines += ["", f"Learned playbook (v{result.final_version}, {result.bullets} bullets):"]
    lines.append(result.playbook or "  (empty)")
    calls = ", ".join(f"{k} {v}" for k, v in sorted(learner.get("calls", {}).items())) or "none"
    lines += [
        "",
        f"Learner cost: {learner.get('steps', 0)} steps (batch sizes "
        f"{learner.get('batch_sizes', [])}), {learner.get('total_calls', 0)} LLM calls ({calls}),",
        f"  {learner.get('input_tokens', 0):,} input + {learner.get('output_tokens', 0):,} output "
        f"tokens, {learner.get('seconds', 0.0):.1f} s of learning steps"
        + (f", {learner['failed_steps']} failed steps" if learner.get("failed_steps") else ""),
        f"Wall clock: {result.seconds.get('total', 0.0):.0f} s in all "
        f"(stream {result.seconds.get('stream', 0.0):.0f} s)",
    ]
    return "\n".join(lines)
