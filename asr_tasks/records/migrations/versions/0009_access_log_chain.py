"""The access log's hash chain: each row's SHA-256 and its predecessor's (``records/chain.py``), the rows already
logged chained in the order they were written, and the one-row table appenders take their turn on.

The rows already there are hashed once, here: the triggers are lifted for this and put back (on PostgreSQL the
role's UPDATE privilege too), which is what the chain exists to make visible from now on.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from asr_tasks.records.chain import GENESIS, hash_of

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | None = None
depends_on: str | None = None

SQLITE_TRIGGER = "CREATE TRIGGER access_log_no_update BEFORE UPDATE ON access_log " \
                 "BEGIN SELECT RAISE(ABORT, 'the access log is append-only'); END"


def upgrade() -> None:
    op.add_column("access_log", sa.Column("prev_hash", sa.String(64)))
    op.add_column("access_log", sa.Column("row_hash", sa.String(64)))
    head = op.create_table("access_log_head", sa.Column("id", sa.Integer, primary_key=True),
                           sa.Column("appended", sa.BigInteger, nullable=False))
    op.bulk_insert(head, [{"id": 1, "appended": 0}])
    sqlite = op.get_context().dialect.name == "sqlite"
    if sqlite:
        op.execute("DROP TRIGGER access_log_no_update")
    else:
        op.execute("GRANT UPDATE ON access_log TO CURRENT_USER")
        op.execute("ALTER TABLE access_log DISABLE TRIGGER access_log_no_change")
    db = op.get_bind()
    log = sa.table("access_log", *(sa.column(c) for c in (
        "id", "at", "user", "action", "recording_id", "query", "filters", "hits", "detail", "prev_hash", "row_hash")))
    prev = GENESIS
    for row in db.execute(sa.select(log).order_by(log.c.id)).all():
        mine = hash_of(row, prev)
        db.execute(sa.update(log).where(log.c.id == row.id).values(prev_hash=prev, row_hash=mine))
        prev = mine
    if sqlite:
        op.execute(SQLITE_TRIGGER)
    else:
        op.execute("ALTER TABLE access_log ENABLE TRIGGER access_log_no_change")
        op.execute("REVOKE UPDATE ON access_log FROM CURRENT_USER")


def downgrade() -> None:
    raise NotImplementedError("the ledger only migrates forward: its tables hold records (access log, tombstones)")
