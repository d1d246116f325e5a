"""Each recording's size in bytes (from the listing) and its length (once decoded), for ``asr progress``.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.add_column("recording_ledger", sa.Column("size", sa.BigInteger))
    op.add_column("recording_ledger", sa.Column("audio_seconds", sa.Float))


def downgrade() -> None:
    raise NotImplementedError("the ledger only migrates forward: its tables hold records (access log, tombstones)")
