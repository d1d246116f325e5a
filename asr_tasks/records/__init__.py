"""Records management: the ledger's tables (where each recording version stands, who accessed what, what is
held), the roles that decide who sees what, and what removes recordings (erasure, retention) or reports on
them (progress).

The tables stand below the pipeline that writes them; erasure and retention,
which remove what every stage made and rerun the day's reports, stand above the
audit.
"""
