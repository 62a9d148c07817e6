"""Checks of the ingest domain: how much of the gold evidence of a chat file could be read."""

import dagster as dg

UNRESOLVED_WARN_SHARE = 0.05  # more than 5% unresolved gold strings in a file deserves a look

GOLD_QA_CHECKS = [
    dg.AssetCheckSpec(
        "unresolved_gold_share",
        asset="gold_qa",
        description=f"At most {UNRESOLVED_WARN_SHARE:.0%} of the gold evidence parts of the chat file "
        "cannot be resolved to a message (WARN).",
    ),
    dg.AssetCheckSpec(
        "gold_oddities",
        asset="gold_qa",
        description="No question has gold evidence read with a guess or not found in the chat (WARN).",
    ),
]


def gold_oddities_check(oddities: dict[str, list[str]], questions: int) -> dg.AssetCheckResult:
    """WARN when questions have gold evidence read with a guess or not found in the chat."""
    return dg.AssetCheckResult(
        check_name="gold_oddities",
        passed=not oddities,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"questions": dg.MetadataValue.int(len(oddities)), "oddities": dg.MetadataValue.json(oddities)},
        description=f"{len(oddities)} of {questions} questions have gold evidence read with a guess or not found",
    )


def unresolved_gold_share_check(unresolved: int, raw_total: int) -> dg.AssetCheckResult:
    """WARN when more than UNRESOLVED_WARN_SHARE of the gold evidence parts could not be resolved."""
    share = unresolved / raw_total if raw_total else 0.0
    return dg.AssetCheckResult(
        check_name="unresolved_gold_share",
        passed=share <= UNRESOLVED_WARN_SHARE,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "unresolved_share": dg.MetadataValue.float(round(share, 3)),
            "unresolved": dg.MetadataValue.int(unresolved),
            "raw_evidence_strings": dg.MetadataValue.int(raw_total),
        },
        description=f"{unresolved} of {raw_total} gold evidence parts could not be resolved",
    )
