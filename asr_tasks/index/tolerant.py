"""Tolerant terms (``~word``, or every term of a sounds-like search) as each backend asks for them, and how a hit
matched: exactly, by sound, or by spelling.

A tolerant term matches its exact phrase (as an exact term does), or its phrase of
tones or of sounds, or one of its readings word by word within each word's edit
budget (``asr_tasks.text.sounds``). Both backends render the same alternatives:
Elasticsearch as phrases over the ``tones`` and ``sounds`` fields and span queries
with ``fuzzy`` over ``tokens``; SQLite as FTS5 phrases over the same columns, a
word's near spellings taken from the index's own vocabulary (at most
``MAX_EXPANSIONS`` per word, nearest first, as Elasticsearch's ``max_expansions``;
at most ``MAX_PHRASES`` phrases per term). A match by sound or spelling weighs
``TOLERANT_WEIGHT`` of an exact one, so exact hits come first.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Callable, Iterable

from asr_tasks.index.query import HL_CLOSE, HL_OPEN, Node, Or, Term, exact_phrase, restore_highlight, terms
from asr_tasks.text.sounds import MATCH_KINDS, Slot, Tolerant, spans

TOLERANT_WEIGHT = 0.001
MAX_EXPANSIONS = 50
MAX_PHRASES = 256


def tolerant_of(term: Term) -> Tolerant | None:
    """The term's tolerant forms, when it is tolerant and has a token."""
    return Tolerant.of(term.text) if term.tolerant else None


# Elasticsearch

def _es_fuzzy(slot: Slot, edits: int, prefix: int) -> dict[str, Any]:
    return {"span_multi": {"match": {"fuzzy": {"tokens": {
        "value": slot.word, "fuzziness": edits, "max_expansions": MAX_EXPANSIONS, "prefix_length": prefix,
        "transpositions": True}}}}}


def _es_slot(slot: Slot) -> dict[str, Any]:
    # one edit anywhere, a second only with the first letter kept (``sounds.within``)
    words = [_es_fuzzy(slot, 1, 0), *([_es_fuzzy(slot, slot.budget, 1)] if slot.budget > 1 else [])] \
        if slot.budget else [{"span_term": {"tokens": slot.word}}]
    splits = [{"span_near": {"clauses": [{"span_term": {"tokens": a}}, {"span_term": {"tokens": b}}], "slop": 0,
                             "in_order": True}} for a, b in slot.splits]
    clauses = [*words, *splits]
    return {"span_or": {"clauses": clauses}} if len(clauses) > 1 else clauses[0]


def es_term(term: Term, fields: list[str]) -> dict[str, Any]:
    """The term over ``fields`` (the text's analysed fields), and when tolerant, by sound and spelling too."""
    exact = exact_phrase(term, fields)
    tolerant = tolerant_of(term)
    if tolerant is None:
        return exact
    readings = []
    for reading in tolerant.readings:
        slots = [_es_slot(slot) for slot in reading]
        readings.append(slots[0] if len(slots) == 1 else
                        {"span_near": {"clauses": slots, "slop": 0, "in_order": True}})
    sounds = [{"match_phrase": {"tones": " ".join(tolerant.tones)}},
              {"match_phrase": {"sounds": " ".join(tolerant.sounds)}}] if tolerant.sounds else []
    alike = [*sounds, *readings]
    return {"bool": {"should": [exact, {"bool": {"should": alike, "minimum_should_match": 1,
                                                  "boost": TOLERANT_WEIGHT}}], "minimum_should_match": 1}}


# SQLite

Expand = Callable[[Slot], list[str]]  # a slot's near spellings in the vocabulary, nearest first
Known = Callable[[Iterable[str]], set[str]]  # which of these words the vocabulary holds


def token_phrases(tolerant: Tolerant, expand: Expand, known: Known) -> list[tuple[str, ...]]:
    """The term's readings as phrases of tokens: each word as written, its near spellings and its splits into two
    words the index holds; at most ``MAX_PHRASES``, the closest kept."""
    out: list[tuple[str, ...]] = []
    for reading in tolerant.readings:
        choices: list[list[tuple[str, ...]]] = []
        for slot in reading:
            alternatives: list[tuple[str, ...]] = [(slot.word,)]
            alternatives += [(word,) for word in expand(slot)[:MAX_EXPANSIONS] if word != slot.word]
            held = known({part for split in slot.splits for part in split})
            alternatives += [split for split in slot.splits if set(split) <= held]
            choices.append(alternatives)
        room = MAX_PHRASES - len(out)
        while math.prod(len(c) for c in choices) > room and any(len(c) > 1 for c in choices):
            max(choices, key=len).pop()
        if math.prod(len(c) for c in choices) <= room:
            out += [tuple(w for part in combo for w in part) for combo in itertools.product(*choices)]
    return out


# How a hit matched

def _ranges(text: str, highlighted: str) -> list[tuple[int, int]]:
    """The characters of ``text`` a backend's highlight (HL_OPEN/HL_CLOSE marks) marked."""
    restored = restore_highlight(text, highlighted, HL_OPEN, HL_CLOSE)
    out: list[tuple[int, int]] = []
    at, start = 0, 0
    for ch in restored:
        if ch == HL_OPEN:
            start = at
        elif ch == HL_CLOSE:
            out.append((start, at))
        elif at < len(text) and ch == text[at]:
            at += 1
    return out


def _render(text: str, marks: list[tuple[int, int]], open_tag: str, close_tag: str) -> str:
    """The text with the marked ranges in tags, overlapping ones and ones apart by spaces only as one."""
    merged: list[list[int]] = []
    for start, end in sorted(marks):
        if merged and (start <= merged[-1][1] or not text[merged[-1][1]:start].strip()):
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    out, at = [], 0
    for start, end in merged:
        out += [text[at:start], open_tag, text[start:end], close_tag]
        at = end
    return "".join(out) + text[at:]


def _kind(node: Node, text: str, exact: list[tuple[int, int]]) -> int | None:
    """How surely the node matched the text (an index of ``MATCH_KINDS``; None: it did not): a term as written
    where the backend marked words, a tolerant one by its surest span; either item of an OR, every item of an
    AND (the least sure of them)."""
    if isinstance(node, Term):
        tolerant = tolerant_of(node)
        if tolerant is None:
            return 0 if exact else None
        found = spans(text, tolerant)
        return min((0 if any(s.start < e and b < s.end for b, e in exact) else MATCH_KINDS.index(s.kind)
                    for s in found), default=None)
    kinds = [_kind(item, text, exact) for item in node.items]
    if isinstance(node, Or):
        return min((k for k in kinds if k is not None), default=None)
    return None if None in kinds else max(k for k in kinds if k is not None)


def marked(text: str, highlighted: str, node: Node | None, open_tag: str, close_tag: str) -> tuple[str, str | None]:
    """A hit's highlight (the backend's marks of its exact matches, and where its tolerant terms matched) and how it
    matched (``_kind``; exact where that cannot be told); None for a search by filters."""
    exact = _ranges(text, highlighted)
    marks = list(exact)
    for term in terms(node):
        tolerant = tolerant_of(term)
        if tolerant is not None:
            marks += [(s.start, s.end) for s in spans(text, tolerant)]
    kind = None if node is None else MATCH_KINDS[_kind(node, text, exact) or 0]
    return _render(text, marks, open_tag, close_tag), kind
