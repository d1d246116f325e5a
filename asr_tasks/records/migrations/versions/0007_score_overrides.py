"""A reviewer's answers on a call's scorecard, kept apart from the automatic ones.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "score_override",
        sa.Column("recording_id", sa.String(64), primary_key=True),
        sa.Column("scorecard", sa.String(64), primary_key=True),
        sa.Column("question_id", sa.String(64), primary_key=True),
        sa.Column("call_date", sa.String(10), nullable=False),
        sa.Column("answer", sa.String(8), nullable=False),
        sa.Column("why", sa.Text, nullable=False),
        sa.Column("reviewer", sa.String(255), nullable=False),
        sa.Column("overridden_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    raise NotImplementedError("the ledger only migrates forward: its tables hold records (access log, tombstones)")
