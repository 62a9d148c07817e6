"""Questions about people in a group chat, answered from authors and reply links (no LLM).

- "Who suggested the offsite in Porto?": the author of the message that matches the rest of the
  question (``author_question``). Only in chats of three or more speakers, and only for verbs of
  saying (suggested, asked, offered, ...), or for a future or ongoing act ("Who will present the
  roadmap?") said in the first person ("I will present ..."): elsewhere "who" asks for a name
  written in the messages, which the extractive answer reads.
- "What did Bruno answer to Ana about the budget?": Bruno's message that replies (reply link) to
  a message of Ana's, the pair that best matches the topic; "Who replied to Dmitri about the login
  bug?": the author of the best reply to a message of Dmitri's.

The answer's evidence is the message found with its reply context: the message it answers and
the replies to it (``linked_context`` adds the same context to any answer in a chat with links).
"""

from __future__ import annotations

import re

import numpy as np

from narrative_mirror.agent import answer as answer_mod
from narrative_mirror.agent.addressed import addresses_the_reader
from narrative_mirror.agent.planner import reply_question
from narrative_mirror.agent.state import Run
from narrative_mirror.retrieval import query_names
from narrative_mirror.retrieval.chat_index import ChatIndex

GROUP_SIZE = 3  # speakers from which "who did X" asks for the person who wrote it
_SAYING = re.compile(
    r"^(?:suggest|propos|sa(?:y|id)|mention|ask|offer|recommend|writ|wrote|post|shar|announc|volunteer|promis"
    r"|agree|complain|invit|remind|warn|pitch|insist|claim|tell|told)",
    re.I,
)
# "Who brought up the move?" asks who said it; "Who brought the gazebo?" who did it
_BRINGS_UP = re.compile(r"^\W*who\s+(?:\w+\s+)?(?:brought|bring|brings|bringing)\s+(?:\w+\s+){0,3}up\b", re.I)
_AUTHOR = re.compile(r"^\W*who\s+(?:(will|would|can|could|is|was|has|had)\s+)?([a-z]+)\b", re.I)


def author_question(question: str) -> str | None:
    """ "saying" for "who suggested/asked/offered ...", "first_person" for "who will/is
    (going to) VERB ...", else None (the question does not ask who wrote something)."""
    m = _AUTHOR.match(question)
    if not m or m.group(2).lower() in {"did", "does", "do", "of", "the", "a", "an"}:
        return None
    aux, verb = (m.group(1) or "").lower(), m.group(2).lower()
    # "Who is bringing the ball?" asks who will do it (a reply "I'll bring mine"), not who brought it up
    if aux in {"will", "would", "can", "could"} or (aux in {"is", "was"} and verb.endswith("ing")) or verb == "going":
        return "first_person"
    if _SAYING.match(verb) or _BRINGS_UP.match(question):
        return "saying"
    return None


def _topic_scores(run: Run, chat: ChatIndex, topic: str) -> np.ndarray:
    """Per message: cosine with ``topic`` plus its BM25 score relative to the chat's best."""
    qvec = run.retriever.embedder.encode([topic])[0]
    bm25 = chat.bm25.scores(topic)
    best = float(bm25.max()) if bm25.size else 0.0
    return chat.vectors @ qvec + (bm25 / best if best > 0 else bm25)


def exchange_evidence(run: Run, chat: ChatIndex, row: int, score: float) -> list[answer_mod.EvidenceMessage]:
    """The message at ``row`` first, then the message it answers, then the replies to it."""

    def item(r: int, reply_to: int) -> answer_mod.EvidenceMessage:
        hit = chat.hit(r, score, sources=["people"])
        return answer_mod.EvidenceMessage(
            hit,
            grade=1.0,
            match=run.matcher.match(hit.speaker, hit.text),
            reply_to=chat.local_ids[reply_to] if reply_to >= 0 else None,
        )

    parent = int(chat.parent_row[row])
    if parent >= 0 and addresses_the_reader(chat.raw_texts[parent]):  # data, never evidence
        parent = -1
    return [
        item(row, parent),
        *([item(parent, -1)] if parent >= 0 else []),
        *(item(r, row) for r in chat.reply_rows.get(row, []) if not addresses_the_reader(chat.raw_texts[r])),
    ]


def answer(run: Run) -> tuple[list[answer_mod.EvidenceMessage], tuple[str, list[answer_mod.Claim], list[str]]] | None:
    """(evidence, draft) for a question about who wrote or answered what; None for any other
    question, or when no message of the chat fits it (the agent's own answer is used)."""
    chat = run.retriever.chat(run.chat_file)
    persons = chat.parse(run.question).persons
    topic = query_names.without_persons(run.question, chat.speaker_names, chat.aliases) or run.question
    speakers = chat.speaker_codes
    code = {s: i for i, s in enumerate(chat.speaker_names)}
    replies = np.flatnonzero(chat.parent_row >= 0)
    parents = chat.parent_row[replies]
    replying = reply_question(run.question)
    if replying and re.match(r"\W*who\b", run.question, re.I) and persons:
        rows = replies[(speakers[parents] == code[persons[0]]) & (speakers[replies] != code[persons[0]])]
        kind = "who_replied"
    elif replying and len(persons) >= 2:
        rows = replies[(speakers[replies] == code[persons[0]]) & (speakers[parents] == code[persons[1]])]
        kind = "what_replied"
    elif len(chat.speaker_names) >= GROUP_SIZE and (how := author_question(run.question)):
        # A question suggests nothing ("Who is presenting?"), unless the question is who asked.
        keep = (
            np.ones(chat.size, dtype=bool)
            if re.search(r"\bask", run.question, re.I)
            else np.array([not t.rstrip().endswith("?") for t in chat.raw_texts])
        )
        rows = np.flatnonzero(keep & (chat.first_person > 0) if how == "first_person" else keep)
        kind = "author"
    else:
        return None
    if rows.size == 0:
        return None
    scores = _topic_scores(run, chat, topic)
    if kind == "author":
        pair = scores[rows]
    else:
        pair = scores[rows] + scores[chat.parent_row[rows]]
    best = int(rows[int(np.argmax(pair))])
    evidence = exchange_evidence(run, chat, best, float(pair.max()))
    cited = [best] if kind == "author" else [best, int(chat.parent_row[best])]
    ids = [chat.local_ids[r] for r in cited]
    if kind == "what_replied":
        claim = answer_mod.Claim(chat.raw_texts[best], ids, kind="phrase", sentence=chat.raw_texts[best])
    else:
        claim = answer_mod.Claim(chat.speakers[best], ids, kind="author")
    run.step(f"people: {kind} -> {chat.local_ids[best]} by {chat.speakers[best]}")
    return evidence, (claim.text, [claim], [])


def linked_context(run: Run) -> list[answer_mod.EvidenceMessage]:
    """In a chat with reply links: the message each of the best evidence messages answers and
    the replies to it, not in the evidence yet, within the evidence budget (no call: the chat
    is in memory)."""
    chat = run.retriever.chat(run.chat_file)
    if not chat.reply_rows:
        return []
    have = {e.message.local_id for e in run.evidence}
    added: list[answer_mod.EvidenceMessage] = []
    room = run.profile.max_evidence_fetches - len(run.evidence)
    for e in run.evidence[: answer_mod.LOOK_AT]:
        row = chat.row_of.get(e.message.local_id)
        for r in chat.linked_rows(row) if row is not None else []:
            if chat.local_ids[r] in have or len(added) >= room:
                continue
            have.add(chat.local_ids[r])
            hit = chat.hit(r, 0.0, sources=["reply link"])
            answers = chat.local_ids[int(chat.parent_row[r])] if chat.parent_row[r] >= 0 else None
            added.append(
                answer_mod.EvidenceMessage(
                    hit, grade=e.grade, match=run.matcher.match(hit.speaker, hit.text), reply_to=answers
                )
            )
    return added
