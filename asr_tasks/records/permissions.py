"""What a user of the search page may do, as permissions of Airflow's auth manager.

One resource, ``Call recordings``, with one action per line of what an auditor
may be allowed; each action has a role of its own, created at start-up (the FAB
auth manager's ``[fab] custom_roles``, from ``asr roles``), so an administrator
grants them one by one. The search app asks the auth manager for the action of
every route; ``asr ui`` (embedded, on loopback) has one user who may do all.

FAB's own Admin role is given every permission there is, these included; the
people who run the pipeline day to day get ``ASR Operator`` instead, created
beside them: the DAGs, their runs, tasks, logs, pools and backfills, and no
action on ``Call recordings``.
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
    "read_team": Permission("can_read_team", "search, read and play the calls of the teams they lead (teams.yaml)",
                            "Call Team Lead"),
    "read_unredacted": Permission("can_read_unredacted", "play original audio and read unredacted text",
                                  "Call Unredacted Reader"),
    "export": Permission("can_export", "export search results and transcripts", "Call Exporter"),
    "erase_hold": Permission("can_erase_hold", "erase recordings and place or release legal holds",
                             "Call Records Officer"),
    "access_log": Permission("can_read_access_log", "read the access log", "Call Access Auditor"),
    "review": Permission("can_review", "review QA findings: confirm, dismiss or assign them", "Call Reviewer"),
}


OPERATOR_ROLE = "ASR Operator"

# What Airflow's Op role may do on each of its resources, less the doors around the page's permissions:
# no writing connections (the pipeline's MinIO or Elasticsearch pointed elsewhere receives the calls),
# no variables or configuration (where secrets live), no writing XComs (what one task hands the next)
# or changing assets. Connections are read with their passwords masked.
OPERATOR_PERMISSIONS: dict[str, tuple[str, ...]] = {
    "DAGs": ("can_read", "can_edit", "can_delete", "menu_access"),
    "DAG Runs": ("can_read", "can_create", "can_edit", "can_delete", "menu_access"),
    "Task Instances": ("can_read", "can_create", "can_edit", "can_delete", "menu_access"),
    "Task Logs": ("can_read",),
    "Pools": ("can_read", "can_create", "can_edit", "can_delete", "menu_access"),
    "Backfills": ("can_read", "can_create", "can_edit", "can_delete"),
    "Connections": ("can_read", "menu_access"),
    "DAG Code": ("can_read",),
    "DAG Dependencies": ("can_read", "menu_access"),
    "DAG Versions": ("can_read",),
    "ImportError": ("can_read",),
    "Jobs": ("can_read", "menu_access"),
    "Cluster Activity": ("can_read", "menu_access"),
    "SLA Misses": ("can_read", "menu_access"),
    "Assets": ("can_read", "can_create", "menu_access"),
    "Asset Aliases": ("can_read",),
    "XComs": ("can_read", "menu_access"),
    "HITL Detail": ("can_read", "can_edit", "menu_access"),
    "Plugins": ("can_read", "menu_access"),
    "Providers": ("can_read", "menu_access"),
    "My Password": ("can_read", "can_edit"),
    "My Profile": ("can_read", "can_edit"),
    "Website": ("can_read",),
    "Browse": ("menu_access",),
    "Admin": ("menu_access",),
    "Docs": ("menu_access",),
    "Documentation": ("menu_access",),
}


def fab_custom_roles() -> str:
    """``[fab] custom_roles``: each permission's role with its one action on the resource, and the operator's role."""
    roles = {p.role: [{"action": p.action, "resource": RESOURCE}] for p in PERMISSIONS.values()}
    roles[OPERATOR_ROLE] = [{"action": action, "resource": resource}
                            for resource, actions in OPERATOR_PERMISSIONS.items() for action in actions]
    return json.dumps(roles)

