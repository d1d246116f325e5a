"""What a user of the search page may do, as permissions of Airflow's auth manager.

One resource, ``Call recordings``, with one action per line of what an auditor
may be allowed; each action has a role of its own, created at start-up (the FAB
auth manager's ``[fab] custom_roles``, from ``asr roles``), so an administrator
grants them one by one. The search app asks the auth manager for the action of
every route; ``asr ui`` (embedded, on loopback) has one user who may do all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

RESOURCE = "Call recordings"


@dataclass(frozen=True)
class Permission:
    """One thing a user may do: the auth manager's action for it, what it allows, and the role that grants it."""

    action: str
    allows: str
    role: str


PERMISSIONS: dict[str, Permission] = {
    "read": Permission("can_read", "search transcripts and play redacted audio", "Call Reader"),
    "read_unredacted": Permission("can_read_unredacted", "play original audio and read unredacted text",
                                  "Call Unredacted Reader"),
    "export": Permission("can_export", "export search results and transcripts", "Call Exporter"),
    "erase_hold": Permission("can_erase_hold", "erase recordings and place or release legal holds",
                             "Call Records Officer"),
    "access_log": Permission("can_read_access_log", "read the access log", "Call Access Auditor"),
}


def fab_custom_roles() -> str:
    """``[fab] custom_roles``: each permission's role with its one action on the resource."""
    return json.dumps({p.role: [{"action": p.action, "resource": RESOURCE}] for p in PERMISSIONS.values()})

