"""The search syntax shared by every index backend, parsed once so that all answer alike.

The grammar is simple_query_string's: words and ``"quoted phrases"`` are ANDed
(``+`` may be written explicitly), ``|`` is OR, a leading ``-`` excludes a word,
phrase or ``( group )``. AND binds tighter than OR (``a b | c`` is ``(a b) | c``).
A leading ``~`` makes a word, phrase or group tolerant: it also matches what sounds
like it or is spelt nearly like it (``asr_tasks.text.sounds``); a sounds-like search
(``Filters.sounds_like``) makes every term so. Exclusions stay exact (``-~word``
excludes tolerantly): a search made wider must not also hide more.
Every word is matched as a phrase of its tokens, so ``保证收益`` and ``e-mail`` match
only consecutively. An exclusion needs something positive beside it (``-风险``
alone finds nothing). Any input parses: stray quotes and parentheses close at the
end, operators without operands are dropped, so a user's query is never a syntax
error in SQLite FTS5 or in Elasticsearch. What a person types is checked first
(``check_query``, ``checked_filters``), so that a query or filter that could only
find nothing is refused with why instead.

Elasticsearch's own simple_query_string parser reads operators left to right
without precedence and lets ``-`` mean "or not" under the OR default; rendering
our tree as a bool query of one-phrase simple_query_strings keeps its analysers
while fixing the boolean meaning to the one SQLite gets.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence, Union

from asr_tasks.inputs import InputError, calendar_day, count, day_range, one_of, percent, share, short_text
from asr_tasks.models import SearchHit
from asr_tasks.states import GateOutcome

# What every backend marks a highlight with (control characters no transcript contains); callers choose the tags.
HL_OPEN, HL_CLOSE = "\x02", "\x03"

_WORD = re.compile(r"\w")
_BARE_END = re.compile(r'[\s"()|]')


@dataclass(frozen=True)
class Term:
    """One word or quoted phrase as the user wrote it; ``tolerant``: matched by sound and spelling too."""

    text: str
    tolerant: bool = False


@dataclass(frozen=True)
class And:
    """All of ``items`` and none of ``exclude``."""

    items: tuple["Node", ...]
    exclude: tuple["Node", ...] = ()


@dataclass(frozen=True)
class Or:
    items: tuple["Node", ...]


Node = Union[Term, And, Or]


def _tokens(query: str) -> Iterator[tuple[str, str]]:
    """(kind, text) pairs: PHRASE, WORD, '(', ')', '|', '+', '-', '~'."""
    i, n = 0, len(query)
    while i < n:
        ch = query[i]
        if ch.isspace():
            i += 1
        elif ch == '"':
            end = query.find('"', i + 1)
            end = n if end < 0 else end
            yield "PHRASE", query[i + 1:end]
            i = end + 1
        elif ch in "()|":
            yield ch, ch
            i += 1
        elif ch in "+-~":
            # An operator only when attached to what follows ("-risk"); inside a word ("e-mail") it is text.
            if i + 1 < n and not query[i + 1].isspace():
                yield ch, ch
            i += 1
        else:
            match = _BARE_END.search(query, i)
            end = match.start() if match else n
            yield "WORD", query[i:end]
            i = end


MAX_DEPTH = 16  # parentheses nested deeper than this only group, they add no level
MAX_QUERY_CHARS = 1000


def _bounded(tokens: Iterator[tuple[str, str]]) -> Iterator[tuple[str, str]]:
    """The tokens with parentheses beyond ``MAX_DEPTH`` dropped: any input stays a query of bounded depth."""
    depth = 0
    for kind, text in tokens:
        if kind == "(":
            depth += 1
            if depth > MAX_DEPTH:
                continue
        elif kind == ")":
            depth -= 1
            if depth >= MAX_DEPTH:
                continue
        yield kind, text


def _depth(query: str) -> int:
    """How deep the query's parentheses nest (those inside quotes are text)."""
    depth = deepest = 0
    for kind, _ in _tokens(query):
        if kind == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif kind == ")":
            depth = max(0, depth - 1)
    return deepest


def check_query(query: str, name: str) -> str:
    """A query as a person typed it, refused (``InputError``) where the index would quietly answer something else
    than asked: too long, nested beyond ``MAX_DEPTH``, or words that are all excluded (which find nothing)."""
    if len(query) > MAX_QUERY_CHARS:
        raise InputError(f"{name}: longer than {MAX_QUERY_CHARS} characters")
    if _depth(query) > MAX_DEPTH:
        raise InputError(f"{name}: parentheses nested deeper than {MAX_DEPTH} levels")
    if _WORD.search(query) and parse(query) is None:
        raise InputError(f"{name} {query!r}: only excludes, and exclusions alone find nothing: "
                         "add a word to look for ('premium -risk')")
    return query


class _Parser:
    def __init__(self, query: str) -> None:
        self.tokens = list(_bounded(_tokens(query)))
        self.pos = 0

    def peek(self) -> str | None:
        return self.tokens[self.pos][0] if self.pos < len(self.tokens) else None

    def parse(self) -> Node | None:
        node = self.or_expr()
        while self.peek() is not None:  # a stray ")" or "~" at the top: skip it and go on
            self.pos += 1
            node = _and([n for n in (node, self.or_expr()) if n is not None], [])
        return node

    def or_expr(self) -> Node | None:
        items = [self.and_expr()]
        while self.peek() == "|":
            self.pos += 1
            items.append(self.and_expr())
        kept = [i for i in items if i is not None]
        if not kept:
            return None
        return kept[0] if len(kept) == 1 else Or(tuple(_flatten(kept, Or)))

    def and_expr(self) -> Node | None:
        positive: list[Node] = []
        negative: list[Node] = []
        while self.peek() not in (None, "|", ")"):
            if self.peek() == "+":
                self.pos += 1
                continue
            negated = tolerant = False
            while self.peek() in ("-", "+", "~"):
                negated ^= self.peek() == "-"
                tolerant |= self.peek() == "~"
                self.pos += 1
            node = self.primary()
            if node is not None and tolerant:
                node = tolerate(node)
            if node is not None:
                (negative if negated else positive).append(node)
        return _and(positive, negative)

    def primary(self) -> Node | None:
        kind = self.peek()
        if kind is None or kind in ("|", ")"):
            return None
        _, text = self.tokens[self.pos]
        self.pos += 1
        if kind == "(":
            node = self.or_expr()
            if self.peek() == ")":
                self.pos += 1
            return node
        return Term(text) if _WORD.search(text) else None


def _flatten(nodes: list[Node], kind: type) -> Iterator[Node]:
    for node in nodes:
        if isinstance(node, (And, Or)) and isinstance(node, kind) and not (isinstance(node, And) and node.exclude):
            yield from node.items
        else:
            yield node


def _and(positive: list[Node], negative: list[Node]) -> Node | None:
    if not positive:
        return None
    items = tuple(_flatten(positive, And))
    if len(items) == 1 and not negative:
        return items[0]
    return And(items, tuple(negative))


def parse(query: str, sounds_like: bool = False) -> Node | None:
    """The query's tree; None when nothing searchable is left. ``sounds_like``: every term tolerant."""
    node = _Parser(query).parse()
    return tolerate(node) if sounds_like and node is not None else node


def tolerate(node: Node) -> Node:
    """The node with every term it asks for tolerant; what it excludes stays as written."""
    if isinstance(node, Term):
        return Term(node.text, tolerant=True)
    if isinstance(node, Or):
        return Or(tuple(tolerate(i) for i in node.items))
    return And(tuple(tolerate(i) for i in node.items), node.exclude)


def terms(node: Node | None, excluded: bool = False) -> Iterator[Term]:
    """The terms a query asks for (with ``excluded``: those it excludes too), in order."""
    if isinstance(node, Term):
        yield node
    elif node is not None:
        for item in node.items:
            yield from terms(item, excluded)
        if excluded and isinstance(node, And):
            for item in node.exclude:
                yield from terms(item, excluded)


def blank(query: str) -> bool:
    """No word at all (unlike an exclusion alone, which asks for something): the filters alone decide."""
    return _WORD.search(query) is None


def to_fts5(node: Node, leaf: Callable[[Term], str], nested: bool = False) -> str:
    """An FTS5 MATCH expression: every term as ``leaf`` renders it (a phrase, or a group of phrases)."""
    if isinstance(node, Term):
        return leaf(node)
    if isinstance(node, Or):
        text = " OR ".join(to_fts5(i, leaf, True) for i in node.items)
        return f"({text})" if nested else text
    text = " AND ".join(to_fts5(i, leaf, True) for i in node.items)
    if node.exclude:
        excluded = node.exclude[0] if len(node.exclude) == 1 else Or(node.exclude)
        left = f"({text})" if len(node.items) > 1 else text
        text = f"{left} NOT {to_fts5(excluded, leaf, True)}"
    return f"({text})" if nested else text


def exact_phrase(term: Term, fields: list[str]) -> dict[str, Any]:
    """The term as an exact phrase over ``fields``: a one-phrase simple_query_string, which keeps their analysers."""
    phrase = re.sub(r'["\\]', " ", term.text).strip()
    return {"simple_query_string": {"query": f'"{phrase}"', "fields": fields, "flags": "PHRASE"}}


def to_elasticsearch(node: Node, leaf: Callable[[Term], dict[str, Any]]) -> dict[str, Any]:
    """A bool query whose leaves are the terms as ``leaf`` renders them."""
    if isinstance(node, Term):
        return leaf(node)
    if isinstance(node, Or):
        return {"bool": {"should": [to_elasticsearch(i, leaf) for i in node.items], "minimum_should_match": 1}}
    bool_query: dict[str, Any] = {"must": [to_elasticsearch(i, leaf) for i in node.items]}
    if node.exclude:
        bool_query["must_not"] = [to_elasticsearch(i, leaf) for i in node.exclude]
    return {"bool": bool_query}


@dataclass(frozen=True)
class Filters:
    """What a search is restricted to; None means no restriction."""

    date_from: str | None = None
    date_to: str | None = None
    agent: str | None = None
    speaker: str | None = None
    quality: str | None = None
    min_non_talk_share: float | None = None  # calls whose non-talk time is at least this share (0-1)
    min_agent_interruptions: int | None = None
    min_customer_interruptions: int | None = None
    rule: str | None = None  # calls with a QA finding of this rule
    tags: tuple[str, ...] = ()  # calls the QA audit tagged with every one of these
    sounds_like: bool = False  # every term of the query tolerant (matched by sound and spelling too)
    min_score: float | None = None  # calls whose scorecard score is at least this (0-100)
    max_score: float | None = None  # calls whose scorecard score is at most this: the ones to coach on
    # the calls of these agents only, whatever else is asked: who may see what (a team lead's teams), set by the
    # web's scope and never by a person's filter; None: every agent's
    agents: frozenset[str] | None = None

    def narrows(self) -> bool:
        """Whether any filter is set: a blank query with one finds every segment the filters let through (how
        words are matched, and whose calls one may see, narrow nothing)."""
        return any(value not in (None, "", ()) for name, value in vars(self).items()
                   if name not in ("sounds_like", "agents"))


# The score facet's bands, highest first: a call falls in the first whose lower bound it reaches.
SCORE_BANDS = (("90-100", 90), ("70-89", 70), ("50-69", 50), ("0-49", 0))
MAX_TAG_FILTERS = 20  # tags one search may ask for: each is a clause of every backend's query


@dataclass
class SearchPage:
    """One page of hits; ``next_after`` fetches the next page, None on the last one."""

    hits: list[SearchHit]
    next_after: str | None = None


@dataclass
class CallsPage:
    """One page of the calls a search matches (their recording documents, each with its matching ``hits``)."""

    calls: list[dict[str, Any]]
    next_after: str | None = None


@dataclass
class AgentDayCount:
    """Matching segments (and the recordings they are in) of one agent on one day."""

    agent_id: str | None
    call_date: str | None
    segments: int
    recordings: int

    def to_dict(self) -> dict[str, Any]:
        return {"agent_id": self.agent_id, "call_date": self.call_date, "segments": self.segments,
                "recordings": self.recordings}


def checked_filters(filters: Filters, speakers: Sequence[str], spelled: Callable[[str], str] = str) -> Filters:
    """The filters a person gave, each refused (``InputError``) unless the index can answer it as meant;
    ``spelled`` names a field as that person typed it (``--date-from`` on the command line)."""
    checks: dict[str, Callable[[Any, str], Any]] = {
        "date_from": calendar_day, "date_to": calendar_day, "agent": short_text, "rule": short_text,
        "speaker": lambda value, name: one_of(value, speakers, name),
        "quality": lambda value, name: one_of(value, list(GateOutcome), name),
        "min_non_talk_share": share, "min_agent_interruptions": count, "min_customer_interruptions": count,
        "min_score": percent, "max_score": percent,
    }
    for field, check in checks.items():
        if getattr(filters, field) is not None:
            check(getattr(filters, field), spelled(field))
    if len(filters.tags) > MAX_TAG_FILTERS:
        raise InputError(f"{spelled('tag')}: at most {MAX_TAG_FILTERS} tags at once")
    for tag in filters.tags:  # typed one at a time: ``--tag``, ``tag=``
        if not tag.strip():
            raise InputError(f"{spelled('tag')}: empty (a tag is a word such as complaint)")
        short_text(tag, spelled("tag"))
    day_range(filters.date_from, filters.date_to, spelled("date_from"), spelled("date_to"))
    return filters


class CursorError(ValueError):
    """A page cursor that this index did not hand out."""


class IndexBackendError(RuntimeError):
    """The index server refused or could not be reached; the message says which and why."""


def encode_cursor(values: list[Any]) -> str:
    """An opaque, URL-safe token for the sort values of a page's last hit."""
    return base64.urlsafe_b64encode(json.dumps(values, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_cursor(token: str, length: int) -> list[Any]:
    try:
        values = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (ValueError, binascii.Error) as exc:
        raise CursorError(f"invalid page cursor {token!r}: {exc}") from exc
    if (not isinstance(values, list) or len(values) != length
            or not all(v is None or (isinstance(v, (int, float, str)) and not isinstance(v, bool)) for v in values)):
        raise CursorError(f"invalid page cursor {token!r}: not a cursor of this index")
    return values


def confidence(avg_logprob: float | None) -> float | None:
    """How sure the model was of a segment, 0-1: the geometric mean of its words' probabilities (the engines give
    ``avg_logprob`` as the mean log probability of the words, where they give words), so an auditor can tell a
    hit the model heard clearly from one it guessed at. None where the engine gave none."""
    if avg_logprob is None:
        return None
    return round(math.exp(min(float(avg_logprob), 0.0)), 3)


def clock(seconds: float) -> str:
    """A hit's time as people read it next to a player: 12.34 -> "0:12.3", 3723.0 -> "1:02:03.0"."""
    minutes, tenths = divmod(round(max(seconds, 0.0) * 10), 600)
    hours, minutes = divmod(minutes, 60)
    secs = f"{tenths / 10:04.1f}"
    return f"{hours}:{minutes:02d}:{secs}" if hours else f"{minutes}:{secs}"


def restore_highlight(original: str, highlighted: str, open_tag: str, close_tag: str) -> str:
    """Map a backend's highlight (HL_OPEN/HL_CLOSE marks in its own rendering of the text) onto the original text."""
    out: list[str] = []
    i = 0
    for ch in highlighted:
        if ch == HL_OPEN:
            out.append(open_tag)
        elif ch == HL_CLOSE:
            out.append(close_tag)
        elif i < len(original) and ch == original[i]:
            out.append(ch)
            i += 1
        elif not ch.isspace():
            out.append(ch)
    out.append(original[i:])
    text = "".join(out)
    # Adjacent matches read as one: "<em>ask</em> <em>not</em>" -> "<em>ask not</em>".
    return re.sub(re.escape(close_tag) + r"(\s*)" + re.escape(open_tag), r"\1", text)
