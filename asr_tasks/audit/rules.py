"""The nightly QA audit: YAML rule sets evaluated over a day's transcripts.

Rules (``include/qa_rules/*.yaml``) come in five kinds: forbidden phrases,
required phrases within a time window, regular expressions (PII), long silences
and talk-time ratios. Every finding names the rule, the recording, the speaker
and the seconds, so an auditor can jump straight to the moment.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

import yaml

from asr_tasks.audit.redaction import RedactionReport
from asr_tasks.chars import CJK_CHAR
from asr_tasks.models import Segment, Transcript, _Serialisable
from asr_tasks.text.pii import redact_transcript
from asr_tasks.text.pii_policy import Policy, luhn

SEVERITIES = ("low", "medium", "high", "critical")
KINDS = {
    "forbidden_phrase": {"phrases"},
    "required_phrase": {"phrases", "within_seconds"},
    "regex": {"pattern"},
    "silence": {"max_seconds"},
    "talk_ratio": {"speaker"},
    "personal_data": {"pii_kinds"},  # a kind of include/pii/ was read out (found before masking; stored masked)
}
OPTIONAL = {"speaker", "luhn", "min_share", "max_share", "description"}
COMMON = {"id", "kind", "severity", "description"}
_PUNCT = re.compile(r"[^\w\s]", re.UNICODE)


class RuleError(ValueError):
    """A rule file that cannot be used; the message names the file and line."""


@dataclass(frozen=True)
class Rule:
    id: str
    kind: str
    severity: str
    description: str
    source: str  # file:line, for messages
    speakers: tuple[str, ...] = ()
    phrases: tuple[str, ...] = ()
    within_seconds: float = 0.0
    pattern: re.Pattern[str] | None = None
    luhn: bool = False
    max_seconds: float = 0.0
    min_share: float | None = None
    max_share: float | None = None
    pii_kinds: tuple[str, ...] = ()

    def applies_to(self, speaker: str) -> bool:
        return not self.speakers or speaker in self.speakers


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


@dataclass
class AuditResult:
    call_date: str
    recordings: int
    findings: list[Finding] = field(default_factory=list)
    # how the day's masking fared (``run_audit`` adds it); None for a bare ``audit`` and for reports stored before
    redaction: RedactionReport | None = None

    def totals(self) -> dict[str, Any]:
        """Counts that name no party: what the DAG hands Airflow (XCom, which every DAG viewer reads)."""
        return {
            "date": self.call_date,
            "recordings": self.recordings,
            "findings": len(self.findings),
            "by_rule": dict(sorted(Counter(f.rule_id for f in self.findings).items())),
            "by_severity": dict(sorted(Counter(f.severity for f in self.findings).items())),
        }

    def summary(self) -> dict[str, Any]:
        """The totals and the findings per agent: what the reports and ``asr audit`` show the QA team."""
        return {**self.totals(), "by_agent": dict(sorted(Counter(f.agent_id or "-" for f in self.findings).items()))}


@lru_cache(maxsize=1)
def _to_simplified() -> Any:
    import opencc

    return opencc.OpenCC("t2s")


def normalise(text: str) -> str:
    """What phrases are matched against: simplified script, width- and case-folded, no punctuation."""
    text = unicodedata.normalize("NFKC", text).lower()
    if CJK_CHAR.search(text):
        text = _to_simplified().convert(text)
    text = _PUNCT.sub(" ", text)
    text = re.sub(r"\s+", " ", text).strip()
    return re.sub(r"(?<=[\u3400-\u9fff]) (?=[\u3400-\u9fff])", "", text)


def _contains(haystack: str, phrase: str) -> bool:
    """Chinese phrases match as substrings, others on word boundaries."""
    if CJK_CHAR.search(phrase):
        return phrase in haystack
    return re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", haystack) is not None


def load_rules(folder: Path) -> list[Rule]:
    """Every ``*.yaml`` rule file of a folder, validated whole before any is used."""
    files = sorted(folder.glob("*.yaml")) + sorted(folder.glob("*.yml"))
    if not files:
        raise RuleError(f"{folder}: no rule files (*.yaml)")
    rules: list[Rule] = []
    for path in files:
        rules.extend(_load_file(path))
    seen: dict[str, str] = {}
    for rule in rules:
        if rule.id in seen:
            raise RuleError(f"{rule.source}: rule id {rule.id!r} already defined at {seen[rule.id]}")
        seen[rule.id] = rule.source
    return rules


def _load_file(path: Path) -> list[Rule]:
    text = path.read_text(encoding="utf-8")
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise RuleError(f"{where}: invalid YAML: {getattr(exc, 'problem', exc)}") from exc
    if root is None:
        return []
    if not isinstance(root, yaml.MappingNode) or {k.value for k, _ in root.value} != {"rules"}:
        raise RuleError(f"{path}:{root.start_mark.line + 1}: expected a mapping with one key, 'rules'")
    rules_node = root.value[0][1]
    if not isinstance(rules_node, yaml.SequenceNode):
        raise RuleError(f"{path}:{rules_node.start_mark.line + 1}: 'rules' must be a list")
    return [_build_rule(path, node) for node in rules_node.value]


def _build_rule(path: Path, node: yaml.Node) -> Rule:
    where = f"{path}:{node.start_mark.line + 1}"
    if not isinstance(node, yaml.MappingNode):
        raise RuleError(f"{where}: a rule must be a mapping")
    lines = {k.value: f"{path}:{k.start_mark.line + 1}" for k, _ in node.value}
    data = yaml.safe_load(yaml.serialize(node))
    rule_id = str(data.get("id", ""))
    kind = data.get("kind")
    if not rule_id:
        raise RuleError(f"{where}: rule without an 'id'")
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
    if data["severity"] not in SEVERITIES:
        raise RuleError(f"{lines['severity']}: rule {rule_id!r}: severity must be one of {', '.join(SEVERITIES)}")
    speakers = data.get("speaker") or ()
    speakers = (speakers,) if isinstance(speakers, str) else tuple(str(s) for s in speakers)
    phrases = data.get("phrases") or ()
    if "phrases" in data and (not isinstance(phrases, list) or not all(isinstance(p, str) and p.strip() for p in phrases)):
        raise RuleError(f"{lines['phrases']}: rule {rule_id!r}: 'phrases' must be a list of non-empty strings")
    pattern = None
    if "pattern" in data:
        try:
            pattern = re.compile(str(data["pattern"]))
        except re.error as exc:
            raise RuleError(f"{lines['pattern']}: rule {rule_id!r}: invalid regular expression: {exc}") from exc
    try:
        return Rule(
            id=rule_id, kind=kind, severity=data["severity"], description=str(data.get("description", "")),
            source=where, speakers=speakers, phrases=tuple(normalise(p) for p in phrases),
            within_seconds=float(data.get("within_seconds", 0.0)), pattern=pattern, luhn=bool(data.get("luhn", False)),
            max_seconds=float(data.get("max_seconds", 0.0)),
            min_share=None if data.get("min_share") is None else float(data["min_share"]),
            max_share=None if data.get("max_share") is None else float(data["max_share"]),
            pii_kinds=tuple(str(k) for k in data.get("pii_kinds") or ()),
        )
    except (TypeError, ValueError) as exc:
        raise RuleError(f"{where}: rule {rule_id!r}: {exc}") from exc


def _finding(rule: Rule, t: Transcript, speaker: str, start: float, end: float, matched: str) -> Finding:
    rec = t.recording
    digest = hashlib.sha256(f"{rule.id}\x00{rec.recording_id}\x00{speaker}\x00{start:.3f}\x00{matched}".encode())
    return Finding(
        finding_id=digest.hexdigest()[:24], rule_id=rule.id, severity=rule.severity,
        description=rule.description, recording_id=rec.recording_id, key=rec.key, call_date=rec.call_date,
        agent_id=rec.agent_id, speaker=speaker, start=round(start, 3), end=round(end, 3), matched_text=matched,
    )


def evaluate(rule: Rule, transcript: Transcript) -> list[Finding]:
    """One rule over one call."""
    segments = [s for s in transcript.segments if s.text.strip()]
    own = [s for s in segments if rule.applies_to(s.speaker) or s.speaker == "mixed"]
    out: list[Finding] = []
    if rule.kind == "forbidden_phrase":
        for seg in own:
            text = normalise(seg.text)
            for phrase in rule.phrases:
                if _contains(text, phrase):
                    out.append(_finding(rule, transcript, seg.speaker, seg.start, seg.end, phrase))
                    break
    elif rule.kind == "required_phrase":
        window = [s for s in own if s.start < rule.within_seconds]
        said = any(_contains(normalise(s.text), p) for s in window for p in rule.phrases)
        if segments and not said:
            speaker = rule.speakers[0] if rule.speakers else "any"
            out.append(_finding(rule, transcript, speaker, 0.0, rule.within_seconds, ""))
    elif rule.kind == "regex":
        assert rule.pattern is not None
        for seg in own:
            for match in rule.pattern.finditer(seg.text):
                digits = re.sub(r"\D", "", match.group(0))
                if rule.luhn and not luhn(digits):
                    continue
                out.append(_finding(rule, transcript, seg.speaker, seg.start, seg.end, match.group(0)))
    elif rule.kind == "personal_data":
        for found in transcript.pii:
            if found["kind"] in rule.pii_kinds and (rule.applies_to(found["speaker"]) or found["speaker"] == "mixed"):
                out.append(_finding(rule, transcript, found["speaker"], found["start"], found["end"], found["masked"]))
    elif rule.kind == "silence":
        for start, end in _silences(transcript, segments):
            if end - start > rule.max_seconds:
                out.append(_finding(rule, transcript, "any", start, end, f"{end - start:.1f} s"))
    elif rule.kind == "talk_ratio":
        talk = _talk(transcript, segments)
        total = sum(talk.values())
        mine = sum(seconds for speaker, seconds in talk.items() if rule.applies_to(speaker))
        if total > 0 and any(speaker != "mixed" for speaker in talk):
            share = mine / total
            if (rule.max_share is not None and share > rule.max_share) or (
                rule.min_share is not None and share < rule.min_share
            ):
                out.append(_finding(rule, transcript, ",".join(rule.speakers), 0.0, transcript.duration,
                                    f"{share:.0%} of talk time"))
    return out


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


def audit(transcripts: Iterable[Transcript], rules: list[Rule], call_date: str,
          policy: Policy | None = None) -> AuditResult:
    """Every rule over every call. With a PII policy, a transcript not yet masked by it is masked first: the
    rules see what a card number was (``personal_data``), the findings only its mask."""
    result = AuditResult(call_date=call_date, recordings=0)
    for transcript in transcripts:
        if policy is not None:
            transcript = redact_transcript(transcript, policy)
        result.recordings += 1
        for rule in rules:
            result.findings.extend(evaluate(rule, transcript))
    result.findings.sort(key=lambda f: (f.key, f.start, f.rule_id))
    return result

