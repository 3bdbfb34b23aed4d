"""A sweep's table and Pareto summary as Markdown (docs/results, PR comments,
`regress recommend`)."""

from __future__ import annotations

from regress.sweep.frontier import OBJECTIVES, Frontier
from regress.sweep.results import SweepResults


def _pm(value: float, se: float, digits: int) -> str:
    return f"{value:.{digits}f} ± {se:.{digits}f}"


def sweep_table(sweep: SweepResults, frontier: Frontier) -> str:
    """One row per configuration: size, accuracy with its interval and paired change against
    the source, perplexity, KLD and same top token (± standard errors), speed, memory and
    its Pareto status."""
    acc_tasks = ", ".join(s.task for s in sweep.results[0].scores[:-1]) if sweep.results else ""
    head = (
        "| config | type | size MiB | BPW | accuracy [95% CI] | Δ vs source [95% CI] | p worse "
        "| PPL | KLD | same top % | pp t/s | tg t/s | ms/token | peak RSS MiB | Pareto |\n"
        "| --- | --- | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: | --- |"
    )
    rows = []
    for r in sweep.results:
        a, d, s = r.overall, r.divergence, r.speed
        status = f"= {r.identical_to}" if r.identical_to else frontier.status(r.name)
        rows.append(
            f"| {r.name} | {r.quantization} | {r.size_bytes / 2**20:.1f} | "
            f"{r.bits_per_weight:.2f} | {a.accuracy:.3f} [{a.low:.3f}, {a.high:.3f}] | "
            f"{a.delta:+.3f} [{a.delta_low:+.3f}, {a.delta_high:+.3f}] | {a.p_worse:.2f} | "
            f"{_pm(d.ppl, d.ppl_se, 2)} | {_pm(d.kld_mean, d.kld_se, 4)} | "
            f"{_pm(100 * d.same_top, 100 * d.same_top_se, 1)} | {s.pp_ts:.0f} | "
            f"{s.tg_ts:.1f} | {s.latency_ms:.1f} | {s.peak_rss_bytes / 2**20:.0f} | {status} |"
        )
    objectives = ", ".join(f"{o.name} ({o.direction.value})" for o in frontier.objectives)
    reference = ", ".join(f"{v:.4g}" for v in frontier.reference)
    units = " × ".join(OBJECTIVES[o.name][1] for o in frontier.objectives)
    front = [frontier.names[i] for i, s in enumerate(frontier.standings) if s.on_front]
    n = sweep.results[0].divergence.n_tokens if sweep.results else 0
    lines = [
        head,
        *rows,
        "",
        f"Accuracy: {acc_tasks} pooled (Wilson 95% interval; Δ paired with the source, Tango's "
        f"interval, one-sided McNemar mid-p). PPL, KLD and same top token over the same {n} "
        "WikiText-2 tokens (llama-perplexity's definitions, ± standard errors). Speed: "
        "llama-bench's pp/tg means; ms/token = 1000 / tg t/s; peak RSS of a fresh process "
        "running the bench.",
        f"Pareto front over {objectives}: {', '.join(front)}; "
        f"hypervolume {frontier.hypervolume:.4g} ({units}) with reference point ({reference}). "
        f"'dominated' needs a significant difference (two-sided {frontier.alpha:g} per pair) in "
        "at least one objective; 'not separable' means dominated only on estimates the tests "
        "cannot separate.",
    ]
    flags = sorted({r.system_info for r in sweep.results})
    lines.append(
        "llama.cpp system info: "
        + "; ".join(f"`{f}`" for f in flags)
        + (" (configurations measured on different CPU builds)" if len(flags) > 1 else "")
    )
    if frontier.warnings:
        lines += ["", *(f"- {w}" for w in frontier.warnings)]
    return "\n".join(lines) + "\n"
