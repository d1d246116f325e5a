"""Why a recording was erased, as a code: what its tombstone and the access log keep of the reason.

A code, not free text: whatever an officer types there (a ticket that quotes the customer, a name) would
outlive the call it erased. Light on imports: the CLI offers the codes as choices.
"""

from __future__ import annotations

from typing import Literal, get_args

Reason = Literal["customer-request", "retention", "mistaken-upload", "legal-order"]
REASONS: dict[str, str] = dict(zip(get_args(Reason), (
    "the customer asked for their data to be erased", "the retention period ended",
    "recorded or uploaded by mistake", "a court or regulator ordered it")))
