"""Retention: recordings are kept exactly as long as ``retention_days`` says, and then erased.

A rule names a bucket and a key prefix (``recordings/calls/``) and the days a
recording is kept from its call date; where rules overlap, the longest prefix
wins. The daily ``retention`` DAG first finishes any erasure a crash cut short,
then erases what has expired in batches of ``retention_batch`` keys, walking
the keys in order, so a rerun after a crash goes on where it stopped. A key
under a legal hold is skipped and counted.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from datetime import date, timedelta
from typing import Any

from sqlalchemy import select, tuple_

from asr_tasks.config import Settings
from asr_tasks.index.base import TranscriptIndex
from asr_tasks.intake.stores import ObjectStore
from asr_tasks.records.access_log import AccessLog
from asr_tasks.records.erasure import Eraser, versions_of
from asr_tasks.records.ledger import Ledger
from asr_tasks.records.locking import rule_for
from asr_tasks.records.tables import recordings
from asr_tasks.states import RecordingState

log = logging.getLogger(__name__)
RETENTION_USER = "retention"


@dataclass
class RetentionRun:
    """What one run of retention did."""

    finished: int = 0  # erasures a crash had cut short, finished now
    erased: int = 0
    held: int = 0
    batches: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def expired_batch(ledger: Ledger, rules: dict[str, int], today: date, after: tuple[str, str] | None,
                  size: int) -> list[tuple[str, str]]:
    """The next ``size`` keys (in order, after ``after``) whose retention ended by ``today``.

    A call of the 1st kept 3 days is kept the 1st, 2nd and 3rd, and erased from the 4th.
    """
    t = recordings
    found: set[tuple[str, str]] = set()
    for where, days in rules.items():
        bucket, prefix = where.split("/", 1)
        cutoff = (today - timedelta(days=days)).isoformat()
        query = (select(t.c.bucket, t.c.key).where(t.c.bucket == bucket, t.c.state != RecordingState.ERASED, t.c.call_date <= cutoff)
                 .where(t.c.key.startswith(prefix, autoescape=True)).distinct()
                 .order_by(t.c.bucket, t.c.key).limit(size))
        if after is not None:
            query = query.where(tuple_(t.c.bucket, t.c.key) > tuple_(*after))
        with ledger.engine.connect() as db:
            found.update((row.bucket, row.key) for row in db.execute(query)
                         if rule_for(row.bucket, row.key, rules) == (where, days))
    return sorted(found)[:size]


def run_retention(settings: Settings, today: date, ledger: Ledger, store: ObjectStore, index: TranscriptIndex,
                  access: AccessLog) -> RetentionRun:
    """Finish interrupted erasures, then erase every expired key not under a hold, batch by batch."""
    eraser = Eraser(settings, ledger, store, index, access)
    run = RetentionRun(finished=len(eraser.erase({}, "retention", RETENTION_USER).finished))
    rules = settings.storage.retention_days
    after: tuple[str, str] | None = None
    while rules:
        batch = expired_batch(ledger, rules, today, after, settings.storage.retention_batch)
        if not batch:
            break
        t = recordings
        keys = versions_of(ledger, select(t.c.bucket, t.c.key).where(tuple_(t.c.bucket, t.c.key).in_(batch))
                           .distinct())
        by_rule: dict[tuple[str, int], dict[tuple[str, str], list[dict[str, Any]]]] = {}
        for (bucket, key), versions in keys.items():
            rule = rule_for(bucket, key, rules)
            if rule is not None:
                by_rule.setdefault(rule, {})[(bucket, key)] = versions
        for (where, days), chosen in sorted(by_rule.items()):
            log.info("retention: %d keys kept %d days under %s are erased", len(chosen), days, where)
            done = eraser.erase(chosen, "retention", RETENTION_USER)
            run.erased += len(done.erased)
            run.held += len(done.held)
        run.batches += 1
        after = batch[-1]
    return run

