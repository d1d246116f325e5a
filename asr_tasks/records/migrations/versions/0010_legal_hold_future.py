"""A hold on an object key no recording has yet is placed only when asked for as such (a future hold), and says so.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.add_column("legal_hold", sa.Column("future", sa.Boolean, nullable=False, server_default=sa.false()))


def downgrade() -> None:
    raise NotImplementedError("the ledger only migrates forward: its tables hold records (access log, tombstones)")
