"""What a reviewer may say of a finding: its statuses and the reasons for a dismissal (``audit.reviews`` keeps
them; the command line offers them without loading the audit)."""

STATUSES = ("open", "assigned", "confirmed", "dismissed")  # a finding nobody reviewed is open
DISMISS_REASONS = {
    "not-said": "the words were not said: the transcript is wrong",
    "other-party": "said by the other party, or quoted",
    "allowed": "allowed in this call's context",
    "duplicate": "the same as another finding",
    "rule-wrong": "the rule does not fit this case",
    "other": "another reason, said in the comment",
}
