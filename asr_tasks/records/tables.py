"""The ledger database's tables, as the migrations (``migrations/versions``) build them: the recordings'
states, the access log, legal holds, and what the QA team keeps (saved searches, reviews of findings, answers
on scorecards)."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
)

STAGES = ("preprocess", "transcribe", "index")  # each has a column of the seconds it took
metadata = MetaData()
recordings = Table(
    "recording_ledger",
    metadata,
    Column("recording_id", String(64), primary_key=True),
    Column("bucket", String(255), nullable=False),
    Column("key", String(1024), nullable=False),
    Column("etag", String(128), nullable=False),
    Column("call_date", String(10)),
    Column("state", String(20), nullable=False),
    Column("reason", Text),
    Column("model", String(255)),
    Column("pipeline_version", String(32)),
    Column("segments", Integer),
    *(Column(f"{stage}_seconds", Float) for stage in STAGES),
    Column("sensed_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    # added later (revisions 0002 and 0003): the sidecar's parties, an erasure's who and when, the audio's size
    Column("agent_id", String(255)),
    Column("customer_id", String(255)),
    Column("erased_by", String(255)),
    Column("erased_at", DateTime(timezone=True)),
    Column("size", BigInteger),  # bytes of the object, from the listing: what is left, before it is decoded
    Column("audio_seconds", Float),  # the recording's length, once preprocessing decoded it
    UniqueConstraint("bucket", "key", "etag", name="recording_ledger_version"),
)
Index("recording_ledger_date_state", recordings.c.call_date, recordings.c.state)
Index("recording_ledger_key", recordings.c.bucket, recordings.c.key)
Index("recording_ledger_customer", recordings.c.customer_id)
Index("recording_ledger_updated", recordings.c.updated_at)  # throughput: what finished in the last hour or day

# Who searched, played, exported, erased, held or released what: appended, never changed (access_log.py); the
# triggers that refuse UPDATE and DELETE are revision 0002's.
access_log = Table(
    "access_log",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("user", String(255), nullable=False),
    Column("action", String(20), nullable=False),
    Column("recording_id", String(64)),
    Column("query", Text),
    Column("filters", Text),
    Column("hits", Integer),
    Column("detail", Text),
    # the hash chain (revision 0009, ``chain.py``): the row before's hash and this row's
    Column("prev_hash", String(64)),
    Column("row_hash", String(64)),
)
# One row that every appender updates first: appenders take turns, so each row is chained to the one before it.
access_log_head = Table(
    "access_log_head",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("appended", BigInteger, nullable=False),
)
Index("access_log_at", access_log.c.at)
Index("access_log_user_at", access_log.c.user, access_log.c.at)
Index("access_log_recording", access_log.c.recording_id)
# The keys of the rows' sealed text, one per row that has typed text (revision 0011): not append-only, so that an
# erasure destroys them (``AccessLog.forget``) and the row's words can no longer be read, its hash unchanged. No
# foreign key to ``access_log``: checking one locks the log's row, which the pipeline's role may not do.
access_log_seal = Table(
    "access_log_seal",
    metadata,
    Column("row_id", Integer, primary_key=True),
    Column("key", LargeBinary, nullable=False),
)
# The recordings a sealed row concerns (its own, and a search's hits): what an erasure finds the keys by.
access_log_subject = Table(
    "access_log_subject",
    metadata,
    Column("row_id", Integer, primary_key=True),
    Column("recording_id", String(64), primary_key=True),
)
Index("access_log_subject_recording", access_log_subject.c.recording_id)

# Legal holds: what no erasure may touch while the hold stands (holds.py).
legal_holds = Table(
    "legal_hold",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("scope", String(20), nullable=False),  # key, agent, customer or dates
    Column("value", String(1024)),
    Column("date_from", String(10)),
    Column("date_to", String(10)),
    Column("why", Text, nullable=False),
    Column("held_by", String(255), nullable=False),
    Column("held_at", DateTime(timezone=True), nullable=False),
    Column("released_by", String(255)),
    Column("released_at", DateTime(timezone=True)),
    Column("release_why", Text),
    Column("future", Boolean, nullable=False, server_default=false()),  # a key no recording had when placed
)


# Saved searches: an auditor's query that the nightly audit runs over each new day (saved_searches.py).
saved_searches = Table(
    "saved_search",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("owner", String(255), nullable=False),
    Column("name", String(255), nullable=False),
    Column("query", Text, nullable=False),
    Column("filters", Text, nullable=False),  # JSON: the search's filters, by their names in ``Filters``
    Column("severity", String(20), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    # made by a Team Lead: runs over the calls of the teams its owner leads at the time it runs
    Column("within_teams", Boolean, nullable=False, server_default=false()),
    UniqueConstraint("owner", "name", name="saved_search_owner_name"),
)


# Reviews of QA findings: a reviewer's verdict on each (audit/reviews.py), by the finding's id, which a re-scored
# day gives the same finding again, so that it keeps its review.
finding_reviews = Table(
    "finding_review",
    metadata,
    Column("finding_id", String(64), primary_key=True),
    Column("recording_id", String(64), nullable=False),
    Column("call_date", String(10), nullable=False),
    Column("rule_id", String(255), nullable=False),
    Column("status", String(20), nullable=False),  # confirmed, dismissed or assigned
    Column("reason", String(40)),  # why dismissed: a code of audit.reviews.DISMISS_REASONS
    Column("comment", Text, nullable=False),  # masked by the PII policy
    Column("assignee", String(255)),
    Column("reviewer", String(255), nullable=False),
    Column("reviewed_at", DateTime(timezone=True), nullable=False),
)

score_overrides = Table(
    "score_override",
    metadata,
    Column("recording_id", String(64), primary_key=True),
    Column("scorecard", String(64), primary_key=True),
    Column("question_id", String(64), primary_key=True),
    Column("call_date", String(10), nullable=False),
    Column("answer", String(8), nullable=False),  # yes, no or na
    Column("why", Text, nullable=False),  # masked by the PII policy
    Column("reviewer", String(255), nullable=False),
    Column("overridden_at", DateTime(timezone=True), nullable=False),
)
