"""Evaluation as assets: per-chat QA and ARC evaluation with their regression checks
(assets/evaluation/checks.py), a train/test summary that also appends to the experiment log, and
the agentic-RAG design's profile protocol. The agent profile comes from the run config (run_config.py)."""

import dagster as dg
import polars as pl

from assets.evaluation.automation import EVAL_AUTOMATION, SUMMARY_AUTOMATION
from assets.evaluation.baseline import CHECKS_PASSED, find_baseline
from assets.evaluation.checks import (
    ARC_CHECK_SPECS,
    PROTOCOL_CHECK_SPECS,
    QA_CHECK_SPECS,
    adoption_gate_check,
    alert_failed_checks,
    floor_check,
    record_standing,
    regression_check,
)
from assets.evaluation.run_config import EvaluationRunConfig
from assets.evaluation.tables import table_metadata
from assets.index.assets import lancedb_index
from assets.ingest.assets import split
from assets.partitions import chat_files
from assets.paths import shown_path
from assets.sources.assets import agent_config, evaluation_config, prompt_sources, retrieval_config
from assets.versioning import LLM_POOL, versioned_asset, versioned_output
from narrative_mirror import baselines, experiments, settings
from narrative_mirror import evaluation as ev
from narrative_mirror import split as split_lib
from narrative_mirror.home import Home
from resources.dagster_resources import (
    AlertsResource,
    EmbedderResource,
    EvaluationResource,
    LanceDBResource,
    LLMResource,
    StateResource,
)

# Runs allowed to evaluate test partitions carry this tag (the test backfill job sets it).
TEST_TAG = "narrative_mirror/eval_split"


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


def _query_setup(
    embedder: EmbedderResource,
    lancedb: LanceDBResource,
    llm: LLMResource,
    evaluation: EvaluationResource,
    profile: str,
    asset: str,
):
    from narrative_mirror.retrieval.engine import Retriever

    model = embedder.get()
    client = llm.get()
    store = lancedb.get()
    cfg = evaluation.config(profile)
    fingerprint = eval_fingerprint(model, client, cfg, (asset,))
    retriever = Retriever(store, model, settings.load_config("retrieval"), home=Home(lancedb.state.root))
    return retriever, client, cfg, fingerprint, store.versions()


def eval_fingerprint(model, client, cfg: dict, assets: tuple[str, ...] = ("qa_eval", "arc_eval")) -> dict:
    """The config fingerprint the evaluation ``assets`` are recorded and compared under (each
    evaluation its own; the summary and the command line both): of the embedder ``model``, the
    LLM ``client`` (None: offline), the evaluation config ``cfg`` and the assets' code versions."""
    return ev.config_fingerprint(
        model.fingerprint,
        getattr(client, "fingerprint", None),
        cfg["run"]["profile"],
        cfg["run"]["mode"],
        code_versions(assets),
    )


def code_versions(assets: tuple[str, ...]) -> dict[str, str]:
    """The code version of each named evaluation asset (what Dagster compares to call it unsynced)."""
    by_name = {a.key.to_user_string(): a for a in EVAL_ASSETS}
    return {name: by_name[name].code_versions_by_key[dg.AssetKey(name)] for name in assets}


def _float_metadata(stats: dict, prefix: str = "") -> dict:
    """Numeric metrics as float metadata (Dagster plots them across materializations), 3 decimals."""
    return {
        f"{prefix}{k}": dg.MetadataValue.float(round(float(v), 3))
        for k, v in stats.items()
        if isinstance(v, float) or (isinstance(v, int) and not isinstance(v, bool) and k not in ("count", "excluded"))
    }


@versioned_asset(
    partitions_def=chat_files,
    group_name="evaluation",
    kinds={"polars"},
    pool=LLM_POOL,
    deps=[lancedb_index, retrieval_config, agent_config, *prompt_sources(("qa_eval",)), evaluation_config],
    automation_condition=EVAL_AUTOMATION,
    check_specs=QA_CHECK_SPECS,
)
def qa_eval(
    context: dg.AssetExecutionContext,
    config: EvaluationRunConfig,
    gold_qa: pl.DataFrame,
    messages: pl.DataFrame,
    split: pl.DataFrame,
    embedder: EmbedderResource,
    lancedb: LanceDBResource,
    llm: LLMResource,
    evaluation: EvaluationResource,
    alerts: AlertsResource,
    state: StateResource,
):
    """Runs the query pipeline on every gold question of the chat file and scores it."""
    from narrative_mirror import query

    which = guard_test_partition(context, split)
    key = context.partition_key
    retriever, client, cfg, fingerprint, versions = _query_setup(
        embedder, lancedb, llm, evaluation, config.profile, "qa_eval"
    )
    profile, mode = cfg["run"]["profile"], cfg["run"]["mode"]

    def progress(done: int, total: int) -> None:
        if done % 10 == 0 or done == total:
            context.log.info(f"{key}: {done}/{total} questions")

    rows = ev.evaluate_qa(
        lambda q: query.ask(retriever, key, q, profile=profile, llm=client, mode=mode),
        gold_qa,
        messages,
        fingerprint["fingerprint"],
        progress,
    )
    summary = ev.qa_summary(rows)
    overall = summary["overall"]
    metrics = cfg["regression"]["metrics"]
    baseline = find_baseline(context.instance, "qa_eval", key, baselines.pins_path(state.root))
    checks = [
        regression_check("qa_recall_regression", "qa_eval", metrics, overall, baseline, cfg),
        floor_check("qa_recall_floor", "qa_eval", metrics, overall, cfg),
    ]
    yield versioned_output(
        rows,
        {
            **_float_metadata(overall),
            "questions": dg.MetadataValue.int(overall["count"]),
            "split": which,
            "per_category": table_metadata(ev.category_table(summary)),
            "lost_at_stage": dg.MetadataValue.json(summary["lost"]),
            CHECKS_PASSED: dg.MetadataValue.bool(all(c.passed for c in checks)),
            "baseline": baseline.describe() if baseline else "none (first evaluation)",
            "fingerprint": fingerprint["fingerprint"],
            "config": dg.MetadataValue.json(fingerprint),
            "lancedb_versions": dg.MetadataValue.json(versions),
        },
    )
    record_standing(context, state, checks)
    yield from alert_failed_checks(context, alerts, checks)
    if which == split_lib.TEST:
        experiments.append_if_changed(
            "test_eval",
            fingerprint,
            {"test": _plain(overall)},
            path=state.experiments_log,
            partition=key,
            asset="qa_eval",
        )


@versioned_asset(
    partitions_def=chat_files,
    group_name="evaluation",
    kinds={"polars"},
    pool=LLM_POOL,
    deps=[lancedb_index, retrieval_config, agent_config, *prompt_sources(("arc_eval",)), evaluation_config],
    automation_condition=EVAL_AUTOMATION,
    check_specs=ARC_CHECK_SPECS,
)
def arc_eval(
    context: dg.AssetExecutionContext,
    config: EvaluationRunConfig,
    arc_cases: pl.DataFrame,
    split: pl.DataFrame,
    embedder: EmbedderResource,
    lancedb: LanceDBResource,
    llm: LLMResource,
    evaluation: EvaluationResource,
    alerts: AlertsResource,
    state: StateResource,
):
    """Runs narrative (arc) mode on every ARC case of the chat file: global recall, phase coverage, order."""
    from narrative_mirror import query

    which = guard_test_partition(context, split)
    key = context.partition_key
    retriever, client, cfg, fingerprint, versions = _query_setup(
        embedder, lancedb, llm, evaluation, config.profile, "arc_eval"
    )
    rows = ev.evaluate_arcs(
        lambda q: query.arc(retriever, key, q, profile=cfg["run"]["profile"], llm=client),
        arc_cases,
        fingerprint["fingerprint"],
    )
    overall = ev.arc_summary(rows)["overall"]
    metrics = [cfg["regression"].get("arc_metric", "arc_global_recall")]
    baseline = find_baseline(context.instance, "arc_eval", key, baselines.pins_path(state.root))
    checks = [
        regression_check("arc_recall_regression", "arc_eval", metrics, overall, baseline, cfg),
        floor_check("arc_recall_floor", "arc_eval", metrics, overall, cfg),
    ]
    yield versioned_output(
        rows,
        {
            **_float_metadata(overall),
            "cases": dg.MetadataValue.int(overall["count"]),
            "split": which,
            CHECKS_PASSED: dg.MetadataValue.bool(all(c.passed for c in checks)),
            "baseline": baseline.describe() if baseline else "none (first evaluation)",
            "fingerprint": fingerprint["fingerprint"],
            "config": dg.MetadataValue.json(fingerprint),
            "lancedb_versions": dg.MetadataValue.json(versions),
        },
    )
    record_standing(context, state, checks)
    yield from alert_failed_checks(context, alerts, checks)
    if which == split_lib.TEST:
        experiments.append_if_changed(
            "test_eval",
            fingerprint,
            {"test": _plain(overall)},
            path=state.experiments_log,
            partition=key,
            asset="arc_eval",
        )


def _plain(stats: dict) -> dict:
    return {k: v for k, v in stats.items() if v is None or isinstance(v, (int, float))}


@versioned_asset(
    group_name="evaluation", deps=[qa_eval, arc_eval, split], kinds={"polars"}, automation_condition=SUMMARY_AUTOMATION
)
def eval_summary(
    context: dg.AssetExecutionContext,
    config: EvaluationRunConfig,
    embedder: EmbedderResource,
    llm: LLMResource,
    evaluation: EvaluationResource,
    state: StateResource,
):
    """Train and test aggregates over the chat files evaluated under the CURRENT config
    fingerprint (stale partitions are listed, not averaged), appended to the experiment log."""
    cfg = evaluation.config(config.profile)
    client = llm.get()
    model = embedder.get()
    fingerprint = eval_fingerprint(model, client, cfg)
    # Each evaluation is current under its own fingerprint (its own code version).
    current_of = {
        asset: eval_fingerprint(model, client, cfg, (asset,))["fingerprint"] for asset in ("qa_eval", "arc_eval")
    }
    keys = context.instance.get_dynamic_partitions(chat_files.name)
    current: dict[str, list[pl.DataFrame]] = {"qa_eval": [], "arc_eval": []}
    included: dict[str, list[str]] = {"train": [], "test": []}
    outdated, missing = [], []
    for key in sorted(keys):
        qa, split_row = state.stored_frame("qa_eval", key), state.stored_frame("split", key)
        if qa is None or split_row is None:
            missing.append(key)
            continue
        if qa.height and qa["fingerprint"][0] != current_of["qa_eval"]:
            outdated.append(key)
            continue
        which = split_row["split"][0]
        included[which].append(key)
        current["qa_eval"].append(qa.with_columns(pl.lit(which).alias("split")))
        arc = state.stored_frame("arc_eval", key)
        if arc is not None:
            if not arc.height or arc["fingerprint"][0] == current_of["arc_eval"]:
                current["arc_eval"].append(arc.with_columns(pl.lit(which).alias("split")))
    rows, metrics, report, tables = [], {}, [], {}
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
        tables[f"{which}/per_category"] = table_metadata(ev.category_table(summary))
        report.append(f"{which}: {', '.join(included[which])}")
    if outdated or missing:
        report.append(
            f"Not included — evaluated under another config: {outdated or 'none'}; never evaluated: {missing or 'none'}"
        )
    log = state.experiments_log
    record = (
        experiments.append_if_changed(
            "summary", fingerprint, metrics, path=log, included=included, qa_fingerprint=current_of["qa_eval"]
        )
        if metrics
        else None
    )
    df = pl.DataFrame(
        rows, schema={"split": pl.String, "chat_files": pl.Int64, **{k: pl.Float64 for k in SUMMARY_KEYS}}
    )
    log_rows = experiments.flat_rows(experiments.read(log))[-20:]
    return versioned_output(
        df,
        {
            **{k: v for w, s in metrics.items() for k, v in _float_metadata(s, f"{w}/").items()},
            **tables,
            "report": dg.MetadataValue.md("\n\n".join(report) or "nothing evaluated under the current config yet"),
            "fingerprint": fingerprint["fingerprint"],
            "outdated_partitions": dg.MetadataValue.json(outdated),
            "experiment_id": record["experiment_id"] if record else "",
            "experiment_log": table_metadata(log_rows),
            "experiment_log_path": shown_path(log, state.root),
        },
    )


SUMMARY_KEYS = [*ev.HEADLINE_KEYS, "arc_global_recall", "arc_phase_coverage"]
PROTOCOL_PROFILES = ("fast", "balanced", "deep")
PROTOCOL_KEYS = ["recall@10", "exact_recall", "precision", "answer_f1", "answer_contains", *ev.KPI_KEYS]


@versioned_asset(
    group_name="evaluation",
    kinds={"polars"},
    pool=LLM_POOL,
    deps=[lancedb_index, retrieval_config, agent_config, *prompt_sources(("profile_protocol",)), evaluation_config],
    check_specs=PROTOCOL_CHECK_SPECS,
)
def profile_protocol(
    context: dg.AssetExecutionContext,
    config: EvaluationRunConfig,
    embedder: EmbedderResource,
    lancedb: LanceDBResource,
    llm: LLMResource,
    evaluation: EvaluationResource,
    alerts: AlertsResource,
    state: StateResource,
):
    """The agentic-RAG design's experiment protocol: every TRAIN question answered under the fast, balanced and
    deep profiles, retrieval, answer accuracy and the answer KPIs side by side; the adoption gate
    is its check (which thresholds the offline path holds is a finding, not a failure: WARN)."""
    from narrative_mirror import query

    retriever, client, cfg, fingerprint, versions = _query_setup(
        embedder, lancedb, llm, evaluation, config.profile, "profile_protocol"
    )
    # Each train chat's stored questions and messages, read once for all profiles.
    inputs = {
        k: (gold, state.stored_frame("messages", k))
        for k in sorted(context.instance.get_dynamic_partitions(chat_files.name))
        if (row := state.stored_frame("split", k)) is not None
        and row["split"][0] == split_lib.TRAIN
        and (gold := state.stored_frame("gold_qa", k)) is not None
    }
    train = list(inputs)
    table = []
    for profile in PROTOCOL_PROFILES:
        rows = pl.concat(
            [
                ev.evaluate_qa(
                    lambda q, key=key: query.ask(retriever, key, q, profile=profile, llm=client),
                    gold,
                    messages,
                    fingerprint["fingerprint"],
                )
                for key, (gold, messages) in inputs.items()
            ]
        )
        overall = ev.qa_summary(rows)["overall"]
        table.append({"profile": profile, "questions": rows.height, **{k: overall.get(k) for k in PROTOCOL_KEYS}})
        context.log.info(f"{profile}: {rows.height} questions from {len(train)} train chat files")
    df = pl.DataFrame(
        table, schema={"profile": pl.String, "questions": pl.Int64, **{k: pl.Float64 for k in PROTOCOL_KEYS}}
    )
    yield versioned_output(
        df,
        {
            **{
                k: v
                for row in table
                for k, v in _float_metadata({k: row[k] for k in PROTOCOL_KEYS}, f"{row['profile']}/").items()
            },
            "protocol": dg.MetadataValue.md(ev.markdown_table(table)),
            "train_chat_files": dg.MetadataValue.json(train),
            "fingerprint": fingerprint["fingerprint"],
        },
    )
    yield from alert_failed_checks(context, alerts, [adoption_gate_check(table)])


EVAL_ASSETS = [qa_eval, arc_eval, eval_summary, profile_protocol]
