"""The agent as a LangGraph StateGraph.

    planner -> retriever -> grader -> coverage --(corrective -> retriever)*--> generator -> verification

- planner: facets and route (rules, or the LLM when configured; it only ever sees the question).
- retriever: the first search (``profile.first_search`` hits), then the route's searches: the
  sub-questions of a ``multi_hop`` question, else query variants (facet-driven offline, or LLM
  rewrites grounded on the leaf messages of that first search).
- grader: 0..1 grades (retriever scores + facet coverage offline; the LLM grader when configured).
- coverage: stop when covered (top-5 relevance and must-have hits reach the profile's
  thresholds), after two rounds in a row without new evidence, at ``max_rounds``, or when the
  call budget cannot pay for another search; otherwise the corrective step plans facet-driven
  re-searches for facets the evidence does not cover yet.
- generator: pulls the selected evidence by id and drafts claims (extractive offline, LLM
  otherwise); in arc mode it pulls the full id sets of the hit blocks and segments them into phases.
- verification: keeps the claims the evidence supports; the rest go to Unknowns.

Budgets (state.py): every search, fetch and LLM call costs one call, and a run never exceeds
``profile.max_calls``; the first LLM failure switches the rest of the run to the offline path.

State: the question's whole working memory is the graph state (``AgentState``: searches, pool,
budgets, trace lines, evidence, answer; lists appended and counts added by reducers), so a
LangGraph checkpointer keeps every step and ``stream`` shows each node as it finishes. The
resources (retriever, profile, LLM client) come with the run's config, not the state.

The nodes live in search_nodes.py, answer_nodes.py (arc mode: arc_mode.py); this module wires them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph

from narrative_mirror.agent import membership
from narrative_mirror.agent.answer_nodes import generator, verification
from narrative_mirror.agent.contract import AgentAnswer, ArcAnswer
from narrative_mirror.agent.profiles import Profile
from narrative_mirror.agent.search_nodes import corrective, coverage, grader, planner, retriever
from narrative_mirror.agent.state import AgentState, Run, Task
from narrative_mirror.llm import LLMClient


def _node(name: str, node: Callable[[AgentState, Run], dict]) -> Callable[[AgentState, RunnableConfig], dict]:
    """A graph node: ``node`` works on a Run built from the state; the Run's changes, the node's
    own control-flow update and its time go back into the state."""

    def wrapped(state: AgentState, config: RunnableConfig) -> dict:
        start = time.perf_counter()
        run = Run.from_state(state, config)
        flow = node(state, run)
        return run.update() | flow | {"timings_ms": {name: (time.perf_counter() - start) * 1000}}

    return wrapped


def _after_coverage(state: AgentState) -> str:
    return "generator" if state.get("stop_reason") else "corrective"


def build_graph(checkpointer: Any = None):
    """The compiled graph; with a LangGraph ``checkpointer`` every step's state is kept (pass a
    ``thread_id`` in the config)."""
    graph = StateGraph(AgentState)
    for name, node in (
        ("planner", planner),
        ("retriever", retriever),
        ("grader", grader),
        ("coverage", coverage),
        ("corrective", corrective),
        ("generator", generator),
        ("verification", verification),
    ):
        graph.add_node(name, _node(name, node))
    graph.add_edge(START, "planner")
    graph.add_edge("planner", "retriever")
    graph.add_edge("retriever", "grader")
    graph.add_edge("grader", "coverage")
    graph.add_conditional_edges("coverage", _after_coverage, {"corrective": "corrective", "generator": "generator"})
    graph.add_edge("corrective", "retriever")
    graph.add_edge("generator", "verification")
    graph.add_edge("verification", END)
    return graph.compile(checkpointer=checkpointer)


_GRAPH = None


def run_agent(
    retriever: Any,
    chat_file: str,
    question: str,
    profile: Profile,
    llm: LLMClient | None = None,
    task: Task = "ask",
    on_step: Callable[[str, list[str]], None] | None = None,
) -> AgentAnswer | ArcAnswer:
    """Run the graph for one question; ``task="arc"`` answers with phases. ``on_step(node,
    lines)`` is called as each node finishes, with the trace lines it wrote."""
    global _GRAPH
    # Membership questions read the group's system lines, which no search ranks (membership.py).
    home = getattr(retriever, "home", None)  # the retriever of a home's memory knows its home
    if task == "ask" and (found := membership.answer(home, chat_file, question, profile.name)) is not None:
        return found
    if _GRAPH is None:
        _GRAPH = build_graph()
    start = time.perf_counter()
    result = None
    # Each round is 5 graph steps; the rounds are bounded by the profile, not by LangGraph.
    config = {
        "configurable": {"retriever": retriever, "profile": profile, "llm": llm},
        "recursion_limit": 10 + 5 * profile.max_rounds,
    }
    for update in _GRAPH.stream(
        {"chat_file": chat_file, "question": question, "task": task}, config, stream_mode="updates"
    ):
        for node, changes in update.items():
            result = changes.get("result") or result
            if on_step:
                on_step(node, changes.get("steps", []))
    result.timings_ms["total"] = round((time.perf_counter() - start) * 1000, 3)
    return result
