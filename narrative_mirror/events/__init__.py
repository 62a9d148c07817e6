"""Retrieval events (the retrieval-events design): what every retrieval returned, what the answer cited, and
whether the user had to ask again, kept as training data for later optimisation.

One job per module: ``record`` (the event and its checks), ``table`` (the stored
``retrieval_events`` table and reading it), ``writer`` (``EventLog``, the queued background
writer), ``follow_ups`` (linking a query to the earlier one it repeats) and ``analytics``
(statistics and training examples over stored events).
"""
