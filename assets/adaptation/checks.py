"""Check of the adapted embedder, yielded by it: training lowered the in-batch loss on the
held-out slice of pairs (an adaptation that does not is not better than the shipped model)."""

from __future__ import annotations

import dagster as dg

ADAPTATION_CHECK_SPECS = [
    dg.AssetCheckSpec(
        "held_out_loss_fell",
        asset="adapted_embedder",
        description="The current adaptation's held-out pair loss after training is below the shipped model's.",
    )
]


def held_out_loss_fell(adaptation) -> dg.AssetCheckResult:
    if adaptation is None:
        return dg.AssetCheckResult(check_name="held_out_loss_fell", passed=True, description="adaptation off")
    losses = adaptation.meta["report"]["held_out_loss"]
    before, best = losses[0], min(losses[1:], default=losses[0])
    if before != before:  # too few pairs to hold any out
        return dg.AssetCheckResult(
            check_name="held_out_loss_fell", passed=True, description="too few pairs for a held-out slice"
        )
    return dg.AssetCheckResult(
        check_name="held_out_loss_fell",
        passed=best < before,
        severity=dg.AssetCheckSeverity.WARN,
        description=f"held-out loss {before:.4f} -> {best:.4f}",
        metadata={"before": before, "after": best},
    )
