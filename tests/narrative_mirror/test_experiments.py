"""The experiment log (narrative_mirror/experiments.py): ``changed`` names every part of the
evaluation fingerprint that differs, code versions included, and a re-run that changes nothing
adds no row."""

from narrative_mirror import experiments
from narrative_mirror.evaluation import changed_parts

BASE = {
    "embedder": "m:384",
    "llm": "offline",
    "profile": "balanced",
    "mode": "agent",
    "retrieval.toml": "aaa",
    "prompts/agent_planner.txt": "p1",
    "code:qa_eval": "c1",
    "code:arc_eval": "c2",
    "fingerprint": "f1",
}


def test_changed_names_every_differing_part_code_versions_included():
    moved = {**BASE, "code:qa_eval": "c9", "retrieval.toml": "bbb", "fingerprint": "f2"}
    assert changed_parts(BASE, moved) == ["code:qa_eval", "retrieval.toml"]
    # A part only one side has (an older record's single "prompts" hash) is a difference too.
    older = {**{k: v for k, v in BASE.items() if not k.startswith("prompts/")}, "prompts": "all"}
    assert changed_parts(older, BASE) == ["prompts", "prompts/agent_planner.txt"]
    assert changed_parts(None, BASE) == ["(first experiment)"]


def test_one_row_per_change_not_per_rerun(tmp_path):
    log = tmp_path / "experiments.jsonl"
    metrics = {"train": {"recall@10": 0.7}}
    first = experiments.append_if_changed("summary", BASE, metrics, path=log, included={"train": ["a"]})
    same = experiments.append_if_changed(
        "summary", BASE, {"train": {"recall@10": 0.7}}, path=log, included={"train": ["a"]}
    )
    assert same["experiment_id"] == first["experiment_id"] and len(experiments.read(log)) == 1
    # Same config, other figures (the data or index moved): a row that says so.
    moved = experiments.append_if_changed(
        "summary", BASE, {"train": {"recall@10": 0.6}}, path=log, included={"train": ["a"]}
    )
    assert moved["changed"] == ["data or index (same config)"]
    # Another code version: a row naming it.
    code = experiments.append_if_changed(
        "summary",
        {**BASE, "code:arc_eval": "c3", "fingerprint": "f3"},
        {"train": {"recall@10": 0.6}},
        path=log,
        included={"train": ["a"]},
    )
    assert code["changed"] == ["code:arc_eval"]
    # Another kind's rows are another series: a test evaluation compares with its own previous row.
    test = experiments.append("test_eval", BASE, {"test": {"recall@10": 0.5}}, path=log, partition="b", asset="qa_eval")
    assert test["changed"] == ["(first experiment)"]
    assert [r["kind"] for r in experiments.read(log)] == ["summary", "summary", "summary", "test_eval"]


def test_changed_names_the_setting_with_its_old_and_new_value(tmp_path, monkeypatch):
    import re

    from narrative_mirror import settings

    log = tmp_path / "experiments.jsonl"
    experiments.append("summary", BASE, {"train": {"recall@10": 0.7}}, path=log)
    overrides = tmp_path / "config"
    overrides.mkdir()
    text, n = re.subn(r"^rrf_k = \d+", "rrf_k = 40", settings.config_path("retrieval").read_text(), flags=re.M)
    assert n == 1
    (overrides / "retrieval.toml").write_text(text)
    monkeypatch.setenv("NM_CONFIG_DIR", str(overrides))
    record = experiments.append(
        "summary", {**BASE, "retrieval.toml": "bbb", "fingerprint": "f2"}, {"train": {"recall@10": 0.7}}, path=log
    )
    assert record["changed"] == ["retrieval.toml rrf_k: 60 -> 40"]
    # A comment-only edit changes the file's hash and no setting: the file is named.
    (overrides / "retrieval.toml").write_text("# tuned\n" + text)
    comment = experiments.append(
        "summary", {**BASE, "retrieval.toml": "ccc", "fingerprint": "f3"}, {"train": {"recall@10": 0.7}}, path=log
    )
    assert comment["changed"] == ["retrieval.toml"]


def test_a_summary_row_holds_both_splits_exact_recall_side_by_side(tmp_path):
    log = tmp_path / "experiments.jsonl"
    experiments.append("summary", BASE, {"train": {"exact_recall": 0.31, "recall@10": 0.7}}, path=log)
    experiments.append(
        "summary",
        {**BASE, "fingerprint": "f2"},
        {"train": {"exact_recall": 0.33}, "test": {"exact_recall": 0.21}},
        path=log,
    )
    train_only, both = experiments.flat_rows(experiments.read(log))
    assert (train_only["train/exact_recall"], train_only["test/exact_recall"]) == (0.31, None)
    assert (both["train/exact_recall"], both["test/exact_recall"]) == (0.33, 0.21)
    header = experiments.export_csv(tmp_path / "log.csv", log).read_text().splitlines()[0].split(",")
    assert {"train/exact_recall", "test/exact_recall", "test/recall@10"} <= set(header)
