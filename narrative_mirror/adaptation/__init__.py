"""Self-supervised adaptation of the embedder to a home's chats: training pairs from the
messages only (``pairs``), the top layers trained with in-batch negatives (``training``), and
the trained layers stored under the state folder with their fingerprint (``store``)."""
