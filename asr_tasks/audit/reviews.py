"""Reviews of QA findings: a reviewer confirms a finding, dismisses it with a reason, or assigns it to someone.

A finding's id is derived from its rule, recording, speaker, second and words, so
a day re-scored with a changed rule set gives a finding found again the same id,
and it keeps its review; a finding no longer found leaves its review behind,
unlisted. Reviews live in the ledger's database (``finding_review``), every
action is a row of the access log, and a comment is kept masked by the PII
policy, as everything people type. Per rule, how many of its findings were
confirmed, dismissed or are still open (``precision``) tells whoever maintains
the rules which ones cry wolf.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterable

from sqlalchemy import delete, insert, select

from asr_tasks.audit.rules import Finding
from asr_tasks.audit.verdicts import DISMISS_REASONS, STATUSES
from asr_tasks.config import Settings
from asr_tasks.inputs import has_control
from asr_tasks.records.access_log import AccessLog, open_access_log
from asr_tasks.records.ledger import Ledger, open_ledger
from asr_tasks.records.tables import finding_reviews
from asr_tasks.text.masking import configured_policy
from asr_tasks.text.pii import mask_text
from asr_tasks.text.pii_policy import Policy

MAX_COMMENT_CHARS = 2000
MAX_ASSIGNEE_CHARS = 255


class ReviewError(ValueError):
    """A review that cannot be made; the message says why."""


@dataclass(frozen=True)
class Review:
    """A finding's review as it stands: its status, why, and who said so when."""

    finding_id: str
    recording_id: str
    call_date: str
    rule_id: str
    status: str
    reason: str | None
    comment: str
    assignee: str | None
    reviewer: str
    reviewed_at: str

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


class Reviews:
    """The reviews of one ledger database; each action written to the access log under the reviewer's name."""

    def __init__(self, ledger: Ledger, access: AccessLog, policy: Policy | None = None) -> None:
        self.engine, self.access, self.policy = ledger.engine, access, policy

    def review(self, finding: Finding, reviewer: str, status: str, reason: str | None = None, comment: str = "",
               assignee: str | None = None) -> Review:
        """The finding's new review (``ReviewError`` where it is not one): confirmed, dismissed with a reason of
        ``DISMISS_REASONS`` ("other" with a comment), assigned to someone, or open again (a verdict taken back;
        the access log keeps every one)."""
        comment, assignee = comment.strip(), (assignee or "").strip() or None
        for name, value in (("comment", comment), ("assignee", assignee or "")):
            if has_control(value):
                raise ReviewError(f"the {name} holds a control character")
        if assignee is not None and (len(assignee) > MAX_ASSIGNEE_CHARS or (
                self.policy is not None and mask_text(assignee, self.policy) != assignee)):
            raise ReviewError(f"an assignee is someone's user name: at most {MAX_ASSIGNEE_CHARS} characters, "
                              "no personal data")
        if status not in STATUSES:
            raise ReviewError(f"status {status!r}: one of {', '.join(STATUSES)}")
        if status == "dismissed" and reason not in DISMISS_REASONS:
            raise ReviewError(f"a dismissal needs a reason: one of {', '.join(DISMISS_REASONS)}")
        if status != "dismissed" and reason is not None:
            raise ReviewError("only a dismissal has a reason (a confirmation or an assignment may have a comment)")
        if reason == "other" and not comment:
            raise ReviewError("a dismissal for another reason says it in the comment")
        if (status == "assigned") != (assignee is not None):
            raise ReviewError("an assignment, and only an assignment, names whom it is assigned to")
        if len(comment) > MAX_COMMENT_CHARS:
            raise ReviewError(f"a comment is at most {MAX_COMMENT_CHARS} characters")
        if self.policy is not None:
            comment = mask_text(comment, self.policy)
        row = {"finding_id": finding.finding_id, "recording_id": finding.recording_id,
               "call_date": finding.call_date or "", "rule_id": finding.rule_id, "status": status, "reason": reason,
               "comment": comment, "assignee": assignee, "reviewer": reviewer,
               "reviewed_at": datetime.now(timezone.utc)}
        with self.engine.begin() as db:
            db.execute(delete(finding_reviews).where(finding_reviews.c.finding_id == finding.finding_id))
            db.execute(insert(finding_reviews).values(**row))
        self.access.append(reviewer, "review", recording_id=finding.recording_id,
                           detail=f"finding {finding.finding_id} of {finding.rule_id}: {status}"
                                  + (f" ({reason})" if reason else "") + (f" to {row['assignee']}" if assignee else ""))
        return _review(row)

    def of(self, finding_ids: Iterable[str]) -> dict[str, Review]:
        """The reviews of these findings, by finding id (a finding nobody reviewed has none)."""
        asked = sorted(set(finding_ids))
        if not asked:
            return {}
        t = finding_reviews
        with self.engine.connect() as db:
            rows = db.execute(select(t).where(t.c.finding_id.in_(asked))).mappings().all()
        return {row["finding_id"]: _review(dict(row)) for row in rows}

    def between(self, date_from: str, date_to: str) -> dict[str, Review]:
        """The reviews of the findings of these days, by finding id: a month's queue asks once, not per finding."""
        t = finding_reviews
        with self.engine.connect() as db:
            rows = db.execute(select(t).where(t.c.call_date >= date_from, t.c.call_date <= date_to)).mappings().all()
        return {row["finding_id"]: _review(dict(row)) for row in rows}


def open_reviews(settings: Settings) -> Reviews:
    """The reviews as the page and the CLI keep them: comments masked, actions in the access log."""
    return Reviews(open_ledger(settings.ledger), open_access_log(settings), configured_policy(settings))


def _review(row: dict[str, Any]) -> Review:
    at = row["reviewed_at"]
    return Review(row["finding_id"], row["recording_id"], row["call_date"], row["rule_id"], row["status"],
                  row["reason"], row["comment"], row["assignee"], row["reviewer"],
                  at.isoformat(timespec="seconds") if isinstance(at, datetime) else str(at))


@dataclass(frozen=True)
class Queue:
    """Which findings a review queue lists: of a status, rule, severity, agent and team, or assigned to someone
    ("" and None: any)."""

    status: str = ""
    rule: str = ""
    severity: str = ""
    agent: str = ""
    team: frozenset[str] | None = None  # the agents of the team asked for
    assignee: str = ""  # findings assigned to this user

    def lists(self, f: Finding, reviews: dict[str, Review]) -> bool:
        review = reviews.get(f.finding_id)
        return (self.status in ("", status_of(f, reviews)) and self.rule in ("", f.rule_id)
                and self.severity in ("", f.severity) and self.agent in ("", f.agent_id)
                and (self.team is None or f.agent_id in self.team)
                and self.assignee in ("", review.assignee if review else None))


def dismissed(reviews: dict[str, Review]) -> frozenset[str]:
    """The ids of the findings reviewers dismissed: they count against no call (scores, trends)."""
    return frozenset(i for i, r in reviews.items() if r.status == "dismissed")


def status_of(finding: Finding, reviews: dict[str, Review]) -> str:
    review = reviews.get(finding.finding_id)
    return review.status if review else "open"


def precision(findings: Iterable[Finding], reviews: dict[str, Review]) -> dict[str, dict[str, int]]:
    """Per rule, its findings by status (confirmed, dismissed, assigned, open): a rule mostly dismissed is one to
    mend."""
    counts: dict[str, Counter[str]] = {}
    for f in findings:
        counts.setdefault(f.rule_id, Counter())[status_of(f, reviews)] += 1
    return {rule: {status: c[status] for status in STATUSES} for rule, c in sorted(counts.items())}
