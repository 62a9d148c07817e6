"""Delivery of an alert to Slack: retried a few times with a short back-off, and a delivery
that still fails is reported (returned), never raised: a down Slack must not fail the
evaluation that found the regression (the alert log under NM_HOME has it either way)."""

from __future__ import annotations

import logging
import time

SLACK_API_URL = "https://slack.com/api/"
ATTEMPTS = 3
BACKOFF_S = 0.5  # doubled after each failed attempt: 0.5 s, 1 s

log = logging.getLogger(__name__)


def post_to_slack(
    token: str,
    channel: str,
    text: str,
    api_url: str = SLACK_API_URL,
    attempts: int = ATTEMPTS,
    backoff_s: float = BACKOFF_S,
) -> str:
    """Post ``text`` to ``channel``; "delivered", or "failed after N attempts: <last error>"."""
    from slack_sdk import WebClient

    client = WebClient(token=token, base_url=api_url, timeout=10)
    error = ""
    for attempt in range(1, attempts + 1):
        try:
            client.chat_postMessage(channel=channel, text=text)
            return "delivered"
        except Exception as exc:  # noqa: BLE001 - any failure to deliver is reported, none raised
            error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
            log.warning("slack alert attempt %d/%d failed: %s", attempt, attempts, error)
            if attempt < attempts:
                time.sleep(backoff_s * 2 ** (attempt - 1))
    return f"failed after {attempts} attempts: {error}"
