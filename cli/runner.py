"""Drives the asset graph in-process against the persistent Dagster instance in NM_HOME.

The command line asks Dagster the question its daemon asks: it records the versions of the
source files (``observe_sources``, as ``source_files_sensor`` does), then evaluates the freshness
rule of ``assets/freshness.py`` with ``dg.evaluate_automation_conditions`` and materializes what
it requests, one run per chat file, until nothing is requested. An edit therefore re-runs only
its own chat file's assets, hop by hop: a step whose output did not change stops the wave.
The same instance backs ``dg dev`` when ``DAGSTER_HOME`` points at ``$NM_HOME/dagster``.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg
import polars as pl

from assets.freshness import FreshnessQuery, InPartitions, NeedsRun, ready_to_run
from assets.ingest.assets import INPUT_PROBLEM
from assets.sources.assets import observe_sources, record_observation
from cli.broken import FAILURE, NOT_RETRIED, PROBLEM, BrokenChats
from cli.stop_signal import InterruptWatch
from instance.lifecycle import HomeLock, dagster_home, fail_interrupted_runs, run_tags
from narrative_mirror.safe_text import terminal_safe
from resources import environment
from resources.dagster_resources import default_resources, resolved

# Progress goes through Runner.progress. Dagster's own console log stays silent (its run logs in
# the instance keep everything, tracebacks included) unless the command runs with --verbose.
QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
VERBOSE = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
WAIT_FOR_OTHER_RUNS_S = 2.0
IN_PROGRESS = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


def _stderr(msg: str) -> None:
    print(terminal_safe(msg, keep_newlines=True), file=sys.stderr, flush=True)


@dataclass
class BuildReport:
    """What one ``Runner.materialize`` did: assets run per partition, step seconds, new encodes,
    damaged outputs repaired, and what went wrong: ``problems`` (a bad input file: one line naming file and field),
    ``failures`` (anything else), ``warnings`` (built, but something in the file looks odd)."""

    ran: dict[str, list[str]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    encoded_messages: dict[str, int] = field(default_factory=dict)
    partition_seconds: dict[str, float] = field(default_factory=dict)  # per partition: all its steps
    encode_seconds: dict[str, float] = field(default_factory=dict)  # per partition: encoding messages
    problems: dict[str | None, str] = field(default_factory=dict)
    failures: dict[str | None, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    repairs: list[dict] = field(default_factory=list)  # damaged outputs found and rebuilt (cli/integrity.py)

    @property
    def failed(self) -> set[str | None]:
        return set(self.problems) | set(self.failures)

    def add(self, partition: str | None, result) -> None:
        label = partition or "(all)"
        for event in result.all_events:
            if event.event_type_value == "STEP_SUCCESS":
                name, seconds = event.step_key, event.event_specific_data.duration_ms / 1000
                self.seconds[name] = self.seconds.get(name, 0.0) + seconds
                self.partition_seconds[label] = self.partition_seconds.get(label, 0.0) + seconds
            elif event.event_type_value == "ASSET_MATERIALIZATION":
                materialization = event.event_specific_data.materialization
                self.ran.setdefault(label, []).append(materialization.asset_key.to_user_string())
                metadata = {k: v.value for k, v in materialization.metadata.items()}
                if "encoded_messages" in metadata:
                    self.encoded_messages[label] = self.encoded_messages.get(label, 0) + metadata["encoded_messages"]
                if "encode_seconds" in metadata:
                    self.encode_seconds[label] = self.encode_seconds.get(label, 0.0) + metadata["encode_seconds"]
                self.warnings += _warnings(label, metadata)
        if not result.success:
            message, input_problem = _failure(result)
            (self.problems if input_problem else self.failures)[partition] = message


class Runner:
    """One command's session with the instance: holds the home lock until ``close``."""

    def __init__(
        self,
        data_dir: Path | None = None,
        arcs_dir: Path | None = None,
        progress: Callable[[str], None] = _stderr,
        verbose: bool = False,
        import_options=None,
    ):
        from definitions import build_definitions

        self.progress = progress
        self.verbose = verbose
        self.problems: list[str] = []  # files that could not become partitions (bad names, links out, bad exports)
        self.elsewhere: dict[str, str] = {}  # chats this home built from another folder: {key: why not taken}
        self.source_versions: dict[str, dict[str, str]] = {}  # per chat: its source versions (register)
        self.data_dir = Path(data_dir).resolve() if data_dir else environment.data_dir()
        self.resources = default_resources(
            data_dir=str(self.data_dir), arcs_dir=str(arcs_dir or ""), import_options=import_options
        )
        self.state = self.resources["state"]
        self._resolved: dict = {}
        self.defs = build_definitions(self.resources)
        self.assets = list(self.defs.assets)
        self.instance = None
        self.stop_signal = None
        if threading.current_thread() is threading.main_thread():
            # SIGTERM stops a command as Ctrl-C does (Dagster maps it so inside its runs).
            signal.signal(signal.SIGTERM, signal.default_int_handler)
            self.stop_signal = InterruptWatch()
        home = dagster_home()
        self.broken = BrokenChats(self.state.root)
        self._lock = HomeLock(home, progress).__enter__()
        try:
            self.instance = dg.DagsterInstance.from_config(str(home))
            for run_id in fail_interrupted_runs(self.instance):
                progress(f"run {run_id[:8]} was interrupted (its process is gone): marked failed, its work is redone")
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.stop_signal is not None:
            self.stop_signal.close()
            self.stop_signal = None
        if self.instance is not None:
            self.instance.dispose()
            self.instance = None
        if self._lock is not None:
            self._lock.__exit__(None, None, None)
            self._lock = None

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def resource(self, name: str):
        """A resource as a run sees it, its ``EnvVar`` settings resolved (``self.resources`` keeps
        them unresolved: definitions must show the variables, not their values)."""
        if name not in self._resolved:
            self._resolved[name] = resolved(self.resources[name])
        return self._resolved[name]

    # -- sources ----------------------------------------------------------------------------
    def register(self) -> list[str]:
        """Record the chat files (new partitions) and the versions of changed source files;
        returns the chat files present, the command's partitions."""
        found = observe_sources(self.instance, self.resources["chat_data"], progress=self.progress)
        self.problems = found.problems
        self.elsewhere = found.elsewhere
        self.source_versions = found.versions
        if not found.files:
            why = f": {' | '.join(found.problems)}" if found.problems else ""
            raise FileNotFoundError(f"no chats (chat files or chat exports) in {self.data_dir}{why}")
        record_observation(self.instance, found)
        return sorted(found.files)

    # -- the freshness question -------------------------------------------------------------
    def plan(self, selection: Sequence[str], partitions: Sequence[str]) -> dict[str | None, list[dg.AssetKey]]:
        """What the freshness rule requests now among ``selection`` (asset names) for
        ``partitions``: {partition (None = unpartitioned): asset keys in graph order}."""
        wanted = {dg.AssetKey(s) for s in selection}
        condition = InPartitions(partitions) & ready_to_run()

        def targeted(spec: dg.AssetSpec) -> dg.AssetSpec:
            if spec.key not in wanted:
                return spec.replace_attributes(automation_condition=None)
            return spec.replace_attributes(automation_condition=condition if spec.partitions_def else NeedsRun())

        defs = dg.Definitions(
            assets=[a.map_asset_specs(targeted) if isinstance(a, dg.AssetsDefinition) else a for a in self.assets],
            resources=self.resources,
        )
        result = dg.evaluate_automation_conditions(defs=defs, instance=self.instance)
        graph = defs.resolve_asset_graph()
        order = {k: i for i, k in enumerate(graph.toposorted_asset_keys)}
        plan: dict[str | None, list[dg.AssetKey]] = {}
        for evaluation in sorted(result.results, key=lambda r: order[r.key]):
            if not evaluation.true_subset.size:
                continue
            if graph.get(evaluation.key).is_partitioned:
                for key in sorted(evaluation.true_subset.expensively_compute_partition_keys()):
                    plan.setdefault(key, []).append(evaluation.key)
            else:
                plan.setdefault(None, []).append(evaluation.key)
        return plan

    def why(self, keys: Sequence[dg.AssetKey], partition: str | None) -> str:
        """Why ``keys`` need a run for ``partition``, grouped by reason (for progress lines)."""
        query = FreshnessQuery(self.instance, self.defs.resolve_asset_graph())
        by_reason: dict[str, list[str]] = {}
        for key in keys:
            reason = query.reason(key, partition) or "downstream of the above"
            by_reason.setdefault(reason, []).append(key.to_user_string())
        if list(by_reason) == ["missing"]:  # a chat seen for the first time: its step names say nothing yet
            return f"first build ({len(keys)} steps)"
        return "; ".join(f"{reason}: {', '.join(names)}" for reason, names in by_reason.items())

    # -- running ----------------------------------------------------------------------------
    def materialize(
        self,
        selection: Sequence[str],
        partitions: Sequence[str] | None,
        tags: dict[str, str] | None = None,
        force: bool = False,
        what: str = "",
        run_config: dict | None = None,
        repair: Mapping[str, Sequence[str]] | None = None,
        retry_failed: bool = False,
        memory: bool = False,
    ) -> BuildReport:
        """Bring ``selection`` up to date for ``partitions`` (None: the unpartitioned assets of
        the selection): run what the freshness rule requests, again until it requests nothing.
        ``force`` runs the whole selection once first; ``what`` names the selection in progress
        lines; ``run_config`` holds the ``ops`` config of assets of the selection (each run gets
        that of the assets it runs). ``repair``: {partition: asset names} whose stored output
        is damaged, run in the first round whatever the rule says (cli/integrity.py finds them;
        a partition outside ``partitions`` gets only those). A failed partition is left alone
        (the others go on) and reported in the result; one that failed in an earlier command
        with the same sources and code is reported again and not run (``retry_failed``: run it).
        A bad input is remembered whatever the selection; any other failure only for ``memory``
        (the chat's memory build), whose failures must stick, never for an evaluation."""
        targets: list[str | None] = list(partitions) if partitions else [None]
        report = BuildReport()
        if not retry_failed:
            self._known_broken(targets, report, memory)
        # Failed before, changed since (or retried): run whole, whatever the rule says (a step
        # whose blocking check failed was materialized all the same: the rule sees nothing to do).
        again = {
            p: list(selection)
            for p in targets
            if memory and p is not None and p not in report.failed and self.broken.recorded(p) == FAILURE
        }
        repair = {**again, **(repair or {})}
        ran: set[tuple[str | None, dg.AssetKey]] = set()
        first = True
        while True:
            if first and force:
                plan = {p: [dg.AssetKey(s) for s in selection] for p in targets}
            else:
                plan = self.plan(selection, [p for p in targets if p is not None and p not in report.failed])
                if first and repair:
                    plan = self._with_repairs(plan, repair)
            # Only what this command has not run yet: an asset requested again right after it
            # ran would mean its output never settles; one attempt is enough.
            plan = {p: [k for k in keys if (p, k) not in ran] for p, keys in plan.items() if p not in report.failed}
            plan = {p: keys for p, keys in plan.items() if keys}
            if not plan:
                break
            for i, (partition, keys) in enumerate(plan.items(), 1):
                label = f"[{i}/{len(plan)}] {partition or '(all)'}"
                versions = self.source_versions.get(partition) if partition else None
                if self._stop_asked():
                    self.progress(f"{label}: not started (stopped by a signal)")
                    raise KeyboardInterrupt
                self._wait_for_other_runs(partition)
                if first and force:
                    why = f"run on request: {', '.join(k.to_user_string() for k in keys)}"
                elif first and partition in again:
                    why = f"failed before, run again: {', '.join(k.to_user_string() for k in keys)}"
                elif first and repair and partition in repair:
                    why = f"repair (stored output damaged or lost): {', '.join(k.to_user_string() for k in keys)}"
                else:
                    why = self.why(keys, partition)
                self.progress(f"{label}: {why}")
                result = self._execute(
                    keys, partition, {**run_tags(), **(tags or {})}, self._run_config(run_config, keys)
                )
                ran.update((partition, k) for k in keys)
                if _interrupted(result):
                    self.instance.report_run_canceled(
                        self.instance.get_run_by_id(result.run_id),
                        "stopped by a signal (SIGINT/SIGTERM): the step in progress was aborted",
                    )
                    self.progress(
                        f"{label}: stopped; run {result.run_id[:8]} marked canceled, "
                        "the remaining chat files were not started"
                    )
                    raise KeyboardInterrupt
                if self._stop_asked():  # the signal reached no step: the run finished
                    self.progress(
                        f"{label}: stopped by a signal after run {result.run_id[:8]} had finished "
                        f"({'succeeded' if result.success else 'failed'}); "
                        "the remaining chat files were not started"
                    )
                    raise KeyboardInterrupt
                report.add(partition, result)
                if partition in report.problems:
                    self.broken.remember(partition, versions, report.problems[partition], PROBLEM)
                elif partition in report.failures and memory:
                    self.broken.remember(partition, versions, report.failures[partition], FAILURE)
                elif versions and result.success:
                    self.broken.forget(partition)
                if partition in report.failed:
                    # One bad chat file must not stop the others: report it and go on.
                    self.progress(f"{label}: FAILED")
            first = False
        for partition in targets:
            if (partition or "(all)") not in report.ran and partition not in report.failed:
                self.progress(f"{partition or '(all)'}: {what or ', '.join(selection)} up to date")
        return report

    def _known_broken(self, targets: Sequence[str | None], report: BuildReport, memory: bool) -> None:
        """Chats whose build failed before with the same sources and code: reported again as they
        failed, and not run (they stay failed, whatever the freshness rule says)."""
        for partition in targets:
            versions = self.source_versions.get(partition) if partition else None
            if partition is None or (known := self.broken.known(partition, versions)) is None:
                continue
            kind, line = known
            if kind == FAILURE and not memory:
                continue
            (report.problems if kind == PROBLEM else report.failures)[partition] = f"{line} {NOT_RETRIED}"
            self.progress(f"{partition}: FAILED before, unchanged since: not run again (build --repair retries it)")

    def _stop_asked(self) -> bool:
        return self.stop_signal is not None and self.stop_signal.received()

    def named_job(self, keys: Sequence[dg.AssetKey], tags: Mapping[str, str]) -> dg.JobDefinition | None:
        """The smallest job of the definitions that selects all of ``keys`` and whose own tags the
        run's ``tags`` agree with (train_eval_job for a train evaluation); None when none does."""
        fits = []
        for job in self.defs.resolve_all_job_defs():
            if job.name.startswith("__"):  # Dagster's implicit jobs
                continue
            selected = job.asset_layer.selected_asset_keys if job.asset_layer else set()
            if set(keys) <= selected and all(tags.get(k) == v for k, v in (job.tags or {}).items()):
                fits.append((len(selected), job.name, job))
        return min(fits)[2] if fits else None

    def _execute(self, keys: Sequence[dg.AssetKey], partition: str | None, tags: dict, run_config: dict):
        """Run ``keys`` for ``partition`` in this process, under the named job that selects them (so
        the UI's Jobs pages list command-line runs), else as Dagster's ephemeral asset job."""
        job = self.named_job(keys, tags)
        if job is None:
            return dg.materialize(
                self.assets,
                selection=keys,
                partition_key=partition,
                instance=self.instance,
                resources=self.resources,
                tags=tags,
                raise_on_error=False,
                run_config=run_config,
            )
        return job.execute_in_process(
            run_config=run_config,
            instance=self.instance,
            partition_key=partition,
            raise_on_error=False,
            asset_selection=list(keys),
            tags=tags,
        )

    def _with_repairs(self, plan: dict, repair: Mapping[str, Sequence[str]]) -> dict:
        """``plan`` plus the assets to repair, each partition's assets in graph order."""
        order = {k: i for i, k in enumerate(self.defs.resolve_asset_graph().toposorted_asset_keys)}
        merged = {p: list(keys) for p, keys in plan.items()}
        for partition, names in repair.items():
            keys = set(merged.get(partition, [])) | {dg.AssetKey(n) for n in names}
            merged[partition] = sorted(keys, key=order.__getitem__)
        return merged

    def _run_config(self, run_config: dict | None, keys: Sequence[dg.AssetKey]) -> dict:
        """The logging config, plus the ops config of the assets this run runs."""
        logging = VERBOSE if self.verbose else QUIET
        ops = {
            key.to_user_string(): config
            for key in keys
            if (config := (run_config or {}).get("ops", {}).get(key.to_user_string())) is not None
        }
        return {**logging, "ops": ops} if ops else logging

    def _wait_for_other_runs(self, partition: str | None) -> None:
        """Runs of another process (the daemon, the UI) on this partition finish first: the
        plan is made again afterwards only if they leave work to do (never twice the same)."""
        tags = {"dagster/partition": partition} if partition else {}
        announced = False
        while self.instance.get_runs(filters=dg.RunsFilter(statuses=IN_PROGRESS, tags=tags), limit=1):
            if not announced:
                self.progress(f"{partition or '(all)'}: waiting for a run in progress elsewhere (UI or daemon)")
                announced = True
            time.sleep(WAIT_FOR_OTHER_RUNS_S)

    def last_check(self, asset: str, check: str) -> dict | None:
        """The latest evaluation of an asset check: {passed, severity, description}."""
        record = self.instance.get_latest_asset_check_evaluation_record(dg.AssetCheckKey(dg.AssetKey(asset), check))
        evaluation = record.event.dagster_event.event_specific_data if record and record.event else None
        if evaluation is None:
            return None
        return {
            "passed": evaluation.passed,
            "severity": evaluation.severity.value,
            "description": evaluation.description,
        }

    def stored(self, asset: str, partition: str | None) -> pl.DataFrame | None:
        return self.state.stored_frame(asset, partition)

    def read(self, asset: str, partition: str | None) -> pl.DataFrame:
        frame = self.stored(asset, partition)
        if frame is None:
            raise FileNotFoundError(f"{self.state.frame_path(asset, partition)}: no stored output")
        return frame


def _failure(result) -> tuple[str, bool]:
    """(one line saying why the run failed, whether a bad input file is the cause)."""
    for event in result.all_events:
        if event.event_type_value == "STEP_FAILURE":
            data = event.event_specific_data
            failure = data.user_failure_data
            if failure is not None and failure.metadata.get(INPUT_PROBLEM) is not None:
                return failure.description, True
            err = data.error
            cause = err.cause.message if err and err.cause else (err.message if err else "failed")
            return f"{event.step_key}: {' '.join(cause.split())}", False
    for event in result.all_events:
        if event.event_type_value == "ASSET_CHECK_EVALUATION" and not event.event_specific_data.passed:
            return f"blocking check failed: {event.event_specific_data.check_name}", False
    return "run did not succeed", False


def _interrupted(result) -> bool:
    """Whether a run failed because the process was told to stop (Ctrl-C, SIGTERM)."""
    return any(
        event.event_type_value == "STEP_FAILURE"
        and event.event_specific_data.error is not None
        and event.event_specific_data.error.cls_name == "DagsterExecutionInterruptedError"
        for event in result.all_events
    )


def _warnings(label: str, metadata: dict) -> list[str]:
    """Built, but worth a look: messages the reader had to normalize, odd gold annotations."""
    lines = []
    if notes := metadata.get("normalizations"):
        lines.append(f"{label}: {len(notes)} normalization(s), e.g. {notes[0]}")
    if oddities := metadata.get("gold_oddities"):
        first, what = next(iter(oddities.items()))
        lines.append(f"{label}: {len(oddities)} question(s) with odd gold evidence, e.g. {first}: {what[0]}")
    return lines
