"""The access log's sealed text: each row's key (``access_log_seal``) and the recordings the row concerns
(``access_log_subject``), kept apart from the append-only log so that an erasure can destroy a key and its links.

The rows already logged stay as they were (their text masked, not sealed) and chained as before. On PostgreSQL
the role that runs this gives up UPDATE and TRUNCATE on both tables and keeps SELECT, INSERT and DELETE: the
pipeline adds a key and later destroys it, never rewrites one; ``access_log`` itself stays append-only. On SQLite
a trigger refuses UPDATE on both, as on the log.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | None = None
depends_on: str | None = None

TABLES = ("access_log_seal", "access_log_subject")


def upgrade() -> None:
    op.create_table("access_log_seal",
                    sa.Column("row_id", sa.Integer, primary_key=True),
                    sa.Column("key", sa.LargeBinary, nullable=False))
    op.create_table("access_log_subject",
                    sa.Column("row_id", sa.Integer, primary_key=True),
                    sa.Column("recording_id", sa.String(64), primary_key=True))
    op.create_index("access_log_subject_recording", "access_log_subject", ["recording_id"])
    sqlite = op.get_context().dialect.name == "sqlite"
    for table in TABLES:
        if sqlite:
            op.execute(f"CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table} "
                       "BEGIN SELECT RAISE(ABORT, 'a seal is added or destroyed, never changed'); END")
        else:
            op.execute(f"REVOKE UPDATE, TRUNCATE ON {table} FROM CURRENT_USER")


def downgrade() -> None:
    raise NotImplementedError("the ledger only migrates forward: its tables hold records (access log, tombstones)")
