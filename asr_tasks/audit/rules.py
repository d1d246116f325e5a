"""The nightly QA audit: YAML rule sets evaluated over a day's transcripts.

A rule (``include/qa_rules/*.yaml``) states its conditions about a call
(``conditions.py``: what was said, by whom, when, negated or not, near what,
before what; personal data read out; the call's analytics) under ``when:`` (a
finding wherever they hold) or ``require:`` (a finding where they do not), or it
``tag:``s the calls where they hold with a category. The older kinds
(forbidden and required phrases, regular expressions, personal data, long
silences, talk-time ratios) read as before. A rule's ``examples:`` must and its
``counter_examples:`` must not fire, or the rule set is refused at load. Every
finding names the rule, the rule set's identity (a hash of its files), the
recording, the speaker and the seconds, so an auditor can jump straight to the
moment and a re-scoring can say what changed.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable

import yaml

from asr_tasks.audit import conditions
from asr_tasks.audit.call_score import CallScore
from asr_tasks.audit.conditions import Call, Condition, Hit
from asr_tasks.audit.redaction import RedactionReport
from asr_tasks.audit.rule_yaml import RuleError, line_of, no_repeated_keys
from asr_tasks.models import Recording, Segment, Transcript, _Serialisable
from asr_tasks.text.pii import redact_transcript
from asr_tasks.text.pii_policy import Policy

SEVERITIES = ("low", "medium", "high", "critical")
KINDS = {
    "forbidden_phrase": {"phrases"},
    "required_phrase": {"phrases", "within_seconds"},
    "regex": {"pattern"},
    "silence": {"max_seconds"},
    "talk_ratio": {"speaker"},
    "personal_data": {"pii_kinds"},  # a kind of include/pii/ was read out (found before masking; stored masked)
}
OPTIONAL = {"speaker", "luhn", "min_share", "max_share", "description", "fuzzy"}
COMMON = {"id", "kind", "severity", "description", "examples", "counter_examples"}
# a rule of conditions: when (a finding where they hold) or require (a finding where they do not); tag instead of
# severity for a category
CONDITION_FIELDS = {"id", "severity", "tag", "description", "speaker", "when", "require", "examples",
                    "counter_examples"}
_TAG = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


@dataclass(frozen=True)
class Rule:
    id: str
    kind: str  # one of KINDS, or "when" / "require" for a rule of conditions
    severity: str  # "tag" for a rule that tags calls
    description: str
    source: str  # file:line, for messages
    speakers: tuple[str, ...] = ()
    condition: Condition | None = None  # every kind but silence and talk_ratio
    within_seconds: float = 0.0
    max_seconds: float = 0.0
    min_share: float | None = None
    max_share: float | None = None
    tag: str | None = None
    examples: tuple[Any, ...] = ()
    counter_examples: tuple[Any, ...] = ()

    def applies_to(self, speaker: str) -> bool:
        return not self.speakers or speaker in self.speakers

    @property
    def reads_as(self) -> str:
        """The older kind a finding of this rule reads like (a phrase said, data read out, a phrase missing, a
        measure), for the words a page puts it in."""
        if self.kind == "require":
            return "required_phrase"
        if self.kind != "when":
            return self.kind
        leaf = self.condition
        while isinstance(leaf, (conditions.AllOf, conditions.AnyOf)):
            leaf = leaf.conditions[0]
        return {conditions.Pii: "personal_data", conditions.Pattern: "regex",
                conditions.Metric: "metric"}.get(type(leaf), "forbidden_phrase")


@dataclass
class Finding(_Serialisable):
    finding_id: str
    rule_id: str
    severity: str
    description: str
    recording_id: str
    key: str
    call_date: str
    agent_id: str | None
    speaker: str
    start: float
    end: float
    matched_text: str
    confidence: float = 1.0  # below 1 where a phrase matched fuzzily: how alike the words were
    rule_set: str = ""  # the identity of the rule set it came from (``RuleSet.identity``)


@dataclass(frozen=True)
class RuleSet:
    """The rules of a folder and their identity: a hash of the files' names and bytes."""

    rules: tuple[Rule, ...]
    identity: str


@dataclass
class AuditResult:
    call_date: str
    recordings: int
    findings: list[Finding] = field(default_factory=list)
    tags: dict[str, list[str]] = field(default_factory=dict)  # recording id: the categories its call was tagged
    rule_set: str = ""
    # how the day's masking fared (``run_audit`` adds it); None for a bare ``audit`` and for reports stored before
    redaction: RedactionReport | None = None
    scores: list[CallScore] = field(default_factory=list)  # each call's automatic answers on the scorecard

    def totals(self) -> dict[str, Any]:
        """Counts that name no party: what the DAG hands Airflow (XCom, which every DAG viewer reads)."""
        return {
            "date": self.call_date,
            "recordings": self.recordings,
            "findings": len(self.findings),
            "by_rule": dict(sorted(Counter(f.rule_id for f in self.findings).items())),
            "by_severity": dict(sorted(Counter(f.severity for f in self.findings).items())),
            "by_tag": dict(sorted(Counter(t for tags in self.tags.values() for t in tags).items())),
            "rule_set": self.rule_set,
        }

    def summary(self) -> dict[str, Any]:
        """The totals and the findings per agent: what the reports and ``asr audit`` show the QA team."""
        return {**self.totals(), "by_agent": dict(sorted(Counter(f.agent_id or "-" for f in self.findings).items()))}


def rule_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.yaml")) + sorted(folder.glob("*.yml"))


def configured_policy() -> Policy:
    from asr_tasks.config import get_settings
    from asr_tasks.text.pii_policy import load_policy

    return load_policy(get_settings().postprocess.path("pii_dir"))


def known_speakers() -> frozenset[str]:
    """The speakers a transcript can name (the configured channels' and the mono one's)."""
    from asr_tasks.config import get_settings
    from asr_tasks.inputs import speaker_names

    return frozenset(speaker_names(get_settings().audio))


def load_rule_set(folder: Path, policy: Policy | None = None) -> RuleSet:
    """Every rule file of a folder, validated whole (each rule's examples run) before any is used, with the set's
    identity. ``policy`` is the PII policy the examples of personal-data rules are masked with (the configured
    one when not given)."""
    files = rule_files(folder)
    if not files:
        raise RuleError(f"{folder}: no rule files (*.yaml)")
    rules: list[Rule] = []
    digest = hashlib.sha256()
    parser = conditions.Parser(known_speakers())
    for path in files:
        data = path.read_bytes()
        digest.update(f"{path.name}\x00{len(data)}\x00".encode() + data)
        rules.extend(load_file(path, parser))
    failures = same_ids(rules) + test_rules(rules, policy)
    if failures:
        raise RuleError(failures[0])
    return RuleSet(tuple(rules), digest.hexdigest()[:12])


def same_ids(rules: list[Rule]) -> list[str]:
    """A message for each rule whose id an earlier rule has."""
    seen: dict[str, str] = {}
    out = []
    for rule in rules:
        if rule.id in seen:
            out.append(f"{rule.source}: rule id {rule.id!r} already defined at {seen[rule.id]}")
        seen.setdefault(rule.id, rule.source)
    return out


def load_rules(folder: Path, policy: Policy | None = None) -> list[Rule]:
    """The rules of ``load_rule_set``, for a caller that does not record the set's identity."""
    return list(load_rule_set(folder, policy).rules)


def example_transcript(example: Any, rule: Rule) -> Transcript:
    """A rule's example as a call: see ``conditions.segments_of``."""
    segments, analytics = conditions.segments_of(example, rule.speakers[0] if rule.speakers else "agent")
    recording = Recording(recording_id="example", bucket="", key="example", etag="", size=0, call_id="example",
                          call_date="1970-01-01")
    return Transcript(recording=recording, duration=max((s.end for s in segments), default=0.0), segments=segments,
                      language=None, model="", pipeline_version="", analytics=analytics)


def test_rules(rules: list[Rule], policy: Policy | None = None) -> list[str]:
    """Each rule's kinds of personal data the policy does not have, examples that do not fire it and
    counter-examples that do, one message each (file:line, rule, the example); empty when every one holds."""
    policy = policy or configured_policy()
    kinds = set(policy.kinds)
    out = []
    for rule in rules:
        unknown = sorted(conditions.pii_kinds(rule.condition) - kinds) if rule.condition else []
        if unknown:
            out.append(f"{rule.source}: rule {rule.id!r}: {unknown[0]!r} is not a kind of personal data of the policy "
                       f"(one of {', '.join(sorted(kinds))})")
        for fires, examples in ((True, rule.examples), (False, rule.counter_examples)):
            for n, example in enumerate(examples, 1):
                name = "example" if fires else "counter-example"
                try:
                    fired = bool(evaluate(rule, redact_transcript(example_transcript(example, rule), policy), policy))
                except (TypeError, ValueError, KeyError) as exc:
                    out.append(f"{rule.source}: rule {rule.id!r}: {name} {n} cannot be read: {exc}")
                    continue
                if fired != fires:
                    what = f"{name} does not fire it" if fires else f"{name} fires it"
                    out.append(f"{rule.source}: rule {rule.id!r}: {what}: {example!r}")
    return out


def load_file(path: Path, parser: conditions.Parser | None = None) -> list[Rule]:
    """One rule file's rules, each checked (not its examples: ``test_rules``)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise RuleError(f"{path}: not UTF-8 text (save the rule file as UTF-8): {exc.reason} at byte {exc.start}") from exc
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise RuleError(f"{where}: invalid YAML: {getattr(exc, 'problem', exc)}") from exc
    if root is None:
        return []
    no_repeated_keys(path, root)
    if not isinstance(root, yaml.MappingNode) or {k.value for k, _ in root.value} != {"rules"}:
        raise RuleError(f"{path}:{root.start_mark.line + 1}: expected a mapping with one key, 'rules'")
    rules_node = root.value[0][1]
    if not isinstance(rules_node, yaml.SequenceNode):
        raise RuleError(f"{path}:{rules_node.start_mark.line + 1}: 'rules' must be a list")
    parser = parser or conditions.Parser(known_speakers())
    return [_build_rule(path, node, parser) for node in rules_node.value]


def _build_rule(path: Path, node: yaml.Node, parser: conditions.Parser) -> Rule:
    where = f"{path}:{node.start_mark.line + 1}"
    if not isinstance(node, yaml.MappingNode):
        raise RuleError(f"{where}: a rule must be a mapping")
    lines = {k.value: f"{path}:{k.start_mark.line + 1}" for k, _ in node.value}
    data = yaml.safe_load(yaml.serialize(node))
    rule_id = str(data.get("id", ""))
    if not rule_id:
        raise RuleError(f"{where}: rule without an 'id'")
    try:
        examples = _examples(data, "examples"), _examples(data, "counter_examples")
        if "kind" not in data:
            return _condition_rule(data, rule_id, where, lines, examples, parser, (path, node))
        return _kind_rule(data, rule_id, where, lines, examples, parser)
    except RuleError:
        raise
    except (TypeError, ValueError) as exc:
        raise RuleError(f"{where}: rule {rule_id!r}: {exc}") from exc


def _examples(data: dict[str, Any], name: str) -> tuple[Any, ...]:
    value = data.get(name) or []
    if not isinstance(value, list):
        raise ValueError(f"{name} must be a list")
    return tuple(value)


def _severity(data: dict[str, Any], rule_id: str, lines: dict[str, str]) -> str:
    if data.get("severity") not in SEVERITIES:
        raise RuleError(f"{lines.get('severity', lines['id'])}: rule {rule_id!r}: severity must be one of "
                        f"{', '.join(SEVERITIES)}")
    return str(data["severity"])


def _condition_rule(data: dict[str, Any], rule_id: str, where: str, lines: dict[str, str],
                    examples: tuple[tuple[Any, ...], tuple[Any, ...]], parser: conditions.Parser,
                    node: tuple[Path, yaml.Node]) -> Rule:
    """A rule of conditions: ``when`` or ``require``, with a severity or a ``tag``."""
    for name in data:
        if name not in CONDITION_FIELDS:
            raise RuleError(f"{lines[name]}: rule {rule_id!r}: unknown field {name!r} (a rule has when: or require:, "
                            f"or a kind: of {', '.join(sorted(KINDS))})")
    stated = [k for k in ("when", "require") if k in data]
    if len(stated) != 1:
        raise RuleError(f"{where}: rule {rule_id!r}: needs when: (where it fires) or require: (what must be said), "
                        f"one of them, or a kind:")
    tag = data.get("tag")
    if tag is not None:
        if "severity" in data:
            raise RuleError(f"{lines['tag']}: rule {rule_id!r}: a tag rule categorises calls and has no severity")
        if not isinstance(tag, str) or not _TAG.match(tag):
            raise RuleError(f"{lines['tag']}: rule {rule_id!r}: tag must be lower-case letters, digits, - or _")
    severity = "tag" if tag is not None else _severity(data, rule_id, lines)
    try:
        speakers = conditions.speakers_of(data.get("speaker"), parser.known)
    except ValueError as exc:
        raise RuleError(f"{lines['speaker']}: rule {rule_id!r}: {exc}") from exc
    try:
        condition = parser.parse(data[stated[0]], speakers)
    except ValueError as exc:
        line = line_of(str(exc), node[0], node[1], lines[stated[0]])
        raise RuleError(f"{line}: rule {rule_id!r}: {exc}") from exc
    if stated[0] == "require":
        condition = conditions.NotOf(condition)
    return Rule(id=rule_id, kind=stated[0], severity=severity, description=str(data.get("description", "")),
                source=where, speakers=speakers, condition=condition, tag=tag, examples=examples[0],
                counter_examples=examples[1])


def _kind_rule(data: dict[str, Any], rule_id: str, where: str, lines: dict[str, str],
               examples: tuple[tuple[Any, ...], tuple[Any, ...]], parser: conditions.Parser) -> Rule:
    """A rule of one of the older kinds, read into the conditions it states where it has them."""
    kind = data.get("kind")
    if kind not in KINDS:
        raise RuleError(f"{lines.get('kind', where)}: rule {rule_id!r}: unknown kind {kind!r} "
                        f"(one of {', '.join(sorted(KINDS))})")
    allowed = COMMON | KINDS[kind] | OPTIONAL
    for name in data:
        if name not in allowed:
            raise RuleError(f"{lines[name]}: rule {rule_id!r}: unknown field {name!r} "
                            f"(allowed for {kind}: {', '.join(sorted(allowed))})")
    for name in KINDS[kind] | {"severity"}:
        if name not in data:
            raise RuleError(f"{where}: rule {rule_id!r}: missing field {name!r}")
    severity = _severity(data, rule_id, lines)
    speakers = conditions.speakers_of(data.get("speaker"), parser.known)
    if "phrases" in data and (not isinstance(data["phrases"], list) or not data["phrases"]
                              or not all(isinstance(p, str) and p.strip() for p in data["phrases"])):
        raise RuleError(f"{lines['phrases']}: rule {rule_id!r}: 'phrases' must be a list of non-empty strings")
    condition: Condition | None = None
    said = {"said": data.get("phrases"), **({"fuzzy": data["fuzzy"]} if "fuzzy" in data else {})}
    try:
        if kind == "forbidden_phrase":
            condition = parser.parse(said, speakers)
        elif kind == "required_phrase":
            condition = conditions.NotOf(parser.parse(
                {**said, "first_seconds": float(data["within_seconds"])}, speakers))
        elif kind == "regex":
            condition = parser.parse({"pattern": data["pattern"], "luhn": data.get("luhn", False)},
                                         speakers)
        elif kind == "personal_data":
            condition = parser.parse({"pii": [str(k) for k in data.get("pii_kinds") or ()]}, speakers)
    except ValueError as exc:
        field_line = lines.get("pattern" if kind == "regex" else "phrases", where)
        raise RuleError(f"{field_line}: rule {rule_id!r}: {exc}") from exc
    return Rule(
        id=rule_id, kind=kind, severity=severity, description=str(data.get("description", "")), source=where,
        speakers=speakers, condition=condition, within_seconds=float(data.get("within_seconds", 0.0)),
        max_seconds=float(data.get("max_seconds", 0.0)),
        min_share=None if data.get("min_share") is None else float(data["min_share"]),
        max_share=None if data.get("max_share") is None else float(data["max_share"]),
        examples=examples[0], counter_examples=examples[1],
    )


def _finding(rule: Rule, t: Transcript, hit: Hit) -> Finding:
    rec = t.recording
    digest = hashlib.sha256(f"{rule.id}\x00{rec.recording_id}\x00{hit.speaker}\x00{hit.start:.3f}\x00{hit.text}".encode())
    return Finding(
        finding_id=digest.hexdigest()[:24], rule_id=rule.id, severity=rule.severity,
        description=rule.description, recording_id=rec.recording_id, key=rec.key, call_date=rec.call_date,
        agent_id=rec.agent_id, speaker=hit.speaker, start=round(hit.start, 3), end=round(hit.end, 3),
        matched_text=hit.text, confidence=hit.confidence,
    )


def hits_of(rule: Rule, transcript: Transcript, policy: Policy | None = None) -> list[Hit]:
    """Where one rule fires in one call (with a policy, its back-channels do not end a speaker's turn)."""
    if rule.condition is not None:
        return conditions.hits(rule.condition, Call(transcript, policy.spoken if policy else None))
    segments = [s for s in transcript.segments if s.text.strip()]
    if rule.kind == "silence":
        return [Hit("any", start, end, f"{end - start:.1f} s") for start, end in _silences(transcript, segments)
                if end - start > rule.max_seconds]
    talk = _talk(transcript, segments)  # talk_ratio
    total = sum(talk.values())
    mine = sum(seconds for speaker, seconds in talk.items() if rule.applies_to(speaker))
    if total > 0 and any(speaker != "mixed" for speaker in talk):
        share = mine / total
        if (rule.max_share is not None and share > rule.max_share) or (
                rule.min_share is not None and share < rule.min_share):
            return [Hit(",".join(rule.speakers), 0.0, transcript.duration, f"{share:.0%} of talk time")]
    return []


def evaluate(rule: Rule, transcript: Transcript, policy: Policy | None = None) -> list[Finding]:
    """One rule over one call: a finding per place it fires (for a tag rule: where it would tag the call); hits
    of one speaker whose seconds overlap are one finding, the first."""
    kept: list[Hit] = []
    for hit in hits_of(rule, transcript, policy):
        if not any(k.speaker == hit.speaker and hit.start < k.end and k.start < hit.end for k in kept):
            kept.append(hit)
    return [_finding(rule, transcript, hit) for hit in kept]


def _silences(transcript: Transcript, segments: list[Segment]) -> list[tuple[float, float]]:
    """Where nobody spoke: the call's analytics (the VAD's), or the gaps between segments for older transcripts."""
    if transcript.analytics:
        return [(float(a), float(b)) for a, b in transcript.analytics.get("silences") or []]
    ordered = sorted(segments, key=lambda s: s.start)
    out, reach = [], ordered[0].end if ordered else 0.0
    for seg in ordered[1:]:
        if seg.start > reach:
            out.append((reach, seg.start))
        reach = max(reach, seg.end)
    return out


def _talk(transcript: Transcript, segments: list[Segment]) -> dict[str, float]:
    """Talk seconds per speaker: the call's analytics (the VAD's), or the segments' spans for older transcripts."""
    if transcript.analytics:
        return {name: float(s["talk_seconds"]) for name, s in (transcript.analytics.get("speakers") or {}).items()}
    talk: dict[str, float] = {}
    for seg in segments:
        talk[seg.speaker] = talk.get(seg.speaker, 0.0) + seg.end - seg.start
    return talk


def audit(transcripts: Iterable[Transcript], rules: list[Rule] | RuleSet, call_date: str,
          policy: Policy | None = None) -> AuditResult:
    """Every rule over every call: findings from the rules with a severity, tags from the tag rules. With a PII
    policy, a transcript not yet masked by it is masked first: the rules see what a card number was
    (``personal_data``), the findings only its mask."""
    rule_set = rules.identity if isinstance(rules, RuleSet) else ""
    rule_list = list(rules.rules if isinstance(rules, RuleSet) else rules)
    result = AuditResult(call_date=call_date, recordings=0, rule_set=rule_set)
    for transcript in transcripts:
        if policy is not None:
            transcript = redact_transcript(transcript, policy)
        result.recordings += 1
        tags = set()
        for rule in rule_list:
            found = evaluate(rule, transcript, policy)
            if rule.tag is not None:
                tags |= {rule.tag} if found else set()
                continue
            result.findings.extend(replace(f, rule_set=rule_set) for f in found)
        if tags:
            result.tags[transcript.recording.recording_id] = sorted(tags)
    result.findings.sort(key=lambda f: (f.key, f.start, f.rule_id))
    return result
