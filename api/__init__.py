"""The memory HTTP API (the memory-API design), a FastAPI app over one retriever, outside the domain library:

- ``GET /api/memory/search?q=...&chat=...&k=5&need_fresh=0|1&halflife_days=7&fresh_weight=0.9&self_rag=0|1``
  (optional ``user_id``, ``session_id``) -> ``{hits, meta, evidence_path}``; every call writes a
  recall-run record (``evidence_path``, relative to NM_HOME: ``recall_runs/YYYYMMDD/run_<ms>.json``)
  and a retrieval event (``meta.event_id``). No response carries a server path.
- ``POST /api/ask`` with JSON ``{chat, question, profile?, mode?, user_id?, session_id?}`` ->
  the agent answer contract (``AgentAnswer`` by alias); the event id is in the
  ``X-Retrieval-Event-Id`` header. The agent's evidence ids are the event's cited ids.
- ``GET /api/health`` -> ``{status: "ok"|"degraded", chats: [...], unavailable: {chat: reason}}``:
  the chats served and those that failed to build (``create_app(unavailable=...)``: such a chat
  is not served, even from an older index: its requests get 503). Health and the chat checks of
  every request answer from memory (``store_state``: read again when the store changes).

Requests are validated by pydantic models (``SearchQuery``, ``AskRequest``); errors are JSON
``{"error": {"field", "message"}}`` with 400 (bad value or type, unknown or repeated parameter,
a body cut short by the client), 401 (no or unknown token), 403 (chat outside the token's scope;
an open API's request with a non-loopback ``Host``), 404 (unknown chat), 413 (body larger than
16 KiB), 415 (a POST body that is not ``application/json``), 429 (a client past its ask limits,
with ``Retry-After``), 503 (chat whose build failed; a token file that is missing, unreadable or
invalid right now; an offline ask past its deadline, with ``Retry-After``). No error body names a chat.

Bulkheads: searches run in their own thread pool, asks without the LLM (and the offline answer
of an ask) in another, the LLM-calling ask work in a bounded pool (``llm_workers`` threads, at
most ``llm_queue`` waiting). Every ask with an LLM has a total deadline, its profile's
``deadline_s`` (``deadlines`` overrides), counted from the request's arrival: if the LLM answer
is not there by then, or the pool is full at arrival, the request returns the offline answer
(``ask_logged`` with ``llm=None``) marked ``degraded`` with the reason. The offline answer is
started ``offline_reserve_s`` before the deadline so it is ready in time; the LLM calls of the
ask end by the same deadline, so a hung LLM frees its worker when the request gives up on it. Exactly one retrieval
event is logged per ask: the one of the answer returned (a late LLM answer is dropped). An ask
without an LLM that is not done by its deadline gets 503 and stops at its next step. Per client
(token; open API: address) at most ``AskLimits.running`` asks work and ``queued`` wait; more get
429 at once (``limits``). An ask whose client hangs up stops at its next step, or never starts
(``stopping``). ``serve`` warms up before it accepts a connection (``readiness``) and closes
connections that send a request too slowly or idle too long (``connections``).

Access: with a token store (``api.access.load_tokens``) every endpoint needs
``Authorization: Bearer <token>`` and sees only the chats of the token's scope (403 for any other
chat, existing or not); the store fails closed while its file cannot be used. Without one the API
is open, for this machine's pages only: ``serve`` refuses a non-loopback bind address and
``api.guard`` a non-loopback ``Host`` (DNS rebinding). Always: JSON bodies only, no CORS, and
``nosniff``, a content policy, no referrer and a same-origin resource policy on every response.

One job per module: ``requests`` (request models, checks, error shape), ``bulkhead`` (the LLM
pool and the deadline / late-drop rule), ``service`` (the endpoints), ``app`` (``create_app``,
``check_host``, ``serve``), ``guard`` (what every request and response passes through),
``access`` (the token store), ``limits`` (per-client ask slots), ``stopping`` (stopping an ask
at its next step), ``store_state`` (the in-memory index reading), ``connections`` (slow-client
timeouts), ``readiness`` (the warm-up).
"""
