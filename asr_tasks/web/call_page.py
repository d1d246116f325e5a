"""What the call page shows: the conversation turn by turn, its findings, its analytics, and a timeline picture.

Turns are a speaker's consecutive segments; each segment keeps its times so a
click plays from there and playback highlights it. The search terms of the hit
the page was opened from are marked in the text. The timeline is an SVG drawn
here: one lane per speaker with their talk, silences and overlaps on the axis
below, findings as markers; the page maps a click on it to a second.
Transcripts export as plain text, SRT, WebVTT and JSON.
"""

from __future__ import annotations

import dataclasses
import html
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from markupsafe import Markup

from asr_tasks.audit.rules import Rule, RuleError, load_rules
from asr_tasks.audit.saved_searches import WATCH_PREFIX
from asr_tasks.config import Settings
from asr_tasks.index.query import Term, clock, terms
from asr_tasks.index.query import parse as parse_query
from asr_tasks.index.tolerant import tolerant_of
from asr_tasks.models import Segment
from asr_tasks.states import RecordingState
from asr_tasks.text.analytics import intersect
from asr_tasks.text.sounds import spans as sound_spans

TIMELINE_WIDTH = 1000
LABEL_WIDTH = 70  # the lanes' names, left of the time axis
LANE_HEIGHT = 18
EXPORT_FORMATS = ("txt", "srt", "vtt", "json")


@dataclass
class Turn:
    speaker: str
    channel: int
    start: float
    end: float
    segments: list[Segment] = field(default_factory=list)


def turns(segments: Iterable[Segment]) -> list[Turn]:
    """Consecutive segments of one speaker, in time order, as one turn."""
    out: list[Turn] = []
    for seg in sorted(segments, key=lambda s: (s.start, s.channel)):
        if out and out[-1].speaker == seg.speaker:
            out[-1].segments.append(seg)
            out[-1].end = max(out[-1].end, seg.end)
        else:
            out.append(Turn(seg.speaker, seg.channel, seg.start, seg.end, [seg]))
    return out


def query_terms(query: str, sounds_like: bool = False) -> list[Term]:
    """The words and phrases a search asked for (not those it excluded: they are what must not be said), longest
    first, to mark them in the text."""
    node = parse_query(query, sounds_like) if query.strip() else None
    found = {t for t in terms(node) if t.text.strip()}
    return sorted(found, key=lambda t: (-len(t.text), t.text, t.tolerant))


def marked(text: str, terms: list[Term]) -> Markup:
    """The text escaped, each occurrence of a term in <mark> (case-insensitive), and where a tolerant term sounds
    or is spelt like it."""
    if not terms:
        return Markup(html.escape(text))
    pattern = re.compile("|".join(re.escape(t.text) for t in terms), re.IGNORECASE)
    spans = [(m.start(), m.end()) for m in pattern.finditer(text)]
    for term in terms:
        tolerant = tolerant_of(term)
        spans += [(s.start, s.end) for s in (sound_spans(text, tolerant) if tolerant else [])]
    out, at = [], 0
    for start, end in sorted(spans):
        if start < at:
            continue
        out += [html.escape(text[at:start]), f'<mark class="match">{html.escape(text[start:end])}</mark>']
        at = end
    out.append(html.escape(text[at:]))
    # Words of one phrase said together are one match: "<mark>your</mark> <mark>country</mark>" is one.
    return Markup(re.sub(r'</mark>(\s+)<mark class="match">', r"\1", "".join(out)))


def timeline_svg(duration: float, analytics: dict[str, Any], findings: list[dict[str, Any]],
                 speakers: list[str]) -> Markup:
    """The call on one axis: each speaker's talk in their lane, silences and overlaps below, findings as markers."""
    scale = (TIMELINE_WIDTH - LABEL_WIDTH) / duration if duration > 0 else 0.0

    def x(t: float) -> str:
        return f"{LABEL_WIDTH + t * scale:.1f}"

    speech = {name: [(float(a), float(b)) for a, b in spans] for name, spans in (analytics.get("speech") or {}).items()}
    lanes = [name for name in speakers if name in speech] or sorted(speech)
    height = LANE_HEIGHT * (len(lanes) + 1) + 24
    parts = [f'<svg id="timeline" class="timeline" viewBox="0 0 {TIMELINE_WIDTH} {height}" '
             f'width="100%" height="{height}" data-duration="{duration:.3f}" data-axis-from="{LABEL_WIDTH}" '
             f'data-axis-width="{TIMELINE_WIDTH - LABEL_WIDTH}" data-view-width="{TIMELINE_WIDTH}" role="img" '
             'aria-label="Timeline: each speaker\'s talk, silences, overlaps and findings">']
    for n, name in enumerate(lanes):
        y = n * LANE_HEIGHT
        parts.append(f'<text x="2" y="{y + 13}" class="lane-name">{html.escape(name)}</text>')
        for a, b in speech[name]:
            parts.append(f'<rect class="talk {html.escape(name)}" x="{x(a)}" y="{y + 2}" '
                         f'width="{max(1.0, (b - a) * scale):.1f}" height="{LANE_HEIGHT - 4}"><title>{html.escape(name)} '
                         f'{a:.1f}-{b:.1f} s</title></rect>')
    y = len(lanes) * LANE_HEIGHT
    for a, b in analytics.get("silences") or []:
        parts.append(f'<rect class="silence" x="{x(a)}" y="{y + 4}" width="{max(1.0, (b - a) * scale):.1f}" '
                     f'height="{LANE_HEIGHT - 8}"><title>silence {a:.1f}-{b:.1f} s</title></rect>')
    if len(lanes) == 2:
        for a, b in intersect(speech[lanes[0]], speech[lanes[1]]):
            parts.append(f'<rect class="overlap" x="{x(a)}" y="{y + 2}" '
                         f'width="{max(1.0, (b - a) * scale):.1f}" height="{LANE_HEIGHT - 4}">'
                         f'<title>overlap {a:.1f}-{b:.1f} s</title></rect>')
    for f in findings:
        parts.append(f'<path class="finding {html.escape(str(f["severity"]))}" d="M{x(float(f["start"]))} {y + LANE_HEIGHT + 2} '
                     f'l5 9 h-10 z"><title>{html.escape(named(f))}</title></path>')
    ticks = max(1, int(duration // 60) or 1)
    step = duration / ticks if duration else 0
    for k in range(ticks + 1):
        t = k * step
        parts.append(f'<text x="{min(float(x(t)), TIMELINE_WIDTH - 30):.1f}" y="{height - 2}" class="tick">'
                     f'{int(t // 60)}:{int(t % 60):02d}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


@lru_cache(maxsize=4)
def _rules(folder: Path, changed: tuple[float, ...]) -> dict[str, Rule]:
    """The rule files as they are now (``changed``: their times, so an edited file is read again)."""
    try:
        return {rule.id: rule for rule in load_rules(folder)}
    except (RuleError, OSError):
        return {}  # the page still shows each finding, by its rule's id


def audit_rules(settings: Settings) -> dict[str, Rule]:
    """The QA rules by id, to say what each finding means (a rule since removed is named by its id only)."""
    folder = settings.audit.path("qa_rules_dir")
    files = sorted(folder.glob("*.y*ml")) if folder.is_dir() else []
    return _rules(folder, tuple(f.stat().st_mtime for f in files))


def _by(speaker: str) -> str:
    return f"the {speaker}" if speaker and speaker not in ("any", "mixed") else "someone"


def finding_words(f: dict[str, Any], rules: dict[str, Rule]) -> str:
    """What a finding means, in words of its rule's kind: a phrase said or read out at a second, a silence from
    a second, a share of the whole call's talk, a disclosure missing from the first seconds (an absence is
    never "at 0:00.0")."""
    rule_id, said, speaker = str(f["rule_id"]), str(f.get("matched_text") or ""), str(f.get("speaker") or "")
    start, end = float(f["start"]), float(f["end"])
    rule = rules.get(rule_id)
    kind = rule.reads_as if rule else ("forbidden_phrase" if rule_id.startswith(WATCH_PREFIX)
                                       else "required_phrase" if not said and start == 0 else "")
    at = f"{rule_id} at {clock(start)}"
    if kind == "required_phrase":
        name = rule_id.replace("-", " ").replace("_", " ")
        window = f"in the first {end:g} s" if start == 0 else f"from {clock(start)} to {clock(end)}"
        return f"no {name} {window}" + (f" from {_by(speaker)}" if _by(speaker) != "someone" else "")
    if kind in ("forbidden_phrase", "regex"):
        confidence = float(f.get("confidence") or 1.0)
        alike = f" (words {confidence:.0%} alike)" if confidence < 1 else ""
        return f"{at}: {_by(speaker)} said “{said}”{alike}"
    if kind == "personal_data":
        return f"{at}: {_by(speaker)} read out {said}"
    if kind == "metric":
        return f"{rule_id}: {said}" + (f" ({_by(speaker)})" if _by(speaker) != "someone" else "")
    if kind == "silence":
        return f"{at}: nobody spoke for {end - start:.0f} s"
    if kind == "talk_ratio":
        bounds = [f"at most {rule.max_share:.0%}" if rule and rule.max_share is not None else "",
                  f"at least {rule.min_share:.0%}" if rule and rule.min_share is not None else ""]
        allowed = " and ".join(b for b in bounds if b)
        return f"{rule_id}: {_by(speaker)} took {said}" + (f" ({allowed} allowed)" if allowed else "")
    return at + (f": {said}" if said else "")


def named(f: dict[str, Any]) -> str:
    """A finding's words with its rule's id, where the words do not already name it."""
    return f["words"] if f["rule_id"] in f["words"] else f"{f['words']} ({f['rule_id']})"


def flagger(findings: list[dict[str, Any]]) -> Callable[[Segment], str]:
    """What a segment is flagged for: the findings whose matched text it overlaps, rule and description."""
    def flag(seg: Segment) -> str:
        return "; ".join(named(f) for f in findings
                         if float(f["start"]) < seg.end and seg.start < float(f["end"]) and f["matched_text"])

    return flag


def call_view(rec: dict[str, Any], segments: list[Segment], findings: list[dict[str, Any]], terms: list[Term],
              t: float, rules: dict[str, Rule]) -> dict[str, Any]:
    """What call.html is filled with: the turns with the search's ``terms`` marked, the findings in words of
    their ``rules``, the QA tags, the analytics and the timeline, opened at second ``t``; the page's language is
    the call's when it has one. A quarantined call has nothing to play or export, and the page says why instead."""
    speakers = [name for _, name in sorted({(s.channel, s.speaker) for s in segments})]
    analytics = rec.get("analytics") or {}
    languages = {s.language for s in segments if s.language} or {rec.get("language") or "en"}
    findings = [{**f, "words": finding_words(f, rules)} for f in findings]
    return {
        "rec": rec, "turns": turns(segments), "findings": findings, "analytics": analytics,
        "tags": rec.get("tags") or [],
        "quarantined": rec.get("state") == RecordingState.QUARANTINED,
        "timeline": timeline_svg(float(rec.get("duration") or 0.0), analytics, findings, speakers),
        "channels": len(analytics.get("speech") or {}) or len(speakers),
        "failures": [f for f in (rec.get("quality_failures") or "").split(",") if f],
        "terms": terms, "mark": lambda text: marked(text, terms), "flag": flagger(findings), "clock": clock, "t": t,
        "formats": EXPORT_FORMATS, "lang": languages.pop() if len(languages) == 1 else "en",
    }


def _stamp(seconds: float, separator: str) -> str:
    ms = int(round(seconds * 1000))
    return f"{ms // 3600000:02d}:{ms // 60000 % 60:02d}:{ms // 1000 % 60:02d}{separator}{ms % 1000:03d}"


def one_line(text: str) -> str:
    """A segment's text on one line: a line break inside it would end a cue or a line and forge the next, and
    a cue's text may not hold the arrow of a timing line."""
    return " ".join(text.split()).replace("-->", "->")


def export_transcript(fmt: str, rec: dict[str, Any], segments: list[Segment]) -> str:
    """A call's transcript as plain text, SRT, WebVTT or JSON (segments in time order, speakers named; in the
    line formats each segment on one line)."""
    ordered = sorted(segments, key=lambda s: (s.start, s.channel))
    if fmt in ("txt", "srt", "vtt"):
        ordered = [dataclasses.replace(s, text=one_line(s.text), speaker=one_line(s.speaker)) for s in ordered]
    if fmt == "txt":
        head = one_line(f"{rec.get('key')} ({rec.get('call_date') or 'undated'}, agent {rec.get('agent_id') or '-'})")
        head += "\n\n"
        return head + "".join(f"[{_stamp(s.start, '.')}] {s.speaker}: {s.text}\n" for s in ordered)
    if fmt == "srt":
        return "\n".join(f"{n}\n{_stamp(s.start, ',')} --> {_stamp(s.end, ',')}\n{s.speaker}: {s.text}\n"
                         for n, s in enumerate(ordered, 1))
    if fmt == "vtt":  # a cue's text is markup in WebVTT: <, > and & escaped, as the format asks
        return "WEBVTT\n\n" + "\n".join(f"{_stamp(s.start, '.')} --> {_stamp(s.end, '.')}\n"
                                        f"<v {html.escape(s.speaker)}>{html.escape(s.text, quote=False)}\n"
                                        for s in ordered)
    if fmt == "json":
        fields = ("recording_id", "key", "call_date", "agent_id", "customer_id", "direction", "duration", "quality")
        return json.dumps({**{k: rec.get(k) for k in fields},
                           "segments": [{"speaker": s.speaker, "channel": s.channel, "start": s.start, "end": s.end,
                                         "text": s.text} for s in ordered]}, ensure_ascii=False, indent=1)
    raise ValueError(f"unknown transcript format {fmt!r} (formats: {', '.join(EXPORT_FORMATS)})")

