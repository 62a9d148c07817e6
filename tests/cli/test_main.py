"""The narrative-mirror command, end to end through Dagster, as a user runs it."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from chat_factory import small_chat, write_chat
from loopback import free_port

from cli.main import main

CLI = [sys.executable, "-m", "cli.main"]


def _json(capsys, argv) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_ingest_realtalk_reports_the_corpus_counts(realtalk_dir, capsys):
    out = _json(capsys, ["ingest", "--data", str(realtalk_dir), "--json"])
    assert (out["chat_files"], out["built"], out["messages"], out["qa"]) == (10, 10, 8944, 728)
    assert out["arc_cases"] > 0
    assert out["unresolved_evidence"] == sum(f["unresolved_evidence"] for f in out["per_file"].values()) > 0
    # A second run finds everything fresh and redoes nothing.
    main(["ingest", "--data", str(realtalk_dir)])
    assert capsys.readouterr().err.count("up to date") == 10


def test_bad_data_folder_exits_2_with_a_clear_message(tmp_path):
    proc = subprocess.run(
        [*CLI, "ingest", "--data", str(tmp_path / "missing"), "--json"], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "does not exist" in proc.stderr and "Traceback" not in proc.stderr
    assert "does not exist" in json.loads(proc.stdout)["problems"][0]


def _broken_corpus(folder: Path, outside: Path) -> dict[str, str]:
    """Bad chat files of every kind seen in the wild, and the words their one line must hold."""
    good = json.dumps(small_chat())
    deep = "[" * 100_000 + "]" * 100_000
    chat = small_chat()
    chat["session_1"][1]["dia_id"] = chat["session_1"][0]["dia_id"]
    files = {
        "truncated": (good[: len(good) // 2], "invalid JSON"),
        "wrong_types": (
            good.replace('"clean_text": "The one on Elm Street"', '"clean_text": 7'),
            "session_1[2].clean_text is int",
        ),
        "nulls": (good.replace('"date_time": "01.03.2024, 09:02:00"', '"date_time": null'), "date_time: missing"),
        "empty": ("", "empty file"),
        "deep": (deep, "nested too deeply"),
        "duplicate_ids": (json.dumps(chat), "duplicate dia_id 'D1:1'"),
    }
    for name, (text, _) in files.items():
        (folder / f"{name}.json").write_text(text, encoding="utf-8")
    (folder / "latin1.json").write_bytes(good.replace("Elm", "Ölm").encode("latin-1"))
    (outside / "secret.json").write_text(good)
    (folder / "escape.json").symlink_to(outside / "secret.json")
    return {
        **{name: words for name, (_, words) in files.items()},
        "latin1": "not UTF-8",
        "escape": "outside the data folder",
    }


@pytest.mark.slow
def test_bad_files_exit_2_one_line_each_while_the_good_ones_build_and_nothing_stored_changes(tmp_path):
    data, outside = tmp_path / "data", tmp_path / "outside"
    outside.mkdir()
    write_chat(data, "good", small_chat())
    odd = small_chat()
    odd["session_1"][0]["clean_text"] = "word " * 5000  # a huge message: builds, truncated, with a warning
    odd["qa"][0]["evidence"] = "D1:3-D1:1"  # a plain string holding a reversed range: read, with a warning
    write_chat(data, "odd", odd)
    assert subprocess.run([*CLI, "build", "--data", str(data)], capture_output=True).returncode == 0
    stored = {p: p.read_bytes() for p in (Path(os.environ["NM_HOME"]) / "storage").rglob("*.parquet")}
    expected = _broken_corpus(data, outside)
    (data / "odd.json").write_text("{broken", encoding="utf-8")  # a good file goes bad: its results stay

    proc = subprocess.run([*CLI, "build", "--data", str(data), "--json"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "dagster" not in proc.stderr.lower()
    out = json.loads(proc.stdout)
    assert list(out["per_file"]) == ["good"] and out["failures"] == []
    # Counts say what was built and what was not (the link out of the folder is no chat file).
    assert (out["chat_files"], out["built"]) == (9, 1) and "partitions" not in out  # good, odd and 7 bad ones
    assert sorted(out["not_built"]) == sorted({*expected} - {"escape"} | {"odd"})
    assert "invalid JSON" in out["not_built"]["odd"]
    for name, words in {**expected, "odd": "invalid JSON"}.items():
        lines = [line for line in proc.stderr.splitlines() if f"{name}.json" in line]
        assert len(lines) == 1 and words in lines[0], (name, lines)
        assert sum(f"{name}.json" in p and words in p for p in out["problems"]) == 1, name
    assert len(out["problems"]) == len(expected) + 1
    assert stored == {p: p.read_bytes() for p in stored}  # nothing stored before was changed


def test_odd_files_build_with_a_warning(tmp_path, capsys):
    odd = small_chat()
    odd["session_1"][0]["clean_text"] = "word " * 5000
    odd["qa"][0]["evidence"] = "D1:3-D1:1"
    write_chat(tmp_path, "odd", odd)
    out = _json(capsys, ["build", "--data", str(tmp_path), "--json"])
    assert out["problems"] == [] and out["per_file"]["odd"]["messages"] == 8
    warnings = " ".join(out["warnings"])
    assert "truncated from 25000 to 20000 characters" in warnings
    assert "evidence is one string, not a list" in warnings


def test_one_broken_file_does_not_stop_the_others(tmp_path, capsys):
    write_chat(tmp_path, "good", small_chat())
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    assert main(["ingest", "--data", str(tmp_path)]) == 2
    assert "broken.json: invalid JSON at line 1 column 2" in capsys.readouterr().err
    from cli.runner import Runner

    with Runner(data_dir=tmp_path) as runner:
        assert runner.read("messages", "good").height == 8


def test_verbose_shows_dagsters_log_and_the_traceback(tmp_path, capsys):
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    assert main(["ingest", "--data", str(tmp_path), "--verbose"]) == 2
    assert "STEP_FAILURE" in capsys.readouterr().err


@pytest.mark.e2e
def test_serve_starts_with_the_chats_that_built_and_says_which_did_not(tmp_path):
    import time
    import urllib.error
    import urllib.request

    data = tmp_path / "data"
    write_chat(data, "good", small_chat())
    (data / "broken.json").write_text("{not json", encoding="utf-8")
    tokens = tmp_path / "tokens.json"
    token = _json_run(["token", "add", "--tokens", str(tokens), "--name", "ci", "--chat", "*", "--json"])["token"]
    port = free_port()
    proc = subprocess.Popen(
        [*CLI, "serve", "--data", str(data), "--tokens", str(tokens), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def get(path, auth=True):
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}{path}", headers={"Authorization": f"Bearer {token}"} if auth else {}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.load(response)

    try:
        deadline = time.time() + 240
        while True:
            try:
                health = get("/api/health")
                break
            except (urllib.error.URLError, ConnectionError):
                assert proc.poll() is None and time.time() < deadline, proc.stderr.read()[-3000:]
                time.sleep(0.5)
        assert health["chats"] == ["good"] and health["status"] == "degraded"
        assert "invalid JSON" in health["unavailable"]["broken"]
        assert get("/api/memory/search?q=bakery&chat=good&k=2")["meta"]["count"] == 2
        with pytest.raises(urllib.error.HTTPError) as caught:
            get("/api/health", auth=False)
        assert caught.value.code == 401
        proc.send_signal(signal.SIGINT)  # Ctrl-C: the normal end of serve
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)
    # It said what it serves and what it does not, one line each with why, and how it ended.
    assert f"serving 1 of 2 chat files (good); not serving broken on http://127.0.0.1:{port}" in err
    assert err.count(f"warning: no ARC cases for {data}: ") == 1  # a folder without its arcs says so
    assert [line for line in err.splitlines() if line.startswith("not serving ")] == [
        "not serving broken: broken.json: invalid JSON at line 1 column 2: Expecting property name enclosed in double quotes"
    ]
    assert proc.returncode == 0 and out.splitlines()[-1] == (
        f"serve: stopped; it served 1 chat files on http://127.0.0.1:{port} (1 not served: broken)"
    )


def _json_run(argv) -> dict:
    proc = subprocess.run([*CLI, *argv], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_resources_used_outside_runs_have_their_variables_resolved(tmp_path, monkeypatch):
    # serve, eval's fingerprint, maintain and the build's compaction use resources outside a run:
    # they must see the values of OPENAI_BASE_URL, the AWS keys, ..., not the variables' names.
    import dagster as dg

    from cli.runner import Runner

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("NM_LLM_MODEL", "tiny-model")
    monkeypatch.setenv("NM_LANCEDB_URI", "s3://bucket/prefix")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "key-id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    with Runner(data_dir=tmp_path) as runner:
        assert isinstance(runner.resources["llm"].base_url, dg.EnvVar)  # definitions show the variable
        llm = runner.resource("llm").get()
        assert (llm.settings.base_url, llm.settings.model) == ("http://127.0.0.1:9/v1", "tiny-model")
        options = runner.resource("lancedb").storage_options()
        assert (options["aws_access_key_id"], options["aws_secret_access_key"]) == ("key-id", "secret")
        assert options["allow_http"] == "true" and runner.resource("lancedb") is runner.resource("lancedb")
