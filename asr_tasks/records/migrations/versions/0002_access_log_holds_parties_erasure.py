"""Records management: the sidecar's parties and an erasure's who and when, the append-only access log, legal holds.

The access log refuses UPDATE and DELETE (and, on PostgreSQL, TRUNCATE) whoever sends them; on PostgreSQL the
role that runs this also gives up its own UPDATE, DELETE and TRUNCATE privileges on it, so the pipeline's role
may only INSERT and SELECT.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None

SQLITE_APPEND_ONLY = (
    "CREATE TRIGGER access_log_no_update BEFORE UPDATE ON access_log "
    "BEGIN SELECT RAISE(ABORT, 'the access log is append-only'); END",
    "CREATE TRIGGER access_log_no_delete BEFORE DELETE ON access_log "
    "BEGIN SELECT RAISE(ABORT, 'the access log is append-only'); END",
)
POSTGRESQL_APPEND_ONLY = (
    "CREATE OR REPLACE FUNCTION access_log_refuse() RETURNS trigger LANGUAGE plpgsql AS "
    "$$ BEGIN RAISE EXCEPTION 'the access log is append-only'; END $$",
    "CREATE TRIGGER access_log_no_change BEFORE UPDATE OR DELETE ON access_log "
    "FOR EACH ROW EXECUTE FUNCTION access_log_refuse()",
    "CREATE TRIGGER access_log_no_truncate BEFORE TRUNCATE ON access_log "
    "FOR EACH STATEMENT EXECUTE FUNCTION access_log_refuse()",
    "REVOKE UPDATE, DELETE, TRUNCATE ON access_log FROM CURRENT_USER",
)


def upgrade() -> None:
    op.add_column("recording_ledger", sa.Column("agent_id", sa.String(255)))
    op.add_column("recording_ledger", sa.Column("customer_id", sa.String(255)))
    op.add_column("recording_ledger", sa.Column("erased_by", sa.String(255)))
    op.add_column("recording_ledger", sa.Column("erased_at", sa.DateTime(timezone=True)))
    op.create_index("recording_ledger_customer", "recording_ledger", ["customer_id"])

    op.create_table(
        "access_log",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("user", sa.String(255), nullable=False),
        sa.Column("action", sa.String(20), nullable=False),
        sa.Column("recording_id", sa.String(64)),
        sa.Column("query", sa.Text),
        sa.Column("filters", sa.Text),
        sa.Column("hits", sa.Integer),
        sa.Column("detail", sa.Text),
    )
    op.create_index("access_log_at", "access_log", ["at"])
    op.create_index("access_log_user_at", "access_log", ["user", "at"])
    op.create_index("access_log_recording", "access_log", ["recording_id"])
    for statement in SQLITE_APPEND_ONLY if op.get_context().dialect.name == "sqlite" else POSTGRESQL_APPEND_ONLY:
        op.execute(statement)

    op.create_table(
        "legal_hold",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("scope", sa.String(20), nullable=False),
        sa.Column("value", sa.String(1024)),
        sa.Column("date_from", sa.String(10)),
        sa.Column("date_to", sa.String(10)),
        sa.Column("why", sa.Text, nullable=False),
        sa.Column("held_by", sa.String(255), nullable=False),
        sa.Column("held_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("released_by", sa.String(255)),
        sa.Column("released_at", sa.DateTime(timezone=True)),
        sa.Column("release_why", sa.Text),
    )


def downgrade() -> None:
    raise NotImplementedError("the ledger only migrates forward: its tables hold records (access log, tombstones)")
