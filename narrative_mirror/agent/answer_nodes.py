"""The agent's answer nodes: generator (pulls the selected evidence by id and drafts claims,
extractive offline or by the LLM; arc mode builds its phases instead) and verification (keeps
the claims the evidence supports, the rest go to Unknowns)."""

from __future__ import annotations

import re

from narrative_mirror.agent import answer as answer_mod
from narrative_mirror.agent import conversation, exchanges, people, quoting, slot_nouns, slots
from narrative_mirror.agent.addressed import addresses_the_reader, flagged_notes
from narrative_mirror.agent.arc_mode import build_arc
from narrative_mirror.agent.contract import AgentAnswer, ClaimCheck, EvidenceItem, ReactionItem
from narrative_mirror.agent.result import run_info
from narrative_mirror.agent.state import AgentState, Run
from narrative_mirror.agent.text import names_in, stem, written_words


def generator(state: AgentState, run: Run) -> dict:
    if run.task == "arc":
        build_arc(state, run)
        return {}
    # The answer reads the evidence in order: best grade first.
    chosen = sorted(run.select(run.profile.max_evidence_fetches), key=lambda p: -p.grade)
    run.selection = [p.hit.local_id for p in chosen]
    for search in run.searches:
        search.selected = [i for i in search.found if i in run.selection]
    ranking = run.ranking_scores()
    run.selection_scores = {p.hit.local_id: ranking[p.hit.local_id] for p in chosen}
    stored = {}
    if run.selection and run.can_call(final=True):
        run.calls += 1
        run.fetches += len(run.selection)
        stored = {h.local_id: h for h in run.retriever.messages(run.chat_file, run.selection)}
    run.evidence = [
        answer_mod.EvidenceMessage(stored.get(p.hit.local_id) or p.hit, grade=p.grade, match=p.match) for p in chosen
    ]
    drafted = None
    if not run.llm_active and conversation.reads_first(run.question, run.facets.intent):
        drafted = _conversation_answer(run)  # who did it: the doer in the evidence's conversation
    if drafted is not None:
        pass
    elif found := people.answer(run):  # who wrote / who answered whom, from authors and reply links
        run.evidence, drafted = found
    elif run.evidence:
        drafted = run.ask_llm(
            "generator", lambda: answer_mod.llm_claims(run.llm, run.question, run.evidence), final=True
        )
    if drafted is None:
        if continued := _continuations(run):
            run.evidence = _after_their_messages(run.evidence, continued)
            run.step(f"generator: continuations {[e.message.local_id for e in continued]} read with their messages")
        drafted = (
            not conversation.reads_first(run.question, run.facets.intent)
            and _conversation_answer(run)
            or _offline_answer(run, run.evidence)
        )
        if not drafted[1] and not drafted[2] and (replies := _replies(run)):
            run.evidence += replies
            drafted = _offline_answer(run, replies)
            run.step(f"generator: replies {[e.message.local_id for e in replies]} to the questions in the evidence")
    run.draft = _moved_place(run, drafted)
    run.evidence += people.linked_context(run)  # the messages they answer and their replies
    run.step(f"generator: {len(run.evidence)} evidence messages, {len(drafted[1])} claims")
    return {}


# "at the big Tesco Extra", "to 14 Carlton Road"; not "at 7am"
_A_PLACE = re.compile(r"\b(?:at|to|in|outside|near|by)\s+(?:the\s+|a\s+)?(?:[a-z]+\s+){0,2}(?:\d+\s+)?[A-Z]")
# A message saying the place changed, not one that only mentions a move or asks "what about ..."
_MOVES_IT = re.compile(r"\b(?:instead|change of plans?|moved? (?:it |us |the \w+ )?to|we're now|now at)\b", re.I)
_WHEN_WORDS = re.compile(
    r"\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|morning|afternoon|evening|night|weekend)\b", re.I
)


def _moved_place(run: Run, drafted: tuple[str, list[answer_mod.Claim], list[str]]):
    """A where-answer's place as a later message changed it ("CHANGE OF PLAN for Friday ... meet
    at the Archway Arms" after "meet at Bath Spa station"; "gate C not B"): the place of the last
    such message, cited with the first; the draft unchanged when none moves it."""
    _, claims, unknowns = drafted
    if run.facets.intent != "where" or len(claims) != 1 or claims[0].kind not in ("place", "home"):
        return drafted
    chat = run.retriever.chat(run.chat_file)
    row = chat.row_of.get(claims[0].ids[0])
    if row is None:
        return drafted
    about = exchanges.topic_stems(run.question, chat)
    entities, speakers = run.retriever.names(run.chat_file)
    moves = [
        r
        for r in exchanges.later_changes(chat, row, about, lambda t: bool(_A_PLACE.search(t)))
        if _MOVES_IT.search(chat.raw_texts[r]) or exchanges.negates(chat.raw_texts[r], chat.raw_texts[row])
    ]
    for later in reversed(moves):
        hit = chat.hit(later, 0.0, sources=["conversation"])
        slot = slots.answer_slot(run.question, "where", [hit], entities=entities, speakers=speakers, look_at=1)
        if (
            slot is None
            or slot.kind != "place"
            or slot.text == claims[0].text
            or not re.search(r"\b[A-Z]", slot.text)  # a named place, not "on my hair"
            or _WHEN_WORDS.search(slot.text)
        ):
            continue
        run.evidence.insert(
            0,
            answer_mod.EvidenceMessage(
                hit,
                grade=run.evidence[0].grade if run.evidence else 0.0,
                match=run.matcher.match(hit.speaker, hit.text),
            ),
        )
        run.step(f"generator: the place moved later: {slot.text} ({hit.local_id})")
        moved = answer_mod.Claim(slot.text, [hit.local_id, *claims[0].ids], kind="place", sentence=slot.sentence)
        return slot.text, [moved], unknowns
    return drafted


def _offline_answer(
    run: Run, evidence: list[answer_mod.EvidenceMessage]
) -> tuple[str, list[answer_mod.Claim], list[str]]:
    entities, speakers = run.retriever.names(run.chat_file)
    if run.facets.intent == "when":
        _date_by_day(run, evidence)
    return answer_mod.offline_answer(run.question, run.facets.intent, evidence, entities=entities, speakers=speakers)


def _conversation_answer(run: Run) -> tuple[str, list[answer_mod.Claim], list[str]] | None:
    """The answer read from the conversation around the evidence (agent/conversation.py), the
    message it cites put first in the evidence; None when that reader has none."""
    found = conversation.answer(run, run.evidence)
    if found is None:
        return None
    text, claims, unknowns, rows = found
    chat = run.retriever.chat(run.chat_file)
    if claims and claims[0].kind == "yes_no":
        # a verdict from a message the verification will find off the question: the
        # single-message answer reads the evidence instead
        said = chat.hit(rows[0], 0.0)
        question, message = run.retriever.embedder.encode([run.question, f"{said.speaker}: {said.text}"])
        if float(question @ message) < answer_mod.RELEVANCE_MIN:
            return None
    if claims and claims[0].kind in (
        "author",
        "name",
    ):  # a person: the message with its exchange, as people.py shows it
        shown = people.exchange_evidence(run, chat, rows[0], 1.0)
        have = {e.message.local_id for e in shown}
        run.evidence = shown + [
            e
            for r in rows[1:]
            if chat.local_ids[r] not in have
            for e in people.exchange_evidence(run, chat, r, 1.0)[:1]
        ]
        run.step(f"generator: read from the conversation: {claims[0].text} ({claims[0].kind})")
        return text, claims, unknowns
    cited = {chat.local_ids[r] for r in rows}
    first = [e for e in run.evidence if e.message.local_id in cited]
    grade = run.evidence[0].grade if run.evidence else 0.0
    for row in rows:
        if chat.local_ids[row] not in {e.message.local_id for e in first}:
            hit = chat.hit(row, 0.0, sources=["conversation"])
            first.append(answer_mod.EvidenceMessage(hit, grade=grade, match=run.matcher.match(hit.speaker, hit.text)))
    rest = [e for e in run.evidence if e.message.local_id not in cited]
    run.evidence = (first + rest)[: max(run.profile.max_evidence_fetches, len(first))]
    run.step(f"generator: read from the conversation: {[c.text for c in claims] or unknowns}")
    return text, claims, unknowns


ABSTENTION_BEST = 1  # an abstention lists this many of the search's best hits, on topic or not
_DAY_ID = re.compile(r"^(D\d+):(\d+)$")


def _date_by_day(run: Run, evidence: list[answer_mod.EvidenceMessage]) -> None:
    """Sets each evidence message's ``day`` to the time of its day's first message ("D15:24" is
    of day 15, which began with "D15:1"): a day's late replies, written past midnight, still say
    "today" of it. One lookup call, no evidence fetched; ids of another form keep their own time."""
    first = {e.message.local_id: f"{m.group(1)}:1" for e in evidence if (m := _DAY_ID.match(e.message.local_id))}
    wanted = sorted(set(first.values()) - {e.message.local_id for e in evidence})
    if not first or (wanted and not run.can_call(final=True)):
        return
    known = {e.message.local_id: e.message for e in evidence}
    if wanted:
        run.calls += 1
        try:
            known.update((h.local_id, h) for h in run.retriever.messages(run.chat_file, wanted))
        except ValueError:  # a chat whose days do not start at ":1"
            return
    for e in evidence:
        start = known.get(first.get(e.message.local_id, ""))
        e.day = start.timestamp if start is not None else None


# A message that only makes sense with the one before it: a pronoun or a connective first.
_GOES_ON = re.compile(
    r"^\W*(?:he|she|they|it|his|her|their|them|this|that|these|those|and|but|also|so|then|both)\b", re.I
)


def _continuations(run: Run) -> list[answer_mod.EvidenceMessage]:
    """The next message of the same speaker after each of the best evidence messages, when it
    goes on from it ("He named the parrots Quasar and Nimbus." after "My neighbour Zebulon bought
    two parrots."). Within the evidence budget; one lookup call."""
    have = {e.message.local_id for e in run.evidence}
    best = [e for e in run.evidence if not e.reply_to][: answer_mod.LOOK_AT]
    following = run.retriever.continuations(
        run.chat_file,
        [e.message.local_id for e in best],
        keep=lambda text: bool(_GOES_ON.search(text)) and not addresses_the_reader(text),
    )
    wanted = {nxt: lid for lid, nxt in following.items() if nxt not in have}
    ids = list(wanted)[: max(0, run.profile.max_evidence_fetches - len(run.evidence))]
    if not ids or not run.can_call(final=True):
        return []
    run.calls += 1
    run.fetches += len(ids)
    grades = {e.message.local_id: e.grade for e in run.evidence}
    return [
        answer_mod.EvidenceMessage(
            hit,
            grade=grades[wanted[hit.local_id]],
            match=run.matcher.match(hit.speaker, hit.text),
            continues=wanted[hit.local_id],
        )
        for hit in run.retriever.messages(run.chat_file, ids)
    ]


def _after_their_messages(
    evidence: list[answer_mod.EvidenceMessage], continued: list[answer_mod.EvidenceMessage]
) -> list[answer_mod.EvidenceMessage]:
    out = []
    for e in evidence:
        out += [e, *(c for c in continued if c.continues == e.message.local_id)]
    return out


def _replies(run: Run, look_at: int = 3) -> list[answer_mod.EvidenceMessage]:
    """The next message (other speaker, same session) after each of the best evidence messages
    that asks a question: "where do you run?" is answered by the reply, which shares few words
    with the user's question. Within the evidence budget; one lookup call."""
    have = {e.message.local_id for e in run.evidence}
    asking = [e for e in run.evidence[:look_at] if "?" in e.message.text]
    reply_of = run.retriever.replies(run.chat_file, [e.message.local_id for e in asking])
    wanted: dict[str, answer_mod.EvidenceMessage] = {}
    for e in asking:
        if e.message.local_id in reply_of:
            wanted.setdefault(reply_of[e.message.local_id], e)
    room = run.profile.max_evidence_fetches - len(run.evidence)
    ids = [i for i in wanted if i not in have][: max(0, room)]
    if not ids or not run.can_call(final=True):
        return []
    run.calls += 1
    run.fetches += len(ids)
    replies = []
    for hit in run.retriever.messages(run.chat_file, ids):
        if addresses_the_reader(hit.text):
            continue
        asked = wanted[hit.local_id]
        replies.append(
            answer_mod.EvidenceMessage(
                hit, grade=asked.grade, match=run.matcher.match(hit.speaker, hit.text), reply_to=asked.message.local_id
            )
        )
    return replies


def _relevance(run: Run, claims: list[answer_mod.Claim]) -> dict[str, float]:
    """Similarity of the question with each evidence message a claim cites (the embedder's)."""
    by_id = {e.message.local_id: e.message for e in run.evidence}
    cited = sorted({i for c in claims for i in c.ids if i in by_id})
    if not cited:
        return {}
    vectors = run.retriever.embedder.encode([run.question] + [f"{by_id[i].speaker}: {by_id[i].text}" for i in cited])
    return {i: float(v @ vectors[0]) for i, v in zip(cited, vectors[1:])}


def verification(state: AgentState, run: Run) -> dict:
    if run.task == "arc":
        return {}
    text, claims, llm_unknowns = run.draft
    evidence = {e.message.local_id: e for e in run.evidence}
    subjects = _subjects(run)
    verified, notes, verifier = answer_mod.check_claims(
        claims,
        evidence,
        run.facets.intent,
        _relevance(run, claims),
        run.facets.artifact,
        subjects,
        llm_check=lambda kept: run.ask_llm(
            "verifier", lambda: answer_mod.llm_verify(run.llm, run.question, kept, evidence), final=True
        ),
    )
    noun = slot_nouns.asked_noun(run.question)
    if not run.llm_active and noun and (unnamed := _not_the_thing_asked(run, noun, verified, evidence)):
        # "Which team won the quiz?" is not answered by "8 rounds from the rugby club quiz"
        verified = [c for c in verified if c not in unnamed]
        notes = [
            f"Unverified (its message names no {noun}): {c.text}" if c in unnamed else n for c, n in zip(claims, notes)
        ]
    problems = [note for note in notes if note]
    stated = [
        note is None and answer_mod.states_what_is_asked(c, evidence, run.facets.artifact, subjects)
        for c, note in zip(claims, notes)
    ]
    kept = [c for c, note in zip(claims, notes) if note is None]
    about = [answer_mod.cites_what_it_is_about(c, evidence, run.facets.artifact, subjects) for c in kept]
    # offline only: an LLM's claims are sentences written to answer, checked by its verifier, not fragments
    misfit = quoting.answers_another_kind(verified, run.question, run.retriever.chat(run.chat_file))
    quoted = (
        quoting.QUOTE_WHEN_UNSURE
        and not run.llm_active
        and (quoting.unsure(len(claims), len(verified), about) or misfit)
    )
    shown = quoting.best_quoted(kept, evidence, values=not misfit) if quoted else None
    # Of the claims answering a question that asks for one thing, those whose messages state what
    # is asked answer; the others are words of messages about something else found beside them. A
    # question asking for several things ("What sports does Kevin play?") is answered item by item
    # by messages that need not repeat its words ("club soccer on Sundays").
    several = slot_nouns.asks_for_several(run.question)
    answering = [] if several else [c for c, s in zip(claims, stated) if s and c in verified]
    if shown:
        final_text = shown
        run.step("verification: unsure (a claim dropped or none about the question): the best message quoted")
    elif answering and len(answering) < len(verified):
        final_text = "; ".join(c.text for c in answering)
    elif verified and len(verified) == len(claims):
        final_text = text
    elif verified:
        final_text = " ".join(c.text for c in verified)
    else:
        final_text = answer_mod.NO_ANSWER
    if verified and not shown and (edited := quoting.edited_source(verified, evidence)):
        final_text += f" ({edited} edited that message)"
    unknowns = (
        problems
        + llm_unknowns
        + _coverage_unknowns(run, state)
        + flagged_notes(run.ranked(), run.profile.max_evidence_fetches)
    )
    # Best first; a story reads in time order.
    ordered = sorted(run.evidence, key=lambda e: e.message.position) if run.route == "global" else run.evidence
    if not verified and run.facets.artifact:
        # An abstention lists the messages about what was asked, and the search's best hit: the
        # evidence recall of a false abstention is kept (without it, exact recall .572 -> .548 on train).
        best = run.evidence[:ABSTENTION_BEST]
        ordered = [
            e
            for e in ordered
            if any(e is b for b in best) or e.match.artifact_terms or names_in(subjects, "", e.message.text)
        ]
    items = [
        EvidenceItem(
            id=e.message.local_id,
            text=f"{e.message.speaker}: {e.message.text}",
            point=_point(e, run),
            speaker=e.message.speaker,
            timestamp=e.message.timestamp,
            edited=e.message.edited,
            reactions=[ReactionItem(emoji=r.emoji, people=list(r.people), count=r.count) for r in e.message.reactions],
        )
        for e in ordered
    ]
    run.step(f"verification ({verifier}): {len(verified)}/{len(claims)} claims verified")
    run.result = AgentAnswer(
        Answer=final_text,
        Evidence=items,
        Unknowns=unknowns,
        **run_info(run, state),
        claims=[
            ClaimCheck(text=c.text, ids=c.ids, supported=note is None, note=note, verified=stated_it)
            for c, note, stated_it in zip(claims, notes, stated)
        ],
        verifier=verifier,
        abstained=not verified,
    )
    return {}


_A_NAME = re.compile(r"(?:[A-Z][\w'’&.-]*|of|the|and)(?:\s+(?:[A-Z][\w'’&.-]*|of|the|and))*")


def _not_the_thing_asked(run: Run, noun: str, claims: list[answer_mod.Claim], evidence: dict) -> list[answer_mod.Claim]:
    """Of the claims answering a "which/what <noun>" question that asks for one named thing or a
    size ("Which team won?", "What song did we close with?", "What size T-shirt?"), those whose
    cited messages neither name the noun nor a word for the same thing; a name is an answer of its
    own ("Which country ...?" - "Morocco"). Other nouns stay open: "What activity relaxes them?" is
    answered by "doing yoga", which names no activity."""
    if noun not in slot_nouns.NAMED_KINDS | {"size"} or noun.endswith("s") or slot_nouns.asks_for_several(run.question):
        return []
    wanted = exchanges.word_stem(noun)
    out = []
    for claim in claims:
        if _A_NAME.fullmatch(claim.text.strip()):
            continue
        texts = [evidence[i].message.text for i in claim.ids if i in evidence]
        if texts and not any(wanted in exchanges.word_stems(t) for t in texts):
            if not exchanges.said_in_other_words(noun, texts, run.retriever.embedder.encode):
                out.append(claim)
    return out


def _subjects(run: Run) -> list[str]:
    """The people and things the question names, the chat's speakers aside."""
    speakers = {s.lower() for s in run.retriever.names(run.chat_file)[1]}
    return [t for t in run.facets.target if t.lower() not in speakers]


def _point(e: answer_mod.EvidenceMessage, run: Run) -> str:
    parts = [f"reply to {e.reply_to}"] if e.reply_to else [f"goes on from {e.continues}"] if e.continues else []
    if e.message.edited:
        parts.append("edited: the edited text is what was said")
    # What the message itself holds: its own words for the question's terms, the people it names.
    if words := written_words(e.message.text, e.match.artifact_terms):
        parts.append(f"mentions {', '.join(words)}")
    if people := names_in(dict.fromkeys([*run.facets.target, *run.persons]), e.message.speaker, e.message.text):
        parts.append(f"involves {', '.join(people)}")
    parts.append(f"grade {e.grade:.2f}")
    return "; ".join(parts)


def _coverage_unknowns(run: Run, state: AgentState) -> list[str]:
    out = []
    if state.get("stop_reason") != "coverage_met" and run.pool:
        top5, must = run.coverage.get("top5_relevance", 0.0), run.coverage.get("must_have_hits", 0)
        short = (
            [f"top-5 relevance {top5:.2f} < {run.profile.min_top5_relevance}"]
            if top5 < run.profile.min_top5_relevance
            else []
        )
        short += (
            [f"must-have hits {must} < {run.profile.min_must_have_hits}"]
            if must < run.profile.min_must_have_hits
            else []
        )
        out.append(f"Evidence may be incomplete ({state.get('stop_reason')}): {', '.join(short)}")
    covered = set().union(*(e.match.artifact_terms for e in run.evidence)) if run.evidence else set()
    missing = [a for a in run.facets.artifact if stem(a) not in covered]
    if missing and run.evidence:
        out.append(f"No selected evidence mentions: {', '.join(missing)}")
    return out
