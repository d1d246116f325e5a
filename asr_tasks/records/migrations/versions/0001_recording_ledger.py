"""The ledger as its first release made it: one row per recording version (bucket, key, ETag) and its state.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "recording_ledger",
        sa.Column("recording_id", sa.String(64), primary_key=True),
        sa.Column("bucket", sa.String(255), nullable=False),
        sa.Column("key", sa.String(1024), nullable=False),
        sa.Column("etag", sa.String(128), nullable=False),
        sa.Column("call_date", sa.String(10)),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("reason", sa.Text),
        sa.Column("model", sa.String(255)),
        sa.Column("pipeline_version", sa.String(32)),
        sa.Column("segments", sa.Integer),
        sa.Column("preprocess_seconds", sa.Float),
        sa.Column("transcribe_seconds", sa.Float),
        sa.Column("index_seconds", sa.Float),
        sa.Column("sensed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("bucket", "key", "etag", name="recording_ledger_version"),
    )
    op.create_index("recording_ledger_date_state", "recording_ledger", ["call_date", "state"])
    op.create_index("recording_ledger_key", "recording_ledger", ["bucket", "key"])


def downgrade() -> None:
    raise NotImplementedError("the ledger only migrates forward: its tables hold records (access log, tombstones)")
