"""The command line's output for people: one printer per command with its own layout, and the
plain ``key=value`` lines of the others."""

from __future__ import annotations


def print_eval(result: dict) -> None:
    from narrative_mirror import evaluation as ev

    splits = result.get("per_split") or {result["split"]: result}
    rows = [{"split": which, "chat files": len(m["chat_files"]), "questions": m["questions"],
             **{k: m[k] for k in ev.HEADLINE_KEYS}, "arc recall": m["arc_global_recall"],
             "arc coverage": m["arc_phase_coverage"]} for which, m in splits.items() if m["questions"]]
    print(ev.markdown_table(rows))
    print(ev.markdown_table([{"split": which, **{k: m[k] for k in ev.KPI_KEYS}} for which, m in splits.items()
                             if m["questions"]]))
    for which, m in splits.items():
        if m["questions"]:
            print(f"{which}, per category:")
            print(ev.markdown_table([{"category": c, "questions": st["count"], **{k: st[k] for k in ev.HEADLINE_KEYS}}
                                     for c, st in sorted(m["per_category"].items())]))
    print(f"gold ids lost at: {result['lost_at_stage']}   (config fingerprint {result['fingerprint']})")


def print_protocol(result: dict) -> None:
    from narrative_mirror.evaluation import markdown_table

    print(markdown_table(result["profiles"]))
    gate = result["adoption_gate"] or {}
    print(f"adoption gate: {'holds' if gate.get('passed') else 'does not hold'}: {gate.get('description', '')}")


def print_answer(result: dict) -> None:
    print(f"Answer: {result['answer']}")
    print("Evidence:")
    for e in result["evidence"]:
        print(f"  [{e['id']}] {e['text']}\n      -> {e['point']}")
    print("Unknowns:" + ("" if result["unknowns"] else " none"))
    for u in result["unknowns"]:
        print(f"  - {u}")
    print(f"(route {result['route']}, profile {result['profile']}, stop: {result['stop_reason']}"
          + (f", DEGRADED: {result['degraded_reason']}" if result["degraded"] else "") + ")")


def print_phases(result: dict) -> None:
    for i, phase in enumerate(result["phases"], 1):
        print(f"{i}. {phase['name']}: {phase['summary']}\n   evidence: {', '.join(phase['evidence'])}")
    for u in result["unknowns"]:
        print(f"  unknown: {u}")


TRACE_ROWS = 20


def print_trace(result: dict) -> None:
    """The three checkpoints side by side, best first (the first TRACE_ROWS of each)."""
    stages = ("candidates", "reranked", "final")
    cell = lambda items, i: f"{items[i]['id']:<10} {items[i]['score']:.3f}" if i < len(items) else ""  # noqa: E731
    print(f"{'rank':>4} | " + " | ".join(f"{s} ({len(result[s])})".ljust(17) for s in stages))
    print("-----+-" + "-+-".join("-" * 17 for _ in stages))
    for i in range(min(TRACE_ROWS, max(len(result[s]) for s in stages))):
        print(f"{i + 1:>4} | " + " | ".join(cell(result[s], i).ljust(17) for s in stages))
    for gold_id, stage in (result.get("gold") or {}).items():
        print(f"gold {gold_id}: {stage}")
    print(f"route {result['route']}; searches:")
    for search in result["searches"]:
        print(f"  {search['kind']:<10} \"{search['query']}\": found {', '.join(search['found'][:5]) or 'nothing'}"
              + (f"; selected {', '.join(search['selected'])}" if search["selected"] else ""))


def print_experiments(result: dict) -> None:
    from narrative_mirror.evaluation import markdown_table

    keep = ("experiment_id", "time", "kind", "changed", "train/recall@10", "train/answer_f1", "test/recall@10",
            "test/answer_f1")
    print(markdown_table([{k: row.get(k) for k in keep} for row in result["latest"]]))
    print(f"{result['experiments']} experiments in {result['log']}" + (f"; exported to {result['csv']}" if result["csv"] else ""))


def print_human(command: str, result: dict) -> None:
    special = {"ask": print_answer, "arc": print_phases, "trace": print_trace, "eval": print_eval,
               "experiments": print_experiments, "protocol": print_protocol,
               "demo": print_eval}
    if command in special:
        special[command](result)
        return
    print(f"{command}: " + ", ".join(f"{k}={v}" for k, v in result.items() if not isinstance(v, (dict, list))))
    for key, row in (result.get("per_file") or {}).items():
        print(f"  {key}: " + ", ".join(f"{k}={v}" for k, v in row.items()))
