"""The command line's side of the integrity check (assets/integrity.py): the check and the repair
preparation over a ``Runner``'s instance, state, index store and asset graph, saying what it
does on the runner's progress lines."""

from __future__ import annotations

from collections.abc import Sequence

from assets.integrity import INDEX_ASSET, Finding, recorded_rows
from assets.integrity import check as check_outputs
from assets.integrity import prepare as prepare_repairs

__all__ = ["Finding", "check", "prepare", "recorded_rows"]


def _store(runner, selection: Sequence[str]):
    return runner.resource("lancedb").get() if INDEX_ASSET in selection else None


def check(runner, chats: Sequence[str], selection: Sequence[str], full: bool = False) -> list[Finding]:
    """What is damaged among ``selection``'s outputs of ``chats`` (``assets.integrity.check``)."""
    return check_outputs(runner.instance, runner.state, _store(runner, selection), chats, selection, full=full)


def prepare(runner, findings: list[Finding], selection: Sequence[str], keys: Sequence[str]) -> dict[str, list[str]]:
    """Set damaged outputs aside and say so; what to run again: {chat: asset names}."""
    return prepare_repairs(
        findings,
        instance=runner.instance,
        state=runner.state,
        store=_store(runner, selection),
        graph=runner.defs.resolve_asset_graph(),
        selection=selection,
        keys=keys,
        say=runner.progress,
    )
