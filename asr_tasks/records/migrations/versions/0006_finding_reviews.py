"""Reviews of QA findings: a reviewer confirms, dismisses (with a reason) or assigns each finding.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "finding_review",
        sa.Column("finding_id", sa.String(64), primary_key=True),
        sa.Column("recording_id", sa.String(64), nullable=False),
        sa.Column("call_date", sa.String(10), nullable=False),
        sa.Column("rule_id", sa.String(255), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("reason", sa.String(40)),
        sa.Column("comment", sa.Text, nullable=False),
        sa.Column("assignee", sa.String(255)),
        sa.Column("reviewer", sa.String(255), nullable=False),
        sa.Column("reviewed_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    raise NotImplementedError("the ledger only migrates forward: its tables hold records (access log, tombstones)")
