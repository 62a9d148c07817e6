"""The command line's output for people: one printer per command with its own layout, and the
plain ``key=value`` lines of the others. Every line goes out through ``_print``, and every
chat-derived field through ``_one`` (its newlines escaped too): hostile chat text stays text."""

from __future__ import annotations

import wcwidth

from narrative_mirror.reactions import reaction_words
from narrative_mirror.safe_text import terminal_safe


def _print(text: object = "") -> None:
    """Print a line or block with control and bidi characters as visible escapes."""
    print(terminal_safe(text, keep_newlines=True))


def _one(value: object) -> str:
    """One field on one line: a chat message, a question, an id."""
    return terminal_safe(value)


def print_eval(result: dict) -> None:
    from narrative_mirror import evaluation as ev

    splits = result.get("per_split") or {result["split"]: result}
    rows = [
        {
            "split": which,
            "chat files": len(m["chat_files"]),
            "questions": m["questions"],
            **{k: m[k] for k in ev.HEADLINE_KEYS},
            "arc recall": m["arc_global_recall"],
            "arc coverage": m["arc_phase_coverage"],
        }
        for which, m in splits.items()
        if m["questions"]
    ]
    _print(ev.markdown_table(rows))
    _print(
        ev.markdown_table(
            [{"split": which, **{k: m[k] for k in ev.KPI_KEYS}} for which, m in splits.items() if m["questions"]]
        )
    )
    for which, m in splits.items():
        if m["questions"]:
            _print(f"{which}, per category:")
            _print(
                ev.markdown_table(
                    [
                        {"category": c, "questions": st["count"], **{k: st[k] for k in ev.HEADLINE_KEYS}}
                        for c, st in sorted(m["per_category"].items())
                    ]
                )
            )
    _print(f"gold ids lost at: {result['lost_at_stage']}   (config fingerprint {result['fingerprint']})")


def print_protocol(result: dict) -> None:
    from narrative_mirror.evaluation import markdown_table

    _print(markdown_table(result["profiles"]))
    gate = result["adoption_gate"] or {}
    _print(f"adoption gate: {'holds' if gate.get('passed') else 'does not hold'}: {gate.get('description', '')}")


def when(timestamp: str | None) -> str:
    """A message's ISO time as people read it: ``Tue 2 Apr 2024 18:04`` (empty without one)."""
    from datetime import datetime

    if not timestamp:
        return ""
    t = datetime.fromisoformat(timestamp)
    return f"{t:%a} {t.day} {t:%b %Y %H:%M}"


def zones_note(result: dict) -> str:
    """`` (times in Europe/Lisbon)``: the zones the result's times are in, said once; empty when
    its chats record none (their times are as the file wrote them)."""
    zones = result.get("time_zones") or []
    return f" (times in {_one(' and '.join(zones))})" if zones else ""


def _message_line(lid: str, timestamp: str | None, speaker: str | None, text: str) -> str:
    """``[D1:5] Tue 2 Apr 2024 18:04  Mara: text`` (``text`` already begins with its speaker
    when ``speaker`` is None)."""
    said = f"{speaker}: {text}" if speaker else text
    return f"[{_one(lid)}] " + (f"{when(timestamp)}  " if timestamp else "") + _one(said)


def print_answer(result: dict) -> None:
    _print(f"Answer: {_one(result['answer'])}")
    _print(f"Evidence{zones_note(result)}:")
    several = "," in result.get("chat_file", "")  # an answer over several chats names each message's chat
    for e in result["evidence"]:
        lid = f"{e['chat']}/{e['id']}" if several and e.get("chat") else e["id"]
        _print(f"  {_message_line(lid, e.get('timestamp'), None, e['text'])}")
        if e.get("reactions"):
            _print("      reactions: " + "  ".join(_one(reaction_words(**r)) for r in e["reactions"]))
        _print(f"      -> {_one(e['point'])}")
    _print("Unknowns:" + ("" if result["unknowns"] else " none"))
    for u in result["unknowns"]:
        _print(f"  - {_one(u)}")
    _print(
        f"(route {result['route']}, profile {result['profile']}, stop: {result['stop_reason']}"
        + (f", DEGRADED: {_one(result['degraded_reason'])}" if result["degraded"] else "")
        + ")"
    )


def print_search(result: dict) -> None:
    _print(f"{result['count']} messages from {len(result['chats'])} chats{zones_note(result)}:")
    for h in result["hits"]:
        _print(f"  {_message_line(h['chat'] + '/' + h['id'], h.get('timestamp'), h.get('speaker'), h['text'])}")


def print_phases(result: dict) -> None:
    """Each phase: its title, then its evidence as dated messages with their authors."""
    messages = {m["id"]: m for m in result.get("evidence_messages", [])}
    if zones_note(result):
        _print(zones_note(result).strip())
    for i, phase in enumerate(result["phases"], 1):
        _print(f"{i}. {_one(phase['name'])}")
        for lid in phase["evidence"]:
            m = messages.get(lid)
            _print("   " + (_message_line(lid, m["timestamp"], m["speaker"], m["text"]) if m else f"[{_one(lid)}]"))
    for u in result["unknowns"]:
        _print(f"  unknown: {_one(u)}")


TRACE_ROWS = 20


def print_trace(result: dict) -> None:
    """The three checkpoints side by side, best first (the first TRACE_ROWS of each)."""
    stages = ("candidates", "reranked", "final")
    cell = lambda items, i: f"{_one(items[i]['id']):<10} {items[i]['score']:.3f}" if i < len(items) else ""  # noqa: E731
    _print(f"{'rank':>4} | " + " | ".join(f"{s} ({len(result[s])})".ljust(17) for s in stages))
    _print("-----+-" + "-+-".join("-" * 17 for _ in stages))
    for i in range(min(TRACE_ROWS, max(len(result[s]) for s in stages))):
        _print(f"{i + 1:>4} | " + " | ".join(cell(result[s], i).ljust(17) for s in stages))
    for gold_id, stage in (result.get("gold") or {}).items():
        _print(f"gold {_one(gold_id)}: {_one(stage)}")
    _print(f"route {result['route']}; searches:")
    for search in result["searches"]:
        _print(
            f'  {search["kind"]:<10} "{_one(search["query"])}": found {", ".join(search["found"][:5]) or "nothing"}'
            + (f"; selected {', '.join(search['selected'])}" if search["selected"] else "")
        )


def print_experiments(result: dict) -> None:
    from narrative_mirror.evaluation import markdown_table

    keep = (
        "experiment_id",
        "time",
        "kind",
        "changed",
        "train/recall@10",
        "train/answer_f1",
        "test/recall@10",
        "test/answer_f1",
    )
    _print(markdown_table([{k: row.get(k) for k in keep} for row in result["latest"]]))
    _print(
        f"{result['experiments']} experiments in {result['log']}"
        + (f"; exported to {result['csv']}" if result["csv"] else "")
    )


def print_chats(result: dict) -> None:
    """One row per chat (its key, then its own name when that says more), then the memory column's
    reasons in full; dates are in the chat's own zone."""
    rows = [("chat", "name", "participants", "messages", "questions", "dates", "memory")]
    for c in result["chats"]:
        dates = f"{c['first']} .. {c['last']}" if c["first"] else "-"
        name = c.get("name") or c["chat"]
        rows.append(
            (
                _one(c["chat"]) + (" (live)" if c.get("format") == "live" else ""),
                _one(name) if name != c["chat"] else "",
                _one(", ".join(c["participants"])) or "-",
                str(c["messages"]),
                str(c["questions"]),
                dates,
                "built" if c["built"] else "not built: " + _one(c["why_not"]),
            )
        )
    if not any(row[1] for row in rows[1:]):
        rows = [row[:1] + row[2:] for row in rows]
    numbers = {len(rows[0]) - 4, len(rows[0]) - 3}
    widths = [max(_columns(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    _print(
        f"{len(result['chats'])} chats in {_one(result['data'])}"
        + (f" (ARC cases: {_one(result['arcs'])})" if result["arcs"] else " (no ARC cases)")
    )
    for row in rows:
        padding = [" " * (w - _columns(cell)) for cell, w in zip(row, widths)]
        _print(
            "  ".join(pad + cell if i in numbers else cell + pad for i, (cell, pad) in enumerate(zip(row, padding)))
            + "  "
            + row[-1]
        )


def _columns(text: str) -> int:
    """Terminal columns ``text`` takes: an emoji or a CJK character takes two, a combining mark none."""
    width = wcwidth.wcswidth(text)
    return width if width >= 0 else len(text)


def print_serve(result: dict) -> None:
    """The line ``serve`` ends with once stopped; or what ``serve status``/``stop``/``--background`` found."""
    if "running" in result:
        if result.get("stopped"):
            _print(f"serve: stopped the server (pid {result['stopped']}) of {_one(result['home'])}")
        elif result["running"]:
            _print(
                f"serve: pid {result['pid']} serves {len(result['chats'])} chats ({_one(', '.join(result['chats']))}) "
                f"of {_one(result['data'])} on {_one(result['url'])} and {_one(result['socket'])} "
                f"since {result['since']}"
            )
        else:
            _print(f"serve: no server is running for {_one(result['home'])}")
        return
    _print(
        f"serve: stopped; it served {len(result['served'])} chat files on {result['url']}"
        + (
            f" ({len(result['not_served'])} not served: {_one(', '.join(result['not_served']))})"
            if result["not_served"]
            else ""
        )
    )


def print_build(result: dict) -> None:
    """What a build did, as a person reads it: how many chats are ready, each chat's size, and
    what this command built and how long that took (the step names are in --json)."""
    _print(
        f"{result['built']} of {result['chat_files']} chats ready in {_one(result['data'])}: "
        f"{result['messages']} messages, {result['blocks']} topic blocks, {result['threads']} threads"
    )
    for key, row in (result.get("per_file") or {}).items():
        size = f"{row['messages']} messages, {row['blocks']} topic blocks, {row['threads']} threads"
        encoded = row["encoded_messages"]
        done = (
            f"built in {sum(row['seconds'].values()):.1f} s, "
            + (f"{encoded} message{'s' * (encoded != 1)} encoded" if encoded else "nothing to encode")
            if row["ran"]
            else "up to date"
        )
        _print(f"  {_one(key)}: {size}; {done}")
    for key, why in (result.get("not_built") or {}).items():
        _print(f"  {_one(key)}: NOT BUILT: {_one(why)}")


def print_human(command: str, result: dict) -> None:
    special = {
        "build": print_build,
        "chats": print_chats,
        "serve": print_serve,
        "ask": print_answer,
        "search": print_search,
        "arc": print_phases,
        "trace": print_trace,
        "eval": print_eval,
        "experiments": print_experiments,
        "protocol": print_protocol,
        "demo": print_eval,
    }
    if command in special:
        special[command](result)
        return
    _print(f"{command}: " + ", ".join(f"{k}={_one(v)}" for k, v in result.items() if not isinstance(v, (dict, list))))
    for key, row in (result.get("per_file") or {}).items():
        _print(f"  {_one(key)}: " + ", ".join(f"{k}={_one(v)}" for k, v in row.items()))
    for line in result.get("not_reached") or []:  # forget: what it cannot reach
        _print(f"  not reached: {line}")
    for kind, row in (result.get("pruned") or {}).items():  # maintain: what retention removed
        _print(f"  pruned {kind}: " + ", ".join(f"{k}={_one(v)}" for k, v in row.items()))
