"""Generator (the question's slot read from the evidence offline, or the LLM) and verification.

Every answer is a list of claims, each citing evidence ids; a claim the checks do not support
goes to Unknowns instead of the answer (seed 002: never fill gaps by guessing), and with no
supported claim the answer says the chat does not tell. The checks (``verify``):
- offline, always: the cited ids are evidence; the claim is in its cited message (an extracted
  span as written, a date as resolved from it; an LLM claim by most of its words); it has what
  the question asks for (a date for "when", a place for "where", a name for "who", a count for
  "how many"); some evidence message mentions what the question is about (one of its topic
  terms, the words of its form aside, or a person or thing it names besides the speakers); and
  the cited message is about the question (the embedder's similarity >= RELEVANCE_MIN);
- with an LLM, Chain-of-Verification on top (``llm_verify``): per claim a verification question,
  answered from the cited messages only; a claim whose answer does not support it fails.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel

from narrative_mirror.agent import countries, dates, list_items, slot_nouns, slots
from narrative_mirror.agent.config import module_settings, setting
from narrative_mirror.agent.grading import FacetMatch
from narrative_mirror.agent.text import names_in, stem, stems
from narrative_mirror.llm import DATA_BLOCK_NOTICE, LLMClient, MessageId, format_messages_as_data
from narrative_mirror.retrieval.records import ChatMessage
from narrative_mirror.settings import load_prompt

# [answer] support_min: share of an LLM claim's content words in its cited messages. relevance_min:
# cosine (MiniLM) between the question and the message a claim cites, below which the message is
# not about the question; low on purpose: it must not cost answers.
NO_ANSWER = "Not found in this chat."
# Words of a question's form, not of what it is about ("how long", "how many times", "what kind of").
# "Where is Paola planning to go?" asks where, not about plans: a message naming the place says "going".
QUESTION_FORM = {
    stem(w)
    for w in (
        "long",
        "times",
        "time",
        "kind",
        "type",
        "sort",
        "much",
        "many",
        "often",
        "plan",
        "plans",
        "planned",
        "planning",
    )
}
# Question types whose slot is read in all the evidence when the best LOOK_AT messages lack it.
READ_FURTHER = ("how_many", "where", "who", "yes_no")
# [answer] look_at: the offline answer reads the best this many evidence messages. list_messages: a
# question asking for several things is answered from each of the best this many.


def offline_verifier() -> str:
    return f"offline: claim in its cited message, the question's slot filled, relevance >= {setting('answer', 'relevance_min')}"


def llm_verifier() -> str:
    return "LLM chain-of-verification + " + offline_verifier()


__getattr__ = module_settings(
    __name__,
    {
        "SUPPORT_MIN": lambda: setting("answer", "support_min"),
        "RELEVANCE_MIN": lambda: setting("answer", "relevance_min"),
        "LOOK_AT": lambda: setting("answer", "look_at"),
        "LIST_MESSAGES": lambda: setting("answer", "list_messages"),
        "OFFLINE_VERIFIER": offline_verifier,
        "LLM_VERIFIER": llm_verifier,
    },
)


@dataclass
class EvidenceMessage:
    """A chat message chosen as evidence, with how the agent judged it."""

    message: ChatMessage
    grade: float
    match: FacetMatch
    reply_to: str | None = None  # the evidence message (a question) this one answers
    continues: str | None = None  # the evidence message this one goes on from (same speaker, next message)
    # When the message's day began (a RealTalk "D" number is a day, and its late replies, past
    # midnight, still say "today" of it): the date its relative dates are read against.
    day: datetime | None = None

    @property
    def said(self) -> ChatMessage:
        """The message as its dates are read: dated by its day when that is known."""
        return replace(self.message, timestamp=self.day) if self.day else self.message


@dataclass
class Claim:
    text: str
    ids: list[str] = field(default_factory=list)
    kind: str = "llm"  # how it was made: a slot kind (date, place, name, quantity, yes_no, phrase) or "llm"
    sentence: str = ""  # the evidence sentence an extracted claim was read in
    # Read from an exchange (agent/conversation.py), whose reader checked that the cited messages
    # are about the question's words: the all-evidence topic check is not asked again.
    exchange: bool = False


def offline_answer(
    question: str,
    intent: str,
    evidence: Sequence[EvidenceMessage],
    entities: Sequence[str] = (),
    speakers: Sequence[str] = (),
) -> tuple[str, list[Claim], list[str]]:
    """(answer, claims, unknowns) read from the evidence: the span that fills the question's slot,
    read in the best ``LOOK_AT`` messages, each followed by its continuation when it has one."""
    if countries.asks_for_country(question) and (claims := _country_claims(question, evidence, speakers)):
        return ", ".join(c.text for c in claims), claims, []
    if slot_nouns.asks_for_list(question, intent) and (
        claims := _title_claims(question, evidence)
        or _place_claims(question, intent, evidence, speakers)
        or _list_claims(question, intent, evidence, entities, speakers)
    ):
        return "; ".join(c.text for c in claims), claims, []
    if intent == "what" and list_items.asks_for_titles(question) and (title := _first_title(evidence)):
        return title.text, [title], []
    read = reading_order(evidence)
    slot = slots.answer_slot(question, intent, read, entities=entities, speakers=speakers, look_at=len(read))
    if slot is None and intent in READ_FURTHER:  # a count or a place further down the evidence
        read = reading_order(evidence, len(evidence))
        slot = slots.answer_slot(question, intent, read, entities=entities, speakers=speakers, look_at=len(read))
    if slot is None:
        wanted = slot_nouns.asked_kind(question, intent) or intent
        return NO_ANSWER, [], [f"No evidence message holds what the question asks for ({wanted})"]
    return slot.text, [Claim(slot.text, [slot.local_id], kind=slot.kind, sentence=slot.sentence)], []


def _list_claims(
    question: str, intent: str, evidence: Sequence[EvidenceMessage], entities: Sequence[str], speakers: Sequence[str]
) -> list[Claim]:
    """One claim per each of the best ``LIST_MESSAGES`` messages (read with its continuation)
    that fills the question's slot, repeated spans and phrases of questions left out: "What drinks
    does he like?" gathers what each message names."""
    claims: list[Claim] = []
    read = reading_order(evidence, setting("answer", "list_messages"))
    groups: list[list[ChatMessage]] = []
    continuing = {e.message.local_id for e in evidence if e.continues}
    for message in read:
        if message.local_id in continuing and groups:
            groups[-1].append(message)
        else:
            groups.append([message])
    for group in groups:
        slot = slots.answer_slot(question, intent, group, entities=entities, speakers=speakers, look_at=len(group))
        asking = slot and slot.kind == "phrase" and slot.sentence.rstrip().endswith("?")  # "what do you drink?"
        if not slot or asking:
            continue
        if all(slot.text.lower() != c.text.lower() for c in claims):
            claims.append(Claim(slot.text, [slot.local_id], kind=slot.kind, sentence=slot.sentence))
    return claims


def _place_claims(
    question: str, intent: str, evidence: Sequence[EvidenceMessage], speakers: Sequence[str]
) -> list[Claim]:
    """A "where" question asking for every place ("Where has Emi traveled?"): the places of the
    gazetteer each of the best ``LIST_MESSAGES`` messages names, as written, one claim per message."""
    if intent != "where":
        return []
    known = {place.lower() for place, _ in countries.countries_in(question)} | {s.lower() for s in speakers}
    claims: list[Claim] = []
    for message in reading_order(evidence, setting("answer", "list_messages")):
        places = [
            p
            for p in dict.fromkeys(place for place, _ in countries.countries_in(_statements(message.text)))
            if p.lower() not in known
        ]
        if places:
            known |= {p.lower() for p in places}
            claims.append(Claim(", ".join(places), [message.local_id], kind="names", sentence=message.text))
    return claims


def _country_claims(question: str, evidence: Sequence[EvidenceMessage], speakers: Sequence[str]) -> list[Claim]:
    """A question asking for a country: the countries of the places the evidence names (the
    first message naming one; for "countries", each of the best ``LIST_MESSAGES``), those the
    question names left out ("What countries except the US ...")."""
    seen = {country for _, country in countries.countries_in(question)}
    people = {s.lower() for s in speakers}
    plural = countries.asks_for_countries(question)
    claims: list[Claim] = []
    for message in reading_order(evidence, setting("answer", "list_messages") if plural else len(evidence)):
        named = [
            c
            for place, c in countries.countries_in(_statements(message.text))
            if place.lower() not in people and c not in seen
        ]
        named = list(dict.fromkeys(named))
        if named:
            seen |= set(named)
            claims.append(
                Claim(
                    ", ".join(named if plural else named[:1]), [message.local_id], kind="country", sentence=message.text
                )
            )
            if not plural:
                break
    return claims


def _statements(text: str) -> str:
    """The sentences of ``text`` that are no questions: "What city in Albania are you from?" says
    nothing of where its writer is."""
    return " ".join(s for s in slots.sentences(text) if not s.endswith("?"))


def _title_claims(question: str, evidence: Sequence[EvidenceMessage]) -> list[Claim]:
    """A question asking for shows, films or books: the titles each evidence message writes in
    quotes (all of them, best first: nothing fitted), one claim per message, a title said before left out."""
    if not list_items.asks_for_titles(question):
        return []
    claims: list[Claim] = []
    seen: set[str] = set()
    for message in reading_order(evidence, len(evidence)):
        new = [t for t in list_items.titles(message.text) if t.split(" by ")[0].lower() not in seen]
        seen |= {t.split(" by ")[0].lower() for t in new}
        if new:  # checked word by word: 'Becoming by Michelle Obama' is written '"Becoming" by Michelle Obama'
            claims.append(Claim(", ".join(new), [message.local_id], kind="title", sentence=message.text))
    return claims


def _first_title(evidence: Sequence[EvidenceMessage]) -> Claim | None:
    """A question asking for one show, film or book: the first title in quotes of the best
    ``LOOK_AT`` messages ("What book is Emi reading on 21.01.2024?")."""
    for message in reading_order(evidence):
        if found := list_items.titles(message.text):
            return Claim(found[0], [message.local_id], kind="title", sentence=message.text)
    return None


def reading_order(evidence: Sequence[EvidenceMessage], look_at: int | None = None) -> list[ChatMessage]:
    """The best ``look_at`` (LOOK_AT when not given) evidence messages (continuations aside), each
    followed by its continuation."""
    look_at = setting("answer", "look_at") if look_at is None else look_at
    after: dict[str, list[ChatMessage]] = {}
    for e in evidence:
        if e.continues:
            after.setdefault(e.continues, []).append(e.said)
    primary = [e.said for e in evidence if not e.continues][:look_at]
    return [m for message in primary for m in [message, *after.get(message.local_id, [])]]


def support(claim: Claim, cited_texts: Sequence[str]) -> float:
    """Share of the claim's content word stems found in the cited messages (1.0 if it has none)."""
    wanted = stems(re.sub(r"\[[^\]]*\]", " ", claim.text))
    if not wanted:
        return 1.0
    have = set().union(*(stems(t) for t in cited_texts)) if cited_texts else set()
    return len(wanted & have) / len(wanted)


def _in_evidence(claim: Claim, cited: Sequence[EvidenceMessage]) -> bool:
    """An extracted claim is found in its cited message as it was read; an LLM claim by its words."""
    messages = [e.said for e in cited]
    if claim.kind == "llm":
        return support(claim, [f"{m.speaker}: {m.text}" for m in messages]) >= setting("answer", "support_min")
    if claim.kind == "date":
        return any(
            dates.resolve_date(claim.sentence, m.timestamp) == claim.text
            or (m.timestamp and dates.fmt_day(m.timestamp) == claim.text)
            for m in messages
        )
    if claim.kind == "names":  # "Miami, Los Angeles": each name in the cited message
        return all(any(name.lower() in m.text.lower() for m in messages) for name in claim.text.split(", "))
    if claim.kind == "author":  # who wrote it (agent/people.py)
        return any(m.speaker == claim.text for m in messages)
    if claim.kind == "country":  # the countries of places the message names
        return any(set(claim.text.split(", ")) <= {c for _, c in countries.countries_in(m.text)} for m in messages)
    if claim.kind == "title":  # a quoted title, the author named after it
        return any(list_items.words_in_order(claim.text, m.text) for m in messages)
    if claim.kind == "split":  # "about 42 each (250 split 6 ways)": the total and the count in the message
        numbers = re.findall(r"\d+(?:\.\d+)?", claim.text.split("(", 1)[-1])
        return any(all(re.search(rf"(?<![\d.]){re.escape(n)}(?![\d])", m.text) for n in numbers) for m in messages)
    if claim.kind == "yes_no":
        return any(claim.sentence in m.text for m in messages)
    if claim.kind == "home":  # "at Omar's place" from Omar's "I can host at mine"
        return any(
            claim.sentence in m.text and slots.home_place(claim.sentence, m.speaker) == claim.text for m in messages
        )
    return any(claim.text.lower() in m.text.lower() for m in messages)


def _about_topic(evidence: Mapping[str, EvidenceMessage], topic: Collection[str], subjects: Collection[str]) -> bool:
    """Whether some evidence message mentions one of the question's topic terms (the words of its
    form aside: "how long", "what kind of") or one of the people or things it names."""
    return any(e.match.artifact_terms - QUESTION_FORM for e in evidence.values()) or any(
        names_in(subjects, "", e.message.text) for e in evidence.values()
    )


def cites_what_it_is_about(
    claim: Claim, evidence: Mapping[str, EvidenceMessage], topic: Collection[str] = (), subjects: Collection[str] = ()
) -> bool:
    """Whether the claim's own cited messages, with the questions they answer, are about what the
    question asks (one of its topic terms or the people and things it names): when none of an
    answer's claims is, the answer quotes its best message (agent/quoting.py)."""
    cited = {i: evidence[i] for i in claim.ids if i in evidence}
    cited |= {e.reply_to: evidence[e.reply_to] for e in list(cited.values()) if e.reply_to in evidence}
    topic = [t for t in topic if stem(t) not in QUESTION_FORM]
    return bool(cited) and (not topic and not subjects or _about_topic(cited, topic, subjects))


# Another person's evidence message this many positions before a cited one is what it reacts to:
# "That's the beach right in front of it" states what is in front of the house booked just before.
CONTEXT_BEFORE = 3


def states_what_is_asked(
    claim: Claim, evidence: Mapping[str, EvidenceMessage], topic: Collection[str] = (), subjects: Collection[str] = ()
) -> bool:
    """Whether the claim's own cited messages, read with what they answer (the message they reply
    to or go on from, another person's evidence message just before), mention every topic term of
    the question (the words of its form aside), or, when it has none, one of the people and things
    it names. A message about the question's subject but not about what is asked of it ("I booked
    the house in Lagos" for "What is in front of the house in Lagos?") is evidence, not the answer."""
    cited = [evidence[i] for i in claim.ids if i in evidence]
    asked = {stem(t) for t in topic} - QUESTION_FORM
    if not cited or not asked and not subjects:
        return bool(cited)
    linked = {c.reply_to for c in cited} | {c.continues for c in cited}
    read = cited + [
        e
        for e in evidence.values()
        if e.message.local_id in linked
        or any(
            e.message.speaker != c.message.speaker and 0 < c.message.position - e.message.position <= CONTEXT_BEFORE
            for c in cited
        )
    ]
    if asked:
        return asked <= set().union(*(e.match.artifact_terms for e in read))
    return any(names_in(subjects, "", e.message.text) for e in read)


def verify(
    claims: Sequence[Claim],
    evidence: Mapping[str, EvidenceMessage],
    intent: str,
    relevance: Mapping[str, float],
    topic: Collection[str] = (),
    subjects: Collection[str] = (),
) -> tuple[list[Claim], list[str]]:
    """(verified claims, reasons for each claim that could not be verified); ``relevance`` maps an
    evidence id to its similarity with the question, ``topic`` is what the question asks about
    (its artifact terms): when no evidence message mentions any of them, the search found
    something else and no claim is verified (all the evidence, not each claim's own cited
    messages: docs/decisions.md); ``subjects``: the people or things the question names, its
    chat's speakers aside."""
    verified: list[Claim] = []
    topic = [t for t in topic if stem(t) not in QUESTION_FORM]
    problems: list[str] = []
    for claim in claims:
        unknown_ids = [i for i in claim.ids if i not in evidence]
        cited = [evidence[i] for i in claim.ids if i in evidence]
        if not claim.ids:
            problems.append(f"Unverified (cites no evidence): {claim.text}")
        elif unknown_ids:
            problems.append(f"Unverified (cites {unknown_ids}, not in the evidence): {claim.text}")
        elif not _in_evidence(claim, cited):
            problems.append(f"Unverified (not what {claim.ids} says): {claim.text}")
        elif claim.kind != "author" and not slots.required_slot_filled(intent, claim.text):  # "sunita.k" wrote it
            problems.append(f"Unverified (does not give what a {intent!r} question asks for): {claim.text}")
        elif topic and not claim.exchange and not _about_topic(evidence, topic, subjects):
            problems.append(f"Unverified (no evidence message mentions {', '.join(topic)}): {claim.text}")
        elif (best := max(relevance.get(i, 0.0) for i in claim.ids)) < setting("answer", "relevance_min"):
            problems.append(f"Unverified ({claim.ids} not about the question: similarity {best:.2f}): {claim.text}")
        else:
            verified.append(claim)
    return verified, problems


def check_claims(
    claims: Sequence[Claim],
    evidence: Mapping[str, EvidenceMessage],
    intent: str,
    relevance: Mapping[str, float],
    topic: Collection[str] = (),
    subjects: Collection[str] = (),
    llm_check: Callable[[list[Claim]], list[str | None] | None] | None = None,
) -> tuple[list[Claim], list[str | None], str]:
    """(verified claims, per claim None or why it failed, which verifier ran): the offline checks,
    then ``llm_check`` (``llm_verify``; None back = the LLM is not available) on what passed them."""
    verified, problems = verify(claims, evidence, intent, relevance, topic, subjects)
    failed = iter(problems)
    notes: list[str | None] = [None if c in verified else next(failed) for c in claims]
    checked = llm_check(verified) if llm_check and verified else None
    if checked is None:
        return verified, notes, offline_verifier()
    for claim, note in zip(verified, checked):
        if note:
            notes[claims.index(claim)] = f"Unverified (LLM check: {note}): {claim.text}"
    return [c for c, note in zip(verified, checked) if not note], notes, llm_verifier()


class ClaimReply(BaseModel):
    text: str
    ids: list[MessageId] = []


class GenerateReply(BaseModel):
    answer: str
    claims: list[ClaimReply]
    unknowns: list[Any] = []  # strings kept; anything else is dropped, not fatal


def llm_claims(
    llm: LLMClient, question: str, evidence: Sequence[EvidenceMessage]
) -> tuple[str, list[Claim], list[str]]:
    """(answer, claims, unknowns) written by the LLM from the evidence only."""
    system = load_prompt("agent_generator") + "\n" + DATA_BLOCK_NOTICE
    rows = [(e.message.local_id, e.message.speaker, e.message.text) for e in evidence]
    user = f"Question: {question}\n\nEvidence messages:\n{format_messages_as_data(rows)}"
    reply = llm.complete_json(system, user, GenerateReply)
    claims = [Claim(item.text.strip(), list(item.ids)) for item in reply.claims]
    unknowns = [u for u in reply.unknowns if isinstance(u, str) and u.strip()]
    return reply.answer.strip(), claims, unknowns


class CheckReply(BaseModel):
    claim: int
    question: str = ""
    answer: str = ""
    verdict: Literal["supported", "contradicted", "not_stated"]


class VerifyReply(BaseModel):
    checks: list[CheckReply]


def llm_verify(
    llm: LLMClient, question: str, claims: Sequence[Claim], evidence: Mapping[str, EvidenceMessage]
) -> list[str | None]:
    """Chain-of-Verification: per claim, None when the LLM's check of its cited messages supports
    it, else why not. A claim the reply leaves out is not supported."""
    cited = {i for c in claims for i in c.ids if i in evidence}
    messages = {i: evidence[i].message for i in cited}
    rows = [(i, messages[i].speaker, messages[i].text) for i in sorted(cited, key=lambda i: messages[i].position)]
    listed = "\n".join(f"{n}. {c.text} (cites {', '.join(c.ids)})" for n, c in enumerate(claims, 1))
    user = f"Question: {question}\n\nClaims:\n{listed}\n\nCited messages:\n{format_messages_as_data(rows)}"
    reply = llm.complete_json(load_prompt("agent_verifier") + "\n" + DATA_BLOCK_NOTICE, user, VerifyReply)
    checks = {c.claim: c for c in reply.checks}
    out: list[str | None] = []
    for n in range(1, len(claims) + 1):
        check = checks.get(n)
        if check is None:
            out.append("the verifier did not check it")
        elif check.verdict != "supported":
            out.append(f"{check.verdict}: {check.question} -> {check.answer}".strip())
        else:
            out.append(None)
    return out
