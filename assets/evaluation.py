"""Evaluation as assets: per-chat QA and ARC evaluation with regression checks beside them,
and a train/test summary that also appends to the experiment log."""


import dagster as dg
import polars as pl

from assets import LLM_POOL, versioned_asset
from assets.freshness import PARTITION_AUTOMATION, NeedsRun, automated
from assets.ingest import _versioned, split
from assets.layers import lancedb_index
from assets.partitions import chat_files
from assets.sources import AGENT_PROMPTS, evaluation_config, retrieval_config
from narrative_mirror import evaluation as ev
from narrative_mirror import experiments, settings
from narrative_mirror import split as split_lib
from resources.dagster_resources import AlertsResource, EmbedderResource, EvaluationResource, LanceDBResource, LLMResource, StateResource

# Runs allowed to evaluate test partitions carry this tag (the test backfill job sets it).
TEST_TAG = "narrative_mirror/eval_split"
# The command line tags its runs with this (value: "cli"), so alerts can say who ran them.
LAUNCHER_TAG = "narrative_mirror/launched_by"
QA_CHECKS = ["qa_recall_regression", "qa_recall_floor"]


class InTrainSplit(dg.AutomationCondition):
    """True for partitions whose chat file is in the train split: automation may re-evaluate
    train files when config or index changes, never test files (those need the tagged backfill)."""

    @property
    def name(self) -> str:
        return "in_train_split"

    def evaluate(self, context):
        candidates = context.candidate_subset
        train = {k for k in candidates.expensively_compute_partition_keys() if split_lib.assign(k).split == split_lib.TRAIN}
        return dg.AutomationResult(context, candidates.compute_intersection_with_partition_keys(train))


# Evaluations are kept current, not started: the automation re-runs a TRAIN evaluation that exists
# and became unsynced (the split filter first, so the rest is computed for train files alone); a
# first evaluation is for the nightly schedule or a command to ask for (minutes of work).
_EXISTS = ~dg.AutomationCondition.missing()
EVAL_AUTOMATION = InTrainSplit() & _EXISTS & PARTITION_AUTOMATION
# The summary aggregates every chat file, some never evaluated (test files outside an explicit test
# run), so it does not wait for all of its inputs, only for the train evaluations being refreshed.
SUMMARY_AUTOMATION = _EXISTS & automated(NeedsRun()) & ~dg.AutomationCondition.any_deps_match(
    InTrainSplit() & _EXISTS & NeedsRun())


def guard_test_partition(context: dg.AssetExecutionContext, split_row: pl.DataFrame) -> str:
    """Refuse a test partition unless the run is an explicit, tagged test evaluation."""
    key = context.partition_key
    which = split_row["split"][0]
    if which == split_lib.TEST and context.run.tags.get(TEST_TAG) != "test":
        raise dg.Failure(
            description=(
                f"{key} is a TEST chat file: evaluating it outside an explicit test evaluation would leak "
                f"the held-out set into tuning. Use the test backfill (job test_eval_job, or "
                f"`narrative-mirror eval --split test --allow-test`), which tags the run {TEST_TAG}=test."
            ),
            allow_retries=False,
        )
    return which


def _query_setup(embedder: EmbedderResource, lancedb: LanceDBResource, llm: LLMResource,
                 evaluation: EvaluationResource):
    from narrative_mirror.retrieval.engine import Retriever

    model = embedder.get()
    client = llm.get()
    store = lancedb.get()
    cfg = evaluation.config()
    fingerprint = _fingerprint(model, client, cfg)
    return Retriever(store, model, settings.load_config("retrieval")), client, cfg, fingerprint, store.versions()


def _fingerprint(model, client, cfg: dict) -> dict:
    """The config fingerprint evaluations are recorded and compared under."""
    return ev.config_fingerprint(model.fingerprint, getattr(client, "fingerprint", None),
                                 cfg["run"]["profile"], cfg["run"]["mode"])


def _previous_metadata(context: dg.AssetExecutionContext, asset: str) -> dict | None:
    """Metadata of the previous materialization of THIS partition (not the latest of any)."""
    records = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[context.partition_key]), limit=1
    ).records
    if not records:
        return None
    return {k: v.value for k, v in records[0].asset_materialization.metadata.items()}


def regression_check(check_name: str, asset: str, metric: str, current: float | None,
                     previous: dict | None, cfg: dict) -> dg.AssetCheckResult:
    reg = cfg["regression"]
    before = (previous or {}).get(metric)
    if current is None or before is None:
        return dg.AssetCheckResult(check_name=check_name, asset_key=asset, passed=True,
                                   description="no previous value of this partition to compare with",
                                   metadata={"current": dg.MetadataValue.float(current or 0.0)})
    drop = before - current
    severity = dg.AssetCheckSeverity.ERROR if drop > reg["error_drop"] else dg.AssetCheckSeverity.WARN
    passed = drop <= reg["warn_drop"]
    return dg.AssetCheckResult(
        check_name=check_name, asset_key=asset, passed=passed, severity=severity,
        description=f"{metric} {before:.3f} -> {current:.3f} (drop {drop:+.3f}; warn > {reg['warn_drop']}, error > {reg['error_drop']})",
        metadata={"previous": dg.MetadataValue.float(before), "current": dg.MetadataValue.float(current),
                  "drop": dg.MetadataValue.float(drop)},
    )


def alert_failed_checks(context: dg.AssetExecutionContext, alerts: AlertsResource,
                        results: list[dg.AssetCheckResult]) -> list[dg.AssetCheckResult]:
    """Report every failed check (ERROR or WARN), whoever launched the run: the CLI, the UI, a
    schedule or the automation. Returns ``results`` to yield."""
    run = context.run
    partition = context.partition_key if context.has_partition_key else "all partitions"
    launched_by = (run.tags.get("dagster/sensor_name") or run.tags.get("dagster/schedule_name")
                   or run.tags.get(LAUNCHER_TAG) or "ui or api")
    for result in results:
        if result.passed:
            continue
        severity = result.severity.value if result.severity else "ERROR"
        check = f"{result.asset_key.to_user_string() if result.asset_key else context.asset_key.to_user_string()}:{result.check_name}"
        alerts.send({"run_id": run.run_id, "partition": partition, "check": check,
                     "severity": severity, "description": result.description or "", "launched_by": launched_by},
                    text=f"{severity} {check} on {partition}: {result.description} (run {run.run_id[:8]}, {launched_by})")
    return results


def _float_metadata(stats: dict, prefix: str = "") -> dict:
    """Numeric metrics as float metadata (Dagster plots them across materializations), 3 decimals."""
    return {f"{prefix}{k}": dg.MetadataValue.float(round(float(v), 3)) for k, v in stats.items()
            if isinstance(v, float) or (isinstance(v, int) and not isinstance(v, bool) and k not in ("count", "excluded"))}


@versioned_asset(
    partitions_def=chat_files, group_name="evaluation", kinds={"polars"}, pool=LLM_POOL,
    deps=[lancedb_index, retrieval_config, *AGENT_PROMPTS, evaluation_config], automation_condition=EVAL_AUTOMATION,
    check_specs=[dg.AssetCheckSpec(name, asset="qa_eval", blocking=True) for name in QA_CHECKS],
)
def qa_eval(context: dg.AssetExecutionContext, gold_qa: pl.DataFrame, messages: pl.DataFrame, split: pl.DataFrame,
            embedder: EmbedderResource, lancedb: LanceDBResource, llm: LLMResource,
            evaluation: EvaluationResource, alerts: AlertsResource, state: StateResource):
    """Runs the query pipeline on every gold question of the chat file and scores it."""
    from narrative_mirror import query

    which = guard_test_partition(context, split)
    key = context.partition_key
    retriever, client, cfg, fingerprint, versions = _query_setup(embedder, lancedb, llm, evaluation)
    profile, mode = cfg["run"]["profile"], cfg["run"]["mode"]

    def progress(done: int, total: int) -> None:
        if done % 10 == 0 or done == total:
            context.log.info(f"{key}: {done}/{total} questions")

    rows = ev.evaluate_qa(lambda q: query.ask(retriever, key, q, profile=profile, llm=client, mode=mode),
                          gold_qa, messages, fingerprint["fingerprint"], progress)
    summary = ev.qa_summary(rows)
    previous = _previous_metadata(context, "qa_eval")
    overall = summary["overall"]
    yield _versioned(rows, {
        **_float_metadata(overall),
        "questions": dg.MetadataValue.int(overall["count"]),
        "split": which,
        "per_category": dg.MetadataValue.md(ev.markdown_table(ev.category_table(summary))),
        "lost_at_stage": dg.MetadataValue.json(summary["lost"]),
        "fingerprint": fingerprint["fingerprint"],
        "config": dg.MetadataValue.json(fingerprint),
        "lancedb_versions": dg.MetadataValue.json(versions),
    })
    metric = cfg["regression"]["metric"]
    current = overall.get(metric)
    yield from alert_failed_checks(context, alerts, [
        regression_check("qa_recall_regression", "qa_eval", metric, current, previous, cfg),
        dg.AssetCheckResult(
            check_name="qa_recall_floor", passed=current is None or current >= cfg["regression"]["floor"],
            severity=dg.AssetCheckSeverity.ERROR,
            description=f"{metric} = {current} (floor {cfg['regression']['floor']})",
        ),
    ])
    if which == split_lib.TEST:
        experiments.append("test_eval", fingerprint, {"test": _plain(overall)}, path=state.experiments_log,
                           partition=key, asset="qa_eval")


@versioned_asset(
    partitions_def=chat_files, group_name="evaluation", kinds={"polars"}, pool=LLM_POOL,
    deps=[lancedb_index, retrieval_config, *AGENT_PROMPTS, evaluation_config], automation_condition=EVAL_AUTOMATION,
    check_specs=[dg.AssetCheckSpec("arc_recall_regression", asset="arc_eval", blocking=True)],
)
def arc_eval(context: dg.AssetExecutionContext, arc_cases: pl.DataFrame, split: pl.DataFrame,
             embedder: EmbedderResource, lancedb: LanceDBResource, llm: LLMResource,
             evaluation: EvaluationResource, alerts: AlertsResource, state: StateResource):
    """Runs narrative (arc) mode on every ARC case of the chat file: global recall, phase coverage, order."""
    from narrative_mirror import query

    which = guard_test_partition(context, split)
    key = context.partition_key
    retriever, client, cfg, fingerprint, versions = _query_setup(embedder, lancedb, llm, evaluation)
    rows = ev.evaluate_arcs(lambda q: query.arc(retriever, key, q, profile=cfg["run"]["profile"], llm=client),
                            arc_cases, fingerprint["fingerprint"])
    overall = ev.arc_summary(rows)["overall"]
    previous = _previous_metadata(context, "arc_eval")
    yield _versioned(rows, {**_float_metadata(overall), "cases": dg.MetadataValue.int(overall["count"]),
                            "split": which, "fingerprint": fingerprint["fingerprint"],
                            "config": dg.MetadataValue.json(fingerprint),
                            "lancedb_versions": dg.MetadataValue.json(versions)})
    metric = cfg["regression"].get("arc_metric", "arc_global_recall")
    yield from alert_failed_checks(context, alerts, [
        regression_check("arc_recall_regression", "arc_eval", metric, overall.get(metric), previous, cfg)])
    if which == split_lib.TEST:
        experiments.append("test_eval", fingerprint, {"test": _plain(overall)}, path=state.experiments_log,
                           partition=key, asset="arc_eval")


def _plain(stats: dict) -> dict:
    return {k: v for k, v in stats.items() if v is None or isinstance(v, (int, float))}


@versioned_asset(group_name="evaluation", deps=[qa_eval, arc_eval, split], kinds={"polars"},
          automation_condition=SUMMARY_AUTOMATION)
def eval_summary(context: dg.AssetExecutionContext, embedder: EmbedderResource, llm: LLMResource,
                 evaluation: EvaluationResource, state: StateResource):
    """Train and test aggregates over the chat files evaluated under the CURRENT config
    fingerprint (stale partitions are listed, not averaged), appended to the experiment log."""
    cfg = evaluation.config()
    client = llm.get()
    fingerprint = _fingerprint(embedder.get(), client, cfg)
    keys = context.instance.get_dynamic_partitions(chat_files.name)
    current: dict[str, list[pl.DataFrame]] = {"qa_eval": [], "arc_eval": []}
    included: dict[str, list[str]] = {"train": [], "test": []}
    outdated, missing = [], []
    for key in sorted(keys):
        qa, split_row = state.stored_frame("qa_eval", key), state.stored_frame("split", key)
        if qa is None or split_row is None:
            missing.append(key)
            continue
        if qa.height and qa["fingerprint"][0] != fingerprint["fingerprint"]:
            outdated.append(key)
            continue
        which = split_row["split"][0]
        included[which].append(key)
        current["qa_eval"].append(qa.with_columns(pl.lit(which).alias("split")))
        arc = state.stored_frame("arc_eval", key)
        if arc is not None:
            if not arc.height or arc["fingerprint"][0] == fingerprint["fingerprint"]:
                current["arc_eval"].append(arc.with_columns(pl.lit(which).alias("split")))
    rows, metrics, report = [], {}, []
    qa_all = pl.concat(current["qa_eval"]) if current["qa_eval"] else None
    arc_all = pl.concat(current["arc_eval"]) if current["arc_eval"] else None
    for which in ("train", "test"):
        if not included[which] or qa_all is None:
            continue
        qa = qa_all.filter(pl.col("split") == which)
        summary = ev.qa_summary(qa)
        stats = _plain(summary["overall"])
        if arc_all is not None and arc_all.filter(pl.col("split") == which).height:
            stats.update(_plain(ev.arc_summary(arc_all.filter(pl.col("split") == which))["overall"]))
        stats["per_category"] = {str(c): _plain(s) for c, s in summary["groups"].items()}
        metrics[which] = stats
        rows.append({"split": which, "chat_files": len(included[which]), **{k: stats.get(k) for k in SUMMARY_KEYS}})
        report += [f"### {which} ({', '.join(included[which])})", "",
                   ev.markdown_table(ev.category_table(summary)), ""]
    if outdated or missing:
        report.append(f"Not included — evaluated under another config: {outdated or 'none'}; never evaluated: {missing or 'none'}")
    log = state.experiments_log
    record = experiments.append("summary", fingerprint, metrics, path=log, included=included) if metrics else None
    df = pl.DataFrame(rows, schema={"split": pl.String, "chat_files": pl.Int64, **{k: pl.Float64 for k in SUMMARY_KEYS}})
    log_rows = experiments.flat_rows(experiments.read(log))[-20:]
    return _versioned(df, {
        **{k: v for w, s in metrics.items() for k, v in _float_metadata(s, f"{w}/").items()},
        "report": dg.MetadataValue.md("\n".join(report) or "nothing evaluated under the current config yet"),
        "fingerprint": fingerprint["fingerprint"],
        "outdated_partitions": dg.MetadataValue.json(outdated),
        "experiment_id": record["experiment_id"] if record else "",
        "experiment_log": dg.MetadataValue.md(ev.markdown_table(log_rows)),
        "experiment_log_path": dg.MetadataValue.path(str(log)),
    })


SUMMARY_KEYS = [*ev.HEADLINE_KEYS, "arc_global_recall", "arc_phase_coverage"]
PROTOCOL_PROFILES = ("fast", "balanced", "deep")
# Seed 002's adoption gate, for the balanced profile; its latency SLO is the profile's deadline.
ADOPTION_GATE = {"supported_claim_rate": 0.90, "claim_citation_precision": 0.95}
PROTOCOL_KEYS = ["recall@10", "exact_recall", "precision", "answer_f1", "answer_contains", *ev.KPI_KEYS]


@versioned_asset(
    group_name="evaluation", kinds={"polars"}, pool=LLM_POOL,
    deps=[lancedb_index, retrieval_config, *AGENT_PROMPTS, evaluation_config],
    check_specs=[dg.AssetCheckSpec("adoption_gate", asset="profile_protocol",
                                   description="Seed 002: balanced supported-claim rate >= 0.90, claim citation "
                                               "precision >= 0.95, p95 latency within the balanced deadline")],
)
def profile_protocol(context: dg.AssetExecutionContext, embedder: EmbedderResource, lancedb: LanceDBResource,
                     llm: LLMResource, evaluation: EvaluationResource, alerts: AlertsResource, state: StateResource):
    """Seed 002's experiment protocol: every TRAIN question answered under the fast, balanced and
    deep profiles, retrieval, answer accuracy and the answer KPIs side by side; the adoption gate
    is its check (which thresholds the offline path holds is a finding, not a failure: WARN)."""
    from narrative_mirror import query
    from narrative_mirror.agent.profiles import PROFILES

    retriever, client, cfg, fingerprint, versions = _query_setup(embedder, lancedb, llm, evaluation)
    # Each train chat's stored questions and messages, read once for all profiles.
    inputs = {k: (gold, state.stored_frame("messages", k))
              for k in sorted(context.instance.get_dynamic_partitions(chat_files.name))
              if (row := state.stored_frame("split", k)) is not None and row["split"][0] == split_lib.TRAIN
              and (gold := state.stored_frame("gold_qa", k)) is not None}
    train = list(inputs)
    table = []
    for profile in PROTOCOL_PROFILES:
        rows = pl.concat([ev.evaluate_qa(lambda q, key=key: query.ask(retriever, key, q, profile=profile, llm=client),
                                         gold, messages, fingerprint["fingerprint"])
                          for key, (gold, messages) in inputs.items()])
        overall = ev.qa_summary(rows)["overall"]
        table.append({"profile": profile, "questions": rows.height, **{k: overall.get(k) for k in PROTOCOL_KEYS}})
        context.log.info(f"{profile}: {rows.height} questions from {len(train)} train chat files")
    df = pl.DataFrame(table, schema={"profile": pl.String, "questions": pl.Int64, **{k: pl.Float64 for k in PROTOCOL_KEYS}})
    yield _versioned(df, {
        **{k: v for row in table
           for k, v in _float_metadata({k: row[k] for k in PROTOCOL_KEYS}, f"{row['profile']}/").items()},
        "protocol": dg.MetadataValue.md(ev.markdown_table(table)),
        "train_chat_files": dg.MetadataValue.json(train),
        "fingerprint": fingerprint["fingerprint"],
    })
    balanced = next(row for row in table if row["profile"] == "balanced")
    slo_ms = PROFILES["balanced"].deadline_s * 1000
    held = {k: (balanced[k] is not None and balanced[k] >= bound) for k, bound in ADOPTION_GATE.items()}
    held["p95_latency_ms"] = balanced["p95_latency_ms"] is not None and balanced["p95_latency_ms"] <= slo_ms
    yield from alert_failed_checks(context, alerts, [dg.AssetCheckResult(
        check_name="adoption_gate", asset_key="profile_protocol", passed=all(held.values()),
        severity=dg.AssetCheckSeverity.WARN,
        description="; ".join(
            [f"{k} {balanced[k] if balanced[k] is None else round(balanced[k], 3)} {'>=' if ok else '<'} {ADOPTION_GATE[k]}"
             for k, ok in held.items() if k in ADOPTION_GATE]
            + [f"p95 latency {round(balanced['p95_latency_ms'] or 0)} ms {'<=' if held['p95_latency_ms'] else '>'} {slo_ms:.0f} ms"]),
        metadata={k: dg.MetadataValue.bool(ok) for k, ok in held.items()},
    )])


EVAL_ASSETS = [qa_eval, arc_eval, eval_summary, profile_protocol]
