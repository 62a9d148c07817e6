"""The memory layers of one chat: L1 topic blocks, L1.5 message signals, L2 threads.

config = settings.load_config("layers")
blocks = build_topic_blocks(messages, vectors, config)
signals = compute_signals(messages, blocks, config)
threads = build_threads(blocks, signals, block_vectors(blocks, messages, vectors), config)
"""

from narrative_mirror.layers.l1_topics import build_topic_blocks
from narrative_mirror.layers.l2_threads import block_vectors, build_threads
from narrative_mirror.layers.l15_signals import BLOCK_SIGNALS, block_signals, compute_signals
from narrative_mirror.layers.summarize import ExtractiveSummarizer, LLMSummarizer, Summarizer

__all__ = [
    "BLOCK_SIGNALS",
    "ExtractiveSummarizer",
    "LLMSummarizer",
    "Summarizer",
    "block_signals",
    "block_vectors",
    "build_threads",
    "build_topic_blocks",
    "compute_signals",
]
