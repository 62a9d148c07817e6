"""The command line and the daemon agree on what is fresh, edits cost what they change, and
commands on one home neither crash nor repeat each other's work (real instance and embedder)."""

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from cli.main import main
from cli.session import INGEST, LAYERS
from definitions import build_definitions
from instance.lifecycle import dagster_home
from jobs.sources import source_files_sensor
from narrative_mirror import settings
from resources.dagster_resources import default_resources

REPO = Path(__file__).resolve().parents[2]
HARBOR = "demo_harbor_Lena_Sam"
CLI = [sys.executable, "-m", "cli.main"]


@pytest.fixture
def data(tmp_path):
    """An editable copy of the demo chats, with their ARC cases beside them."""
    shutil.copytree(settings.DEMO_DATA_DIR, tmp_path / "chats")
    shutil.copytree(settings.DEMO_ARCS_DIR, tmp_path / "chats_arcs")
    return tmp_path / "chats"


def _json(capsys, argv) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def _edit(path: Path) -> str:
    """Change the text of one message and append two; returns an appended text."""
    chat = json.loads(path.read_text())
    chat["session_1"][0]["clean_text"] = "Evening! Guess what: I bought a tandem bicycle today"
    last = chat[max((k for k in chat if k.startswith("session_") and k[8:].isdigit()), key=lambda k: int(k[8:]))]
    appended = ["Lena sold the old red kayak to a fisherman from Bergen", "He paid with a crate of smoked herring"]
    for text in appended:
        message = dict(last[-1], clean_text=text)
        message["dia_id"] = f"{message['dia_id'].split(':')[0]}:{len(last) + 1}"
        last.append(message)
    path.write_text(json.dumps(chat))
    return appended[0]


def _daemon_tick(instance, data) -> tuple[list, list, dict[str | None, list[str]]]:
    """What the daemon would do now: the source sensor's result and the automation's requests,
    as {partition (None: unpartitioned): assets}."""
    resources = default_resources(data_dir=str(data))
    ctx = dg.build_sensor_context(instance=instance, resources={"chat_data": resources["chat_data"]})
    sensor = source_files_sensor(ctx)
    for event in sensor.asset_events:
        instance.report_runless_asset_event(event)
    automation = dg.evaluate_automation_conditions(defs=build_definitions(resources), instance=instance)
    requested: dict[str | None, list[str]] = {}
    for result in automation.results:
        if result.true_subset.size:
            partitions = (
                result.true_subset.expensively_compute_partition_keys() if result.true_subset.is_partitioned else [None]
            )
            for partition in partitions:
                requested.setdefault(partition, []).append(result.key.to_user_string())
    return sensor.run_requests, sensor.asset_events, requested


def _materializations(instance, asset: str, partition: str) -> int:
    filter_ = dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[partition])
    return len(instance.fetch_materializations(filter_, limit=100).records)


@pytest.mark.slow  # two builds of the demo: ~21 s
def test_an_edited_chat_reencodes_only_its_changed_and_new_messages(data, capsys):
    assert main(["build", "--data", str(data), "--json"]) == 0
    out, err = capsys.readouterr()
    first = json.loads(out)
    assert first["encoded_messages"] == first["messages"]
    # A chat seen for the first time: its progress line says so, not which step names are "missing".
    assert f"[1/3] demo_garden_Mara_Theo: first build ({len(INGEST + LAYERS)} steps)" in err.splitlines()
    assert "missing" not in err
    # The evidence covers the question's term "operated": "dad's hip operation is confirmed ..."
    where = _json(capsys, ["ask", "--data", str(data), "--chat", HARBOR, "--json", "Where was Lena's dad operated on?"])
    assert "D1:14" in [e["id"] for e in where["evidence"]]
    appended = _edit(data / f"{HARBOR}.json")
    out = _json(capsys, ["build", "--data", str(data), "--json"])
    assert out["per_file"][HARBOR]["encoded_messages"] == 3 == out["encoded_messages"]
    assert "lancedb_index" in out["per_file"][HARBOR]["ran"]
    assert all(row["ran"] == [] for key, row in out["per_file"].items() if key != HARBOR)
    answer = _json(capsys, ["ask", "--data", str(data), "--chat", HARBOR, "--json", "Who bought the old red kayak?"])
    assert any(appended in e["text"] for e in answer["evidence"])


@pytest.mark.slow
def test_after_the_cli_the_daemon_has_nothing_to_do_and_after_it_the_cli_neither(data, capsys):
    evaluated = _json(capsys, ["eval", "--data", str(data), "--split", "all", "--allow-test", "--json"])
    assert evaluated["per_split"]["train"]["questions"] > 0
    # answer accuracy and seed 002's answer KPIs, overall and per category (5 = unanswerable)
    for stats in (evaluated, evaluated["per_split"]["train"], *evaluated["per_category"].values()):
        assert 0 <= stats["answer_f1"] <= 1 and 0 <= stats["unknown_rate"] <= 1 and stats["p95_latency_ms"] > 0
        assert {
            "supported_claim_rate",
            "claim_gold_citation_precision",
            "corrective_trigger_rate",
            "mean_llm_calls",
        } <= set(stats)
    assert evaluated["per_category"]["5"]["abstention_accuracy"] is not None
    assert evaluated["per_category"]["1"]["abstention_accuracy"] is None
    with dg.DagsterInstance.from_config(str(dagster_home())) as instance:
        runs, observations, requested = _daemon_tick(instance, data)
        assert (runs, observations, requested) == ([], [], {})

        # The daemon picks up an edit (a train chat) hop by hop, one run per partition and tick ...
        _edit(data / "demo_garden_Mara_Theo.json")
        assets = list(build_definitions().assets)
        done = set()
        for _ in range(8):
            runs, observations, requested = _daemon_tick(instance, data)
            if not requested:
                break
            for partition, selection in requested.items():
                done |= {(partition, name) for name in selection}
                assert dg.materialize(
                    assets,
                    selection=selection,
                    partition_key=partition,
                    instance=instance,
                    resources=default_resources(data_dir=str(data)),
                ).success
        assert requested == {}
        garden = "demo_garden_Mara_Theo"
        assert {(garden, "messages"), (garden, "lancedb_index"), (garden, "qa_eval"), (None, "eval_summary")} <= done
        assert {partition for partition, _ in done} == {garden, None}  # nothing else re-ran
        runs_before = len(instance.get_runs())
    # ... and the command line then finds the memory up to date and launches nothing.
    assert main(["build", "--data", str(data)]) == 0
    assert capsys.readouterr().err.count("memory up to date") == 3
    with dg.DagsterInstance.from_config(str(dagster_home())) as instance:
        assert len(instance.get_runs()) == runs_before


@pytest.mark.slow
def test_what_a_person_reads_trace_experiments_and_the_protocol(data, capsys):
    result = _json(capsys, ["eval", "--data", str(data), "--split", "train", "--json"])
    assert main(["eval", "--data", str(data), "--split", "train"]) == 0
    printed = capsys.readouterr().out.splitlines()
    table = list(
        itertools.takewhile(lambda line: line.startswith("|"), printed[printed.index("train, per category:") + 1 :])
    )
    assert table[0].startswith("| category | questions | ") and len(table) == 2 + len(result["per_category"])
    assert main(["trace", "--data", str(data), "--chat", HARBOR, "Where was Lena's dad operated on?"]) == 0
    printed = capsys.readouterr()
    lines = printed.out.splitlines()
    # The agent's nodes, as they ran, on stderr.
    nodes = [line for line in printed.err.splitlines() if line.split("]")[0] in ("[planner", "[verification")]
    assert nodes[0].startswith("[planner] route=direct") and nodes[-1].startswith("[verification] ")
    assert lines[0].split("|")[1].strip().startswith("candidates (") and lines[2].split()[:2] == ["1", "|"]
    searches = lines[lines.index("route direct; searches:") + 1 :]
    assert searches[0].startswith('  question   "Where was Lena\'s dad operated on?": found ')
    assert main(["experiments"]) == 0
    table = capsys.readouterr().out.splitlines()
    # header, rule, one experiment (the second eval changed nothing: one row per change), total
    assert "train/answer_f1" in table[0] and len(table) == 2 + 1 + 1
    protocol = _json(capsys, ["protocol", "--data", str(data), "--json"])
    assert [row["profile"] for row in protocol["profiles"]] == ["fast", "balanced", "deep"]
    assert (
        protocol["adoption_gate"]["severity"] == "WARN"
        and "supported_claim_rate" in protocol["adoption_gate"]["description"]
    )


@pytest.mark.slow
def test_a_retrieval_code_change_makes_only_the_evaluations_unsynced(data, tmp_path, capsys):
    """A copy of the project with one line of a retrieval module changed, on the same home."""
    _json(capsys, ["eval", "--data", str(data), "--split", "train", "--json"])
    copy = tmp_path / "project"
    for package in ("narrative_mirror", "assets", "resources", "jobs", "instance", "definitions", "cli"):
        shutil.copytree(REPO / package, copy / package, ignore=shutil.ignore_patterns("__pycache__"))
    fusion = copy / "narrative_mirror" / "retrieval" / "fusion.py"
    fusion.write_text(fusion.read_text() + "\nUNUSED_KNOB = 1\n")
    prompt = copy / "narrative_mirror" / "prompts" / "agent_generator.txt"
    prompt.write_text("Answer in one sentence.\n" + prompt.read_text())
    script = (
        "import sys, warnings; warnings.filterwarnings('ignore')\n"
        "from cli.runner import Runner\n"
        f"with Runner(data_dir={str(data)!r}, progress=lambda m: None) as r:\n"
        f"    keys = [k for k in r.register() if k != {HARBOR!r}]  # the test chat was not evaluated\n"
        "    plan = r.plan(['messages', 'message_embeddings', 'l1_topics', 'l2_threads', 'lancedb_index',"
        " 'qa_eval', 'arc_eval'], keys)\n"
        "    print(sorted({k.to_user_string() for ks in plan.values() for k in ks}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=copy,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(copy)},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "['arc_eval', 'qa_eval']"


@pytest.mark.slow
def test_two_builds_at_once_on_a_fresh_home_both_succeed_and_build_each_chat_once(data):
    procs = [
        subprocess.Popen(
            [*CLI, "build", "--data", str(data), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outs]
    assert sorted(json.loads(out)["encoded_messages"] for out, _ in outs)[0] == 0  # the second found it done
    with dg.DagsterInstance.from_config(str(dagster_home())) as instance:
        for key in ("demo_garden_Mara_Theo", HARBOR, "demo_marathon_Ines_Kofi"):
            assert _materializations(instance, "lancedb_index", key) == 1


@pytest.mark.e2e
def test_a_killed_build_is_marked_failed_and_its_work_redone(data, capsys):
    proc = subprocess.Popen(
        [*CLI, "build", "--data", str(data)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        for line in proc.stderr:  # progress: the first run starts right after its line
            if line.startswith("[1/3]"):
                break
        time.sleep(2.0)  # inside the run (the embedder alone takes longer to load)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert main(["build", "--data", str(data)]) == 0
    assert "was interrupted (its process is gone): marked failed" in capsys.readouterr().err
    with dg.DagsterInstance.from_config(str(dagster_home())) as instance:
        (killed,) = instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE]))
        assert "interrupted" in next(
            e.message for e in instance.all_logs(killed.run_id, of_type=dg.DagsterEventType.RUN_FAILURE)
        )
        assert not instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
        for key in ("demo_garden_Mara_Theo", HARBOR, "demo_marathon_Ines_Kofi"):
            assert _materializations(instance, "lancedb_index", key) == 1


@pytest.mark.slow
def test_a_question_on_fresh_memory_does_not_start_dagster(data, capsys):
    assert main(["build", "--data", str(data)]) == 0
    script = (
        "import sys\n"
        "from cli.main import main\n"
        f"code = main(['ask', '--data', {str(data)!r}, '--chat', {HARBOR!r}, '--json', 'Where was the surgery?'])\n"
        "print('dagster' in sys.modules, code)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.stdout.strip().splitlines()[-1] == "False 0", proc.stderr[-2000:]
    # An edit sends the next question through Dagster, which says what it rebuilds.
    appended = _edit(data / f"{HARBOR}.json")
    capsys.readouterr()
    assert main(["ask", "--data", str(data), "--chat", HARBOR, "--json", "Who bought the old red kayak?"]) == 0
    out, err = capsys.readouterr()
    assert "chat_file has a new data version: messages" in err
    assert any(appended in e["text"] for e in json.loads(out)["evidence"])


@pytest.mark.e2e
def test_sigterm_stops_a_build_marks_its_run_canceled_and_starts_no_other(data):
    proc = subprocess.Popen(
        [*CLI, "build", "--data", str(data)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if line.startswith("[1/3]"):
            break
    time.sleep(2.0)  # inside the first run (loading the embedder)
    proc.send_signal(signal.SIGTERM)
    lines += proc.stderr.readlines()
    assert proc.wait(timeout=60) == 130, lines
    assert not any(line.startswith("[2/3]") for line in lines), lines
    with dg.DagsterInstance.from_config(str(dagster_home())) as instance:
        (run,) = instance.get_runs()
    # Mostly a step takes the signal and the run is canceled; one that reached no step (it came
    # after the last, or inside a garbage-collector callback) lets the run finish (cli/stop_signal.py).
    if run.status == dg.DagsterRunStatus.CANCELED:
        assert any("marked canceled" in line for line in lines), lines
    else:
        assert run.status == dg.DagsterRunStatus.SUCCESS
        assert any("stopped by a signal after run" in line for line in lines), lines
    # The next command redoes the stopped chat and builds the rest.
    assert main(["build", "--data", str(data)]) == 0


def test_a_stop_signal_no_step_took_ends_the_command_after_its_run(data, monkeypatch, capsys):
    """A SIGTERM that a run's own handler swallowed (it came after the run's last step) still stops
    the build before the next chat file, and the finished run stands as it ended."""
    from cli.runner import Runner

    real_execute = Runner._execute

    def execute_then_swallowed_sigterm(self, *args, **kwargs):
        result = real_execute(self, *args, **kwargs)
        swallowing = signal.signal(signal.SIGTERM, lambda *_: None)
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
        finally:
            signal.signal(signal.SIGTERM, swallowing)
        return result

    monkeypatch.setattr(Runner, "_execute", execute_then_swallowed_sigterm)
    assert main(["build", "--data", str(data)]) == 130
    err = capsys.readouterr().err
    assert "[1/3]" in err and "[2/3]" not in err
    assert "stopped by a signal after run" in err and "(succeeded)" in err
    with dg.DagsterInstance.from_config(str(dagster_home())) as instance:
        (run,) = instance.get_runs()
        assert run.status == dg.DagsterRunStatus.SUCCESS
