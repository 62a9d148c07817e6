"""Forgetting in Dagster's own SQLite records (a real instance in tmp_path): a log line, a
check's description and metadata texts lose the forgotten words and the forgotten message ids,
and the instance still reads every record after the rewrite (names of assets, partitions and
checks, which are plain words too, are left as they were)."""

from __future__ import annotations

import dagster as dg

from narrative_mirror.live.redaction import MARKER, Redactor, is_sqlite, redact_sqlite

WORD = "qvzmarrow"


@dg.asset(
    partitions_def=dg.StaticPartitionsDefinition(["notes_Ada"]),
    check_specs=[dg.AssetCheckSpec("every_message_in_one_block", asset="messages")],
)
def messages(context):
    context.log.info(f"looked for the {WORD} tin in ['q7', 'q8']")
    yield dg.Output(
        1,
        metadata={
            "preview": dg.MetadataValue.md(f"| query |\n| where is the {WORD} tin |"),
            "label": dg.MetadataValue.text(WORD),
            "asked": 2,
            "speakers": "Ada, messages",
        },
    )
    yield dg.AssetCheckResult(
        check_name="every_message_in_one_block",
        passed=False,
        description="1 in no block, e.g. ['q7']; notes_Ada/q7 twice",
    )


def holding(folder, needle: bytes) -> list[str]:
    """SQLite files under ``folder`` holding ``needle`` (compute logs are the text files' step)."""
    return sorted(p.name for p in folder.rglob("*") if p.is_file() and is_sqlite(p) and needle in p.read_bytes())


def test_dagster_records_lose_the_words_and_ids_and_stay_readable(tmp_path):
    home = tmp_path / "dagster"
    home.mkdir()
    with dg.DagsterInstance.local_temp(tempdir=str(home)) as instance:
        assert dg.materialize([messages], instance=instance, partition_key="notes_Ada").success
    assert holding(home, WORD.encode()) and holding(home, b"'q7'")
    # "messages" is a word of the forgotten message too: the asset's name must survive
    redactor = Redactor([], [WORD, "messages"], ids=["q7"], chat="notes_Ada")
    databases = [p for p in home.rglob("*") if p.is_file() and is_sqlite(p)]
    assert sum(redact_sqlite(p, redactor) for p in databases) >= 3
    assert holding(home, WORD.encode()) == [] and holding(home, b"'q7'") == []
    assert holding(home, b"notes_Ada/q7") == []
    with dg.DagsterInstance.local_temp(tempdir=str(home)) as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey("messages"))
        metadata = {k: v.value for k, v in event.asset_materialization.metadata.items()}
        assert metadata["label"] == MARKER and metadata["asked"] == 2
        assert metadata["preview"] == f"| query |\n| where is the {MARKER} tin |"
        assert metadata["speakers"] == f"Ada, {MARKER}"  # free text: every forgotten word goes
        assert instance.get_materialized_partitions(dg.AssetKey("messages")) == {"notes_Ada"}
        logs = [e.user_message for e in instance.all_logs(event.run_id) if "tin in" in (e.user_message or "")]
        assert logs == [f"looked for the {MARKER} tin in ['{MARKER}', 'q8']"]
        check = instance.event_log_storage.get_latest_asset_check_execution_by_key(
            [dg.AssetCheckKey(dg.AssetKey("messages"), "every_message_in_one_block")]
        )
        description = next(iter(check.values())).event.dagster_event.event_specific_data.description
        assert description == f"1 in no block, e.g. ['{MARKER}']; notes_Ada/{MARKER} twice"
