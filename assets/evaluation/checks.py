"""Checks of the evaluation domain: regression against the partition's baseline
(assets/evaluation/baseline.py), the QA and ARC recall floors and the agentic-RAG design's adoption
gate, and the alert sent for every failed check.

The checks are declared on their assets (``check_specs``, blocking where a regression must stop
the run) and their results yielded by the asset that computed the metrics they judge."""

import dagster as dg

from assets.evaluation.baseline import Baseline

# The command line tags its runs with LAUNCHER_TAG (value "cli"), so alerts can say who ran them.
from instance.lifecycle import LAUNCHER_TAG
from narrative_mirror import evaluation as ev
from narrative_mirror import regressions
from resources.dagster_resources import AlertsResource, StateResource

QA_CHECK_SPECS = [
    dg.AssetCheckSpec(
        "qa_recall_regression",
        asset="qa_eval",
        blocking=True,
        description="Recall@10, exact recall and precision of this chat file ([regression] metrics) against "
        "its baseline: the last evaluation whose checks passed, or the one pinned with "
        "`narrative-mirror baseline pin`. A drop over a metric's error_drop fails the run "
        "(ERROR), over its warn_drop warns.",
    ),
    dg.AssetCheckSpec(
        "qa_recall_floor",
        asset="qa_eval",
        blocking=True,
        description="Each guarded QA metric of this chat file is at least its floor, whatever came before.",
    ),
]
ARC_CHECK_SPECS = [
    dg.AssetCheckSpec(
        "arc_recall_regression",
        asset="arc_eval",
        blocking=True,
        description="ARC global recall of this chat file against its baseline (last evaluation whose "
        "checks passed, or the pinned one); thresholds as for QA.",
    ),
    dg.AssetCheckSpec(
        "arc_recall_floor",
        asset="arc_eval",
        blocking=True,
        description="ARC global recall of this chat file is at least [regression] arc_floor.",
    ),
]
PROTOCOL_CHECK_SPECS = [
    dg.AssetCheckSpec(
        "adoption_gate",
        asset="profile_protocol",
        description="The agentic-RAG design's gate: balanced supported-claim "
        "rate and claim citation precision (gold-id proxy) at least "
        "evaluation.toml's [adoption_gate], p95 latency within the "
        "balanced deadline",
    )
]


def _r(value: float | None) -> float | None:
    """A figure as the UI shows it (3 decimals)."""
    return None if value is None else round(float(value), 3)


def regression_check(
    check_name: str, asset: str, metrics: list[str], current: dict, baseline: Baseline | None, cfg: dict
) -> dg.AssetCheckResult:
    """Each of ``metrics`` now (``current``) against ``baseline`` (None: nothing to compare with
    yet, passes), each with its own tolerances (evaluation.toml [regression]). The check's
    ``baseline``/``current``/``drop`` figures are the first metric's; ``drop/<metric>`` each one's."""
    reg = cfg["regression"]
    headline = metrics[0]
    compared = {m: (baseline.metrics.get(m), current.get(m)) for m in metrics} if baseline else {}
    compared = {m: (before, now) for m, (before, now) in compared.items() if before is not None and now is not None}
    if headline not in compared:
        return dg.AssetCheckResult(
            check_name=check_name,
            asset_key=asset,
            passed=True,
            description=f"{headline} = {_r(current.get(headline))}: no baseline of this chat "
            "file yet (this evaluation becomes it if its checks pass)",
            metadata={"current": dg.MetadataValue.float(_r(current.get(headline) or 0.0))},
        )
    lines, warned, errored, metadata = [], False, False, {}
    for metric, (before, now) in compared.items():
        limits = ev.tolerance(reg, metric)
        drop = before - now
        warned |= drop > limits["warn_drop"]
        errored |= drop > limits["error_drop"]
        lines.append(
            f"{metric} {before:.3f} -> {now:.3f} (drop {drop:+.3f}; warn > {limits['warn_drop']}, "
            f"error > {limits['error_drop']})"
        )
        metadata[f"drop/{metric}"] = dg.MetadataValue.float(_r(drop))
    before, now = compared[headline]
    return dg.AssetCheckResult(
        check_name=check_name,
        asset_key=asset,
        passed=not warned,
        severity=dg.AssetCheckSeverity.ERROR if errored else dg.AssetCheckSeverity.WARN,
        description="; ".join(lines) + f"; baseline: {baseline.describe()}",
        metadata={
            "baseline": dg.MetadataValue.float(_r(before)),
            "current": dg.MetadataValue.float(_r(now)),
            "drop": dg.MetadataValue.float(_r(before - now)),
            **metadata,
            "baseline_source": baseline.source,
            "baseline_run": baseline.run_id,
        },
    )


def floor_check(check_name: str, asset: str, metrics: list[str], current: dict, cfg: dict) -> dg.AssetCheckResult:
    """ERROR when any of ``metrics`` is under its floor (config/evaluation.toml; 0 = none)."""
    floors = {m: ev.tolerance(cfg["regression"], m)["floor"] for m in metrics}
    under = [m for m, floor in floors.items() if floor and current.get(m) is not None and current[m] < floor]
    headline = metrics[0]
    return dg.AssetCheckResult(
        check_name=check_name,
        asset_key=asset,
        passed=not under,
        severity=dg.AssetCheckSeverity.ERROR,
        description="; ".join(f"{m} = {_r(current.get(m))} (floor {floor})" for m, floor in floors.items() if floor),
        metadata={
            "current": dg.MetadataValue.float(_r(current.get(headline) or 0.0)),
            "floor": dg.MetadataValue.float(float(floors[headline])),
            "under_floor": dg.MetadataValue.json(under),
        },
    )


def adoption_gate_check(table: list[dict]) -> dg.AssetCheckResult:
    """The agentic-RAG design's gate on the balanced row of the protocol ``table`` (WARN: which thresholds the
    offline path holds is a finding, not a failure)."""
    from narrative_mirror.agent.profiles import get_profile

    balanced = next(row for row in table if row["profile"] == "balanced")
    slo_ms = get_profile("balanced").deadline_s * 1000
    gate = ev.load_eval_config()["adoption_gate"]  # evaluation.toml's, as in effect now
    held = {k: (balanced[k] is not None and balanced[k] >= bound) for k, bound in gate.items()}
    held["p95_latency_ms"] = balanced["p95_latency_ms"] is not None and balanced["p95_latency_ms"] <= slo_ms
    return dg.AssetCheckResult(
        check_name="adoption_gate",
        asset_key="profile_protocol",
        passed=all(held.values()),
        severity=dg.AssetCheckSeverity.WARN,
        description="; ".join(
            [
                f"{k} {balanced[k] if balanced[k] is None else round(balanced[k], 3)} {'>=' if ok else '<'} {gate[k]}"
                for k, ok in held.items()
                if k in gate
            ]
            + [
                f"p95 latency {round(balanced['p95_latency_ms'] or 0)} ms {'<=' if held['p95_latency_ms'] else '>'} {slo_ms:.0f} ms"
            ]
        ),
        metadata={k: dg.MetadataValue.bool(ok) for k, ok in held.items()},
    )


def alert_failed_checks(
    context: dg.AssetExecutionContext, alerts: AlertsResource, results: list[dg.AssetCheckResult]
) -> list[dg.AssetCheckResult]:
    """Report every failed check (ERROR or WARN), whoever launched the run: the CLI, the UI, a schedule or the automation. Returns ``results`` to yield."""
    run = context.run
    partition = context.partition_key if context.has_partition_key else "all partitions"
    launched_by = (
        run.tags.get("dagster/sensor_name")
        or run.tags.get("dagster/schedule_name")
        or run.tags.get(LAUNCHER_TAG)
        or "ui or api"
    )
    for result in results:
        if result.passed:
            continue
        severity = result.severity.value if result.severity else "ERROR"
        check = f"{result.asset_key.to_user_string() if result.asset_key else context.asset_key.to_user_string()}:{result.check_name}"
        sent = alerts.send(
            {
                "run_id": run.run_id,
                "partition": partition,
                "check": check,
                "severity": severity,
                "description": result.description or "",
                "launched_by": launched_by,
            },
            text=f"{severity} {check} on {partition}: {result.description} (run {run.run_id[:8]}, {launched_by})",
        )
        if sent.get("slack", "").startswith("failed"):
            # The alert log has it; the evaluation goes on (a down Slack is not a regression).
            context.log.warning(f"alert for {check} not delivered to Slack ({sent['slack']}); it is in the alert log")
    return results


def record_standing(
    context: dg.AssetExecutionContext, state: StateResource, results: list[dg.AssetCheckResult]
) -> None:
    """This evaluation's failed checks as the partition's standing regression (none: it ends), so
    that every later ``eval``, ``/api/health`` and the inspector show it until it recovers or the
    baseline is pinned (narrative_mirror/regressions.py)."""
    failed = [
        {
            "check": r.check_name,
            "severity": (r.severity or dg.AssetCheckSeverity.ERROR).value,
            "description": r.description or "",
        }
        for r in results
        if not r.passed
    ]
    regressions.record(
        state.root, context.asset_key.to_user_string(), context.partition_key, context.run.run_id, failed
    )
