"""One retry policy for calls to the servers the pipeline depends on (object store, Elasticsearch), on tenacity.

Exponential back-off from ``backoff`` seconds, doubled per attempt up to
``max_delay``, optionally jittered (half to all of the delay, so that many
workers do not retry in step), at most ``retries`` retries, and only for errors
``transient`` accepts; each retry is logged with what was being done and why.
The last error is raised as it is.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable

import tenacity

log = logging.getLogger(__name__)


def policy(what: str, transient: Callable[[BaseException], bool], retries: int, backoff: float,
           max_delay: float = 60.0, jitter: bool = True, reason: Callable[[BaseException], str] | None = None,
           logger: logging.Logger = log) -> tenacity.Retrying:
    """A ``tenacity.Retrying`` to call (``policy(...)(fn)``) or to loop over (``for attempt in policy(...)``)."""

    def wait(state: tenacity.RetryCallState) -> float:
        delay = min(backoff * 2 ** (state.attempt_number - 1), max_delay)
        return delay * random.uniform(0.5, 1.0) if jitter else delay

    def before_sleep(state: tenacity.RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        why = reason(exc) if reason and exc else f"{type(exc).__name__}: {exc}"
        sleep = state.next_action.sleep if state.next_action else 0.0
        logger.warning("%s: %s; retry %d of %d in %.1f s", what, why, state.attempt_number, retries, sleep)

    return tenacity.Retrying(stop=tenacity.stop_after_attempt(retries + 1), wait=wait,
                             retry=tenacity.retry_if_exception(transient), before_sleep=before_sleep, reraise=True)
