"""The command line, the HTTP API and the benchmarks reach the library's assembly (retriever, event
log, LLM client, live memory, the questions over them) only through ``Memory``: an AST walk over
their files lists every name they import from ``narrative_mirror``. A benchmark that measures one
component rather than what a person gets from a memory is named in ``COMPONENT_BENCHMARKS``."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CALLERS = ("cli", "api", "benchmarks")
# Benchmarks that measure one part of the assembly, so they build that part themselves: what each measures.
COMPONENT_BENCHMARKS = {
    "across_chats.py": "the cross-chat merge rules against each other",
    "adapted_embedder.py": "fine-tuning the embedder and the fusion fitted on it",
    "answers.py": "the answer step alone, over evidence captured from the agent graph",
    "api_bulkhead.py": "the API's bulkheads with a given LLM server and event log",
    "build_layers.py": "the texts the layers embed",
    "common.py": "the helpers the component benchmarks share (an index from vectors, the embedder)",
    "embedding_backends.py": "the embedder's backends",
    "embedding_pipeline.py": "the ONNX embedder against torch",
    "hard_questions.py": "retrieval configurations against each other",
    "live_forget.py": "forgetting over a large live log",
    "live_memory.py": "live adds as serve wires them, against a bare encode",
    "retrieval_variants.py": "the retrieval variants against each other",
    "rewrite_ablation.py": "the query rewriter",
    "scale.py": "the texts the layers embed, at scale",
    "scale_queries.py": "a retriever's cold load and queries at scale",
    "seed003_traversal.py": "the traversal study's variants",
    "train_fusion.py": "fitting the learned fusion",
}

# The modules that assemble and run a memory: callers get them through Memory.
ASSEMBLY = (
    "narrative_mirror.assembly",
    "narrative_mirror.retrieval",
    "narrative_mirror.events.writer",
    "narrative_mirror.llm",
    "narrative_mirror.live.memory",
    "narrative_mirror.live.forget",
    "narrative_mirror.logged_query",
    "narrative_mirror.query",
    "narrative_mirror.across_chats",
    "narrative_mirror.recall_runs",
    "narrative_mirror.index_store",
    "narrative_mirror.embedding",
    "narrative_mirror.onnx_embedding",
    "narrative_mirror.agent.graph",
)
# Plain data types, constants, validators and errors of those modules, which callers may name.
PLAIN = {
    "narrative_mirror.query:MODES",
    "narrative_mirror.retrieval.config:VARIANTS",
    "narrative_mirror.index_store:validate_chat_file",
    "narrative_mirror.across_chats:MergedSearch",
    "narrative_mirror.across_chats:NoChatMatches",
    "narrative_mirror.across_chats:DEFAULT_MERGE",
    "narrative_mirror.across_chats:searched_label",
    "narrative_mirror.live.memory:FileBackedChat",
    "narrative_mirror.live.forget:Selection",
    "narrative_mirror.recall_runs:compare_run",
}


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imported_names(source: str) -> list[str]:
    """``module:name`` (or ``module`` for ``import module``) of every import from narrative_mirror
    outside ``if TYPE_CHECKING:`` blocks (annotations are not calls)."""
    tree = ast.parse(source)
    hidden = {id(n) for block in ast.walk(tree) if _type_checking(block) for n in ast.walk(block)}
    names = []
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "narrative_mirror":
            for alias in node.names:  # `from narrative_mirror import query` names the module query
                names.append(
                    f"narrative_mirror.{alias.name}"
                    if node.module == "narrative_mirror"
                    else f"{node.module}:{alias.name}"
                )
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names if alias.name.split(".")[0] == "narrative_mirror"]
    return names


def reaches_assembly(name: str) -> bool:
    module = name.split(":")[0]
    return name not in PLAIN and any(module == m or module.startswith(m + ".") for m in ASSEMBLY)


def test_the_walk_sees_assembly_imports_and_skips_annotations():
    source = (
        "from typing import TYPE_CHECKING\nfrom narrative_mirror import Memory, query\n"
        "from narrative_mirror.retrieval.engine import Retriever\nimport narrative_mirror.llm\n"
        "from narrative_mirror.query import MODES\n"
        "if TYPE_CHECKING:\n    from narrative_mirror.events.writer import EventLog\n"
        "def f():\n    from narrative_mirror.logged_query import ask_logged\n"
    )
    found = [name for name in imported_names(source) if reaches_assembly(name)]
    assert sorted(found) == [
        "narrative_mirror.llm",
        "narrative_mirror.logged_query:ask_logged",
        "narrative_mirror.query",
        "narrative_mirror.retrieval.engine:Retriever",
    ]


def test_callers_reach_the_assembly_only_through_memory():
    found = {
        f"{path.relative_to(ROOT).as_posix()}: {name}"
        for folder in CALLERS
        for path in sorted((ROOT / folder).rglob("*.py"))
        if not (folder == "benchmarks" and path.name in COMPONENT_BENCHMARKS)
        for name in imported_names(path.read_text(encoding="utf-8"))
        if reaches_assembly(name)
    }
    assert not found, "go through narrative_mirror.Memory instead:\n" + "\n".join(sorted(found))


def test_each_component_benchmark_exists_and_reaches_the_assembly():
    """The list holds no name left behind by a move or a benchmark that now goes through Memory."""
    for name in COMPONENT_BENCHMARKS:
        path = ROOT / "benchmarks" / name
        assert path.is_file(), name
        assert any(map(reaches_assembly, imported_names(path.read_text(encoding="utf-8")))), name


def test_the_library_exports_memory_without_loading_its_parts():
    import subprocess
    import sys

    code = (
        "import sys\nfrom narrative_mirror import Home, Memory\n"
        "print(sorted(m for m in ('dagster', 'lancedb', 'torch', 'langgraph') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"
