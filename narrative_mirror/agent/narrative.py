"""Narrative (arc) mode: segment evidence into chronological phases (segment_narrative).

Selection is coverage-oriented (design decision 6 of seed 000): the story keeps its
``STORY_IDS`` best-scored messages plus the best of every pulled block, and each phase takes those
of its blocks, between ``MIN_IDS`` and ``MAX_IDS`` ids, chosen from the FULL id sets of the blocks
(``retriever.search_blocks`` returns them), never from a preview. ``MAX_IDS`` is a soft cap for
the LLM's picks (seed 000): coverage first (each block's best), then every id the LLM tied to the
phase's blocks, up to ``SOFT_MAX_IDS``, with the reason stated on the phase. Scores come from the messages'
ranks in the question's search, comparable across blocks.

Offline, phases are time-ordered clusters of the pulled blocks: consecutive blocks (by position)
stay in one phase unless more than ``PHASE_GAP`` passes between them; with more than
``MAX_PHASES`` clusters the two closest in time merge first. The LLM path sees a preview of each
block for content plus its complete id list, and its output is held to the same bounds.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from pydantic import BaseModel

from narrative_mirror.agent.config import module_settings, setting
from narrative_mirror.agent.contract import Phase
from narrative_mirror.agent.text import content_tokens, stem
from narrative_mirror.layers.text import truncate
from narrative_mirror.llm import DATA_BLOCK_NOTICE, LLMClient, LLMError, MessageId, format_messages_as_data
from narrative_mirror.retrieval.records import ChatMessage
from narrative_mirror.settings import load_prompt


# agent.toml's [narrative], read when used. story_ids: the best-scored messages a story keeps
# (before each block's best is added): more ids raise recall, spread over more phases. preview:
# messages per block shown to the LLM beside the full id list.
def _narrative(key: str):
    return setting("narrative", key)


def _phase_gap() -> timedelta:
    return timedelta(hours=_narrative("phase_gap_hours"))


__getattr__ = module_settings(
    __name__,
    {
        "MIN_IDS": lambda: _narrative("min_ids"),
        "MAX_IDS": lambda: _narrative("max_ids"),
        "SOFT_MAX_IDS": lambda: _narrative("soft_max_ids"),
        "MAX_PHASES": lambda: _narrative("max_phases"),
        "PHASE_GAP": _phase_gap,
        "STORY_IDS": lambda: _narrative("story_ids"),
        "PREVIEW": lambda: _narrative("preview"),
    },
)


@dataclass
class Block:
    block_id: str
    members: list[ChatMessage]  # ALL messages of the block, file order

    @property
    def first_position(self) -> int:
        return self.members[0].position

    @property
    def start(self) -> datetime | None:
        return self.members[0].timestamp

    @property
    def end(self) -> datetime | None:
        return self.members[-1].timestamp


def group_blocks(
    blocks: Sequence[Block], gap: timedelta | None = None, max_phases: int | None = None
) -> list[list[Block]]:
    """Time-ordered clusters of blocks (see module doc); every cluster holds >= MIN_IDS ids
    unless all blocks together hold fewer. ``gap`` and ``max_phases``: PHASE_GAP and MAX_PHASES
    when not given."""
    gap = _phase_gap() if gap is None else gap
    max_phases = _narrative("max_phases") if max_phases is None else max_phases
    min_ids = _narrative("min_ids")
    ordered = sorted(blocks, key=lambda b: b.first_position)
    groups: list[list[Block]] = []
    for block in ordered:
        if groups and not _apart(groups[-1][-1], block, gap):
            groups[-1].append(block)
        else:
            groups.append([block])
    while len(groups) > max_phases:
        i = min(range(len(groups) - 1), key=lambda j: _gap(groups[j][-1], groups[j + 1][0]))
        groups[i : i + 2] = [groups[i] + groups[i + 1]]
    # A cluster too small for MIN_IDS joins the neighbour closest in time.
    while len(groups) > 1:
        small = [i for i, g in enumerate(groups) if sum(len(b.members) for b in g) < min_ids]
        if not small:
            break
        i = small[0]
        if i == 0:
            j = 1
        elif i == len(groups) - 1:
            j = i - 1
        else:
            j = i - 1 if _gap(groups[i - 1][-1], groups[i][0]) <= _gap(groups[i][-1], groups[i + 1][0]) else i + 1
        lo, hi = sorted((i, j))
        groups[lo : hi + 1] = [groups[lo] + groups[hi]]
    return groups


def _gap(a: Block, b: Block) -> timedelta:
    if a.end is None or b.start is None:
        return timedelta(0)
    return abs(b.start - a.end)


def _apart(a: Block, b: Block, gap: timedelta) -> bool:
    return _gap(a, b) > gap


def story_ids(blocks: Sequence[Block], scores: Mapping[str, float], n: int | None = None) -> list[str]:
    """The ``n`` (STORY_IDS when not given) best-scored ids of ``blocks`` (ties: file order)."""
    n = _narrative("story_ids") if n is None else n
    members = sorted((m for b in blocks for m in b.members), key=lambda m: (-scores.get(m.local_id, 0.0), m.position))
    return [m.local_id for m in members[:n]]


def select_phase_ids(
    group: Sequence[Block],
    scores: Mapping[str, float],
    chosen: Sequence[str],
    exclude: set[str] | None = None,
    soft_max: int | None = None,
) -> list[str]:
    """Ids of one phase, file order: those of ``chosen`` (the story's best, or the LLM's picks)
    in the group, plus the best id of each block not yet represented, padded with the next best
    ids to MIN_IDS and cut to MAX_IDS by score (keeping one per block while room allows). With
    ``soft_max`` over MAX_IDS (the LLM's picks), every id of ``chosen`` stays, up to ``soft_max``:
    each block's best first, then the chosen ids by score. Ids in ``exclude`` (taken by an
    earlier phase) are never picked."""
    min_ids, max_ids = _narrative("min_ids"), _narrative("max_ids")
    soft_max = max_ids if soft_max is None else soft_max
    exclude = exclude or set()
    members = [m for b in group for m in b.members if m.local_id not in exclude]
    position = {m.local_id: m.position for m in members}
    score = lambda lid: scores.get(lid, 0.0)  # noqa: E731
    picked = [lid for lid in chosen if lid in position]
    per_block_best = []
    for block in group:
        ids = [m.local_id for m in block.members if m.local_id not in exclude]
        if not ids:
            continue
        # The block's representative: its best picked id, else its best id (then picked too).
        mine = [lid for lid in ids if lid in set(picked)] or ids
        best = max(mine, key=lambda lid: (score(lid), -position[lid]))
        per_block_best.append(best)
        if best not in picked:
            picked.append(best)
    picked = list(dict.fromkeys(picked))
    if len(picked) < min_ids:
        rest = sorted(
            (m.local_id for m in members if m.local_id not in picked), key=lambda lid: (-score(lid), position[lid])
        )
        picked += rest[: min_ids - len(picked)]
    cap = max(max_ids, min(soft_max, len((set(chosen) | set(per_block_best)) & set(picked))))
    if len(picked) > cap:
        keep = [lid for lid in per_block_best if lid in picked][:cap]
        others = sorted((lid for lid in picked if lid not in keep), key=lambda lid: (-score(lid), position[lid]))
        picked = keep + others[: cap - len(keep)]
    return sorted(picked, key=lambda lid: position[lid])


def over_cap_reason(ids: Sequence[str], blocks: int) -> str | None:
    """Why a phase holds more ids than MAX_IDS (None when it does not)."""
    max_ids = _narrative("max_ids")
    if len(ids) <= max_ids:
        return None
    return (
        f"{len(ids)} ids, over the soft cap of {max_ids}: the segmenter tied them all to the {blocks} "
        f"block(s) this phase covers (kept up to {_narrative('soft_max_ids')}, coverage first)"
    )


TITLE_CHARS = 72  # a phase title: one sentence, cut at a word
# A sentence ends at . ! ? (not after a title: "Dr. Brandt") or a line break.
_SENTENCE_END = re.compile(r"(?<=[.!?])(?<!Dr\.)(?<!Mr\.)(?<!Ms\.)(?<!Mrs\.)(?<!St\.)\s+|\n+")


def describe(
    members: Sequence[ChatMessage], scores: Mapping[str, float], exclude_words: Sequence[str]
) -> tuple[str, str]:
    """Offline (name, summary): the phase's date and, in its own words, the sentence of its
    messages that holds most of its recurring new terms; its best message."""
    excluded = {stem(w.lower()) for w in exclude_words}
    counts: Counter[str] = Counter()
    for m in members:
        counts.update({t for t in content_tokens(m.text) if stem(t) not in excluded})
    first = members[0].timestamp
    date = f"{first.day} {first:%b %Y}" if first else f"from {members[0].local_id}"
    best = max(members, key=lambda m: (scores.get(m.local_id, 0.0), -m.position))
    title = _title_sentence(members, counts, scores)
    name = f"{date}: {title}" if title else date
    return name, truncate(f"{best.speaker}: {best.text}", 200)


def _title_sentence(members: Sequence[ChatMessage], counts: Mapping[str, int], scores: Mapping[str, float]) -> str:
    """The sentence (of 3 words or more) whose content words recur most in the phase (ties: the
    better-scored message, then the earlier one), cut to TITLE_CHARS; "" when none."""
    candidates = []
    for m in members:
        for order, sentence in enumerate(_SENTENCE_END.split(m.text)):
            if len(sentence.split()) < 3:
                continue
            weight = sum(max(counts[t] - 1, 0) for t in set(content_tokens(sentence)))
            candidates.append((-weight, -scores.get(m.local_id, 0.0), m.position, order, sentence))
    return truncate(min(candidates)[-1], TITLE_CHARS) if candidates else ""


def segment_offline(
    blocks: Sequence[Block], scores: Mapping[str, float], question_words: Sequence[str], story_size: int | None = None
) -> list[Phase]:
    phases = []
    best = story_ids(blocks, scores, story_size)
    for group in group_blocks(blocks):
        ids = select_phase_ids(group, scores, best)
        by_id = {m.local_id: m for b in group for m in b.members}
        name, summary = describe([by_id[i] for i in ids], scores, question_words)
        phases.append(Phase(name=name, summary=summary, evidence=ids))
    return phases


class PhaseReply(BaseModel):
    name: str | None = None
    summary: str | None = None
    evidence: list[MessageId]


class SegmentReply(BaseModel):
    phases: list[PhaseReply]


def segment_llm(llm: LLMClient, question: str, blocks: Sequence[Block], scores: Mapping[str, float]) -> list[Phase]:
    """Phases written by the LLM, held to the bounds: ids outside the blocks are dropped, an id
    keeps its first phase only, each phase is padded/cut with ``select_phase_ids`` over the
    blocks it touches, and phases are ordered by their first message."""
    ordered = sorted(blocks, key=lambda b: b.first_position)
    outline, preview_rows = [], []
    for block in ordered:
        when = f"{block.start:%Y-%m-%d %H:%M}" if block.start else "?"
        outline.append(
            f"- block {block.block_id} (starts {when}), all_message_ids: {[m.local_id for m in block.members]}"
        )
        best = sorted(block.members, key=lambda m: (-scores.get(m.local_id, 0.0), m.position))[: _narrative("preview")]
        preview_rows += [(m.local_id, m.speaker, m.text) for m in sorted(best, key=lambda m: m.position)]
    system = (
        load_prompt("agent_segment")
        .replace("{min_ids}", str(_narrative("min_ids")))
        .replace("{max_ids}", str(_narrative("max_ids")))
    )
    user = (
        f"Question: {question}\n\nBlocks in time order:\n"
        + "\n".join(outline)
        + f"\n\nPreview messages of the blocks:\n{format_messages_as_data(preview_rows)}"
    )
    reply = llm.complete_json(system + "\n" + DATA_BLOCK_NOTICE, user, SegmentReply)
    block_of = {m.local_id: b for b in ordered for m in b.members}
    used: set[str] = set()
    phases: list[tuple[int, Phase]] = []
    for item in reply.phases:
        ids = [i for i in item.evidence if i in block_of and i not in used]
        if not ids:
            continue
        touched = list({id(block_of[i]): block_of[i] for i in ids}.values())
        ids = select_phase_ids(touched, scores, chosen=ids, exclude=used, soft_max=_narrative("soft_max_ids"))
        used.update(ids)
        by_id = {m.local_id: m for b in touched for m in b.members}
        name = (item.name or "").strip() or describe([by_id[i] for i in ids], scores, [])[0]
        summary = (item.summary or "").strip() or describe([by_id[i] for i in ids], scores, [])[1]
        phases.append(
            (
                by_id[ids[0]].position,
                Phase(
                    name=truncate(name, 80),
                    summary=truncate(summary, 300),
                    evidence=ids,
                    over_cap_reason=over_cap_reason(ids, len(touched)),
                ),
            )
        )
    if not phases:
        raise LLMError("malformed", "segmenter returned no phase with known evidence ids")
    ordered_phases = [p for _, p in sorted(phases, key=lambda item: item[0])]
    return merge_short(ordered_phases, {m.local_id: m.position for b in ordered for m in b.members}, scores)


def merge_short(phases: list[Phase], position: Mapping[str, int], scores: Mapping[str, float]) -> list[Phase]:
    """A phase left with fewer than MIN_IDS ids (its blocks ran out) joins the previous phase
    (the next one if it is first); a merged phase over MAX_IDS keeps its best-scored ids."""
    min_ids = _narrative("min_ids")
    out: list[Phase] = []
    for phase in phases:
        if out and len(phase.evidence) < min_ids:
            out[-1] = _joined(out[-1], phase, position, scores)
        elif out and len(out[-1].evidence) < min_ids:
            out[-1] = _joined(out[-1], phase, position, scores, keep_second_name=True)
        else:
            out.append(phase)
    return out


def _joined(
    a: Phase, b: Phase, position: Mapping[str, int], scores: Mapping[str, float], keep_second_name: bool = False
) -> Phase:
    ids = a.evidence + b.evidence
    # A part already over the soft cap keeps the soft bound; otherwise the cap is MAX_IDS.
    cap = _narrative("soft_max_ids") if (a.over_cap_reason or b.over_cap_reason) else _narrative("max_ids")
    if len(ids) > cap:
        ids = sorted(ids, key=lambda lid: (-scores.get(lid, 0.0), position[lid]))[:cap]
    named = b if keep_second_name else a
    reason = over_cap_reason(ids, 0) and (a.over_cap_reason or b.over_cap_reason)
    if reason:
        reason = f"{len(ids)} ids after joining a short phase; " + reason.split(": ", 1)[1]
    return Phase(
        name=named.name,
        summary=named.summary,
        evidence=sorted(ids, key=lambda lid: position[lid]),
        over_cap_reason=reason,
    )
