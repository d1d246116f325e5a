"""A saved search made by a Team Lead runs over their teams' calls only.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.add_column("saved_search", sa.Column("within_teams", sa.Boolean, nullable=False, server_default=sa.false()))


def downgrade() -> None:
    raise NotImplementedError("the ledger only migrates forward: its tables hold records (access log, tombstones)")
