"""Evaluation forms: a call's score from weighted questions, answered from the audit or by a reviewer.

A scorecard (``include/scorecards/*.yaml``, the one ``audit.scorecard`` names)
has sections of questions, each with a weight. A question is answered from the
call's audit where the form says how: ``no_if_found`` (no where the call has a
finding of one of these rules, yes otherwise), ``yes_when`` (a condition of the
rule language: yes where it holds), and ``applies_if_tagged`` (not applicable
unless the call carries one of these tags); a question with neither is left
for the reviewer. A reviewer may override any answer; the override is kept
apart from the automatic answer, with who and why (``audit.score_overrides``).
The score is the weight answered yes over the weight answered yes or no, in
percent; questions not applicable or not yet answered count for neither.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from asr_tasks.audit import conditions
from asr_tasks.audit.call_score import CallScore
from asr_tasks.audit.rule_yaml import RuleError, no_repeated_keys
from asr_tasks.audit.rules import AuditResult, Rule, RuleSet, known_speakers
from asr_tasks.config import Settings
from asr_tasks.models import Transcript
from asr_tasks.text.pii import redact_transcript
from asr_tasks.text.pii_policy import Policy

_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
QUESTION_FIELDS = {"id", "text", "weight", "no_if_found", "yes_when", "applies_if_tagged"}


class ScorecardError(RuleError):
    """A scorecard that cannot be used; the message names the file and line."""


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    weight: float
    section: str
    no_if_found: tuple[str, ...] = ()
    yes_when: conditions.Condition | None = None
    applies_if_tagged: tuple[str, ...] = ()

    @property
    def automatic(self) -> bool:
        """Whether the audit answers it (else the reviewer does)."""
        return bool(self.no_if_found) or self.yes_when is not None


@dataclass(frozen=True)
class Scorecard:
    id: str
    title: str
    questions: tuple[Question, ...]
    identity: str  # a hash of the file's bytes: which form a stored score was made with

    def question(self, question_id: str) -> Question:
        for q in self.questions:
            if q.id == question_id:
                return q
        raise KeyError(question_id)

    def sections(self) -> list[tuple[str, list[Question]]]:
        """The questions by section, in the form's order."""
        out: dict[str, list[Question]] = {}
        for q in self.questions:
            out.setdefault(q.section, []).append(q)
        return list(out.items())


def score_of(card: Scorecard, answers: dict[str, str | None]) -> float | None:
    """The weight answered yes over the weight answered yes or no, in percent (one decimal); None where no
    question is answered yes or no."""
    yes = sum(q.weight for q in card.questions if answers.get(q.id) == "yes")
    asked = yes + sum(q.weight for q in card.questions if answers.get(q.id) == "no")
    return round(100.0 * yes / asked, 1) if asked else None


def answer_calls(card: Scorecard, transcripts: list[Transcript], result: AuditResult,
                 policy: Policy | None = None) -> list[CallScore]:
    """Each audited call's automatic answers and score: ``result`` is the day's audit of these (masked)
    transcripts, whose findings and tags answer ``no_if_found`` and ``applies_if_tagged``."""
    found: dict[str, set[str]] = {}
    ids: dict[tuple[str, str], list[str]] = {}  # (recording, rule): its findings
    for f in result.findings:
        found.setdefault(f.recording_id, set()).add(f.rule_id)
        ids.setdefault((f.recording_id, f.rule_id), []).append(f.finding_id)
    out = []
    for t in transcripts:
        if policy is not None:
            t = redact_transcript(t, policy)  # as the rules saw it: a condition matches what the findings show
        rec = t.recording
        rules, tags = found.get(rec.recording_id, set()), set(result.tags.get(rec.recording_id, ()))
        if not any(s.text.strip() for s in t.segments):  # nothing was said: nothing to score
            out.append(CallScore(rec.recording_id, rec.key, rec.call_date, rec.agent_id, card.id,
                                 dict.fromkeys((q.id for q in card.questions)),
                                 {q.id: "nothing was said in the call" for q in card.questions}))
            continue
        call = conditions.Call(t, policy.spoken if policy else None)
        answers: dict[str, str | None] = {}
        why: dict[str, str] = {}
        because: dict[str, list[str]] = {}
        for q in card.questions:
            answers[q.id], why[q.id] = _answer(q, rules, tags, call)
            if answers[q.id] == "no" and q.no_if_found:
                because[q.id] = [i for r in q.no_if_found for i in ids.get((rec.recording_id, r), ())]
        out.append(CallScore(rec.recording_id, rec.key, rec.call_date, rec.agent_id, card.id, answers, why,
                             score_of(card, answers), because))
    return out


def _answer(q: Question, rules: set[str], tags: set[str], call: conditions.Call) -> tuple[str | None, str]:
    if q.applies_if_tagged and not tags & set(q.applies_if_tagged):
        return "na", f"not tagged {' or '.join(q.applies_if_tagged)}"
    if q.no_if_found:
        fired = sorted(rules & set(q.no_if_found))
        return ("no", f"finding of {', '.join(fired)}") if fired else ("yes", "no finding of "
                                                                              f"{', '.join(q.no_if_found)}")
    if q.yes_when is not None:
        hits = conditions.hits(q.yes_when, call)
        return ("yes", f"holds at {hits[0].start:.1f} s") if hits else ("no", "does not hold")
    return None, "for the reviewer"


def configured_scorecard(settings: Settings, rules: RuleSet | list[Rule] | None = None) -> Scorecard | None:
    """The form the nightly audit fills (``audit.scorecard``), checked against the rule set where one is given
    (the audit's; reading stored scores back needs only the weights); None where none is configured."""
    return load_scorecard(settings.audit.path("scorecard"), rules) if settings.audit.scorecard else None


def load_scorecard(path: Path, rules: RuleSet | list[Rule] | None = None) -> Scorecard:
    """The form of one file, each question checked; with ``rules``, its rule ids against the rule set the audit
    runs (a question answered from a rule that is not there would read yes on every call) and its tags against
    the set's tag rules."""
    try:
        data_bytes = path.read_bytes()
        text = data_bytes.decode("utf-8")
    except OSError as exc:
        raise ScorecardError(f"{path}: cannot be read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ScorecardError(f"{path}: not UTF-8 text: {exc.reason} at byte {exc.start}") from exc
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ScorecardError(f"{path}{f':{mark.line + 1}' if mark else ''}: invalid YAML: "
                             f"{getattr(exc, 'problem', exc)}") from exc
    if not isinstance(root, yaml.MappingNode):
        raise ScorecardError(f"{path}: expected a mapping with 'scorecard'")
    try:
        no_repeated_keys(path, root)
    except RuleError as exc:
        raise ScorecardError(str(exc)) from exc
    data = yaml.safe_load(text)
    if set(data) != {"scorecard"} or not isinstance(data["scorecard"], dict):
        raise ScorecardError(f"{path}: expected a mapping with one key, 'scorecard', holding id, title and sections")
    form = data["scorecard"]
    lines = _lines(path, root)
    unknown = set(form) - {"id", "title", "sections"}
    if unknown:
        raise ScorecardError(f"{path}: scorecard: unknown field(s) {', '.join(sorted(unknown))} "
                             "(id, title, sections)")
    card_id = str(form.get("id") or "")
    if not _ID.match(card_id):
        raise ScorecardError(f"{lines.get('id', path)}: scorecard id must be lower-case letters, digits, - or _")
    rule_list = None if rules is None else list(rules.rules if isinstance(rules, RuleSet) else rules)
    known_rules = None if rule_list is None else {r.id for r in rule_list if r.tag is None}
    known_tags = None if rule_list is None else {str(r.tag) for r in rule_list if r.tag is not None}
    parser = conditions.Parser(known_speakers())
    sections = form.get("sections")
    if not isinstance(sections, list) or not sections:
        raise ScorecardError(f"{path}: scorecard {card_id}: sections must be a non-empty list")
    questions: list[Question] = []
    for n, section in enumerate(sections, 1):
        if not isinstance(section, dict) or set(section) != {"title", "questions"} or not isinstance(
                section["questions"], list) or not section["questions"]:
            raise ScorecardError(f"{path}: scorecard {card_id}: section {n} needs a title and a non-empty list of "
                                 "questions")
        for q in section["questions"]:
            questions.append(_question(path, lines, q, str(section["title"]), known_rules, known_tags, parser))
    seen: set[str] = set()
    for q in questions:
        if q.id in seen:
            raise ScorecardError(f"{lines.get(q.id, path)}: question id {q.id!r} is used twice")
        seen.add(q.id)
    return Scorecard(card_id, str(form.get("title") or card_id), tuple(questions),
                     hashlib.sha256(data_bytes).hexdigest()[:12])


def _lines(path: Path, root: yaml.Node) -> dict[str, str]:
    """file:line of each id's value (a question's, the form's), for messages that point at it."""
    out: dict[str, str] = {}

    def walk(node: yaml.Node) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if key.value == "id" and isinstance(value, yaml.ScalarNode):
                    out.setdefault(value.value, f"{path}:{key.start_mark.line + 1}")
                    out.setdefault("id", f"{path}:{key.start_mark.line + 1}")
                walk(value)
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                walk(item)

    walk(root)
    return out


def _names(value: Any, what: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(v, str) and v for v in items):
        raise ValueError(f"{what} must be a name or a non-empty list of names")
    return tuple(items)


def _question(path: Path, lines: dict[str, str], data: Any, section: str, known_rules: set[str] | None,
              known_tags: set[str] | None, parser: conditions.Parser) -> Question:
    if not isinstance(data, dict):
        raise ScorecardError(f"{path}: section {section!r}: a question must be a mapping")
    qid = str(data.get("id") or "")
    where = lines.get(qid, str(path))
    if not _ID.match(qid):
        raise ScorecardError(f"{where}: question id {qid!r} must be lower-case letters, digits, - or _")
    unknown = set(data) - QUESTION_FIELDS
    if unknown:
        raise ScorecardError(f"{where}: question {qid!r}: unknown field(s) {', '.join(sorted(unknown))} "
                             f"(allowed: {', '.join(sorted(QUESTION_FIELDS))})")
    text, weight = data.get("text"), data.get("weight")
    if not isinstance(text, str) or not text.strip():
        raise ScorecardError(f"{where}: question {qid!r}: text (the question a reviewer reads) is missing")
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight <= 1000:
        raise ScorecardError(f"{where}: question {qid!r}: weight must be a number above 0, at most 1000")
    if "no_if_found" in data and "yes_when" in data:
        raise ScorecardError(f"{where}: question {qid!r}: answered either from findings (no_if_found) or from a "
                             "condition (yes_when), not both")
    try:
        no_if = _names(data["no_if_found"], "no_if_found") if "no_if_found" in data else ()
        tagged = _names(data["applies_if_tagged"], "applies_if_tagged") if "applies_if_tagged" in data else ()
        yes_when = parser.parse(data["yes_when"]) if "yes_when" in data else None
    except ValueError as exc:
        raise ScorecardError(f"{where}: question {qid!r}: {exc}") from exc
    for rule_id in no_if:
        if known_rules is not None and rule_id not in known_rules:
            raise ScorecardError(f"{where}: question {qid!r}: no_if_found names {rule_id!r}, which is not a rule "
                                 f"of the rule set (one of {', '.join(sorted(known_rules))})")
    for tag in tagged:
        if known_tags is not None and tag not in known_tags:
            raise ScorecardError(f"{where}: question {qid!r}: applies_if_tagged names {tag!r}, which no tag rule of "
                                 f"the rule set gives (one of {', '.join(sorted(known_tags)) or 'none'})")
    return Question(qid, text.strip(), float(weight), section, no_if, yes_when, tagged)
