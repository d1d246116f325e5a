"""The QA audit: YAML rule sets (forbidden and required phrases, patterns, silences, talk time) over a day's
gated transcripts, and the day's audit report linking every finding to its second."""
