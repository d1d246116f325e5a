"""Alembic's environment for the ledger: it migrates the connection the ledger hands it, never one of its own.

``Ledger`` applies these revisions itself whenever it opens (``upgrade_schema`` in ``ledger.py``: under a lock,
in one transaction, with its own version table, so a database shared with Airflow keeps Airflow's
``alembic_version`` apart). A new revision goes in ``versions/`` (``alembic revision -m "..." --rev-id 0005``
from the project root) and leaves the schema the Table definitions in ``ledger.py`` describe.
"""

from __future__ import annotations

from alembic import context

from asr_tasks.records.ledger import VERSION_TABLE
from asr_tasks.records.tables import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("the ledger migrates its database when it opens (asr_tasks.records.ledger.Ledger): "
                       "run `asr status` or any stage against ASR_LEDGER_URL instead of `alembic upgrade`")
context.configure(connection=connection, target_metadata=metadata, version_table=VERSION_TABLE)
with context.begin_transaction():
    context.run_migrations()
