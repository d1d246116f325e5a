"""Personal data in the forms people say it, generated: every valid value in every spoken form is masked in the
text and in the model's words; amounts, dates, times, order and policy numbers are not.

Each value is said as digits, number words or Chinese numerals, grouped as people group it, with the
punctuation the model writes between groups, sometimes in two goes (a pause, the other speaker's "mm",
a full stop, "and the last eight digits are"), and goes through the pipeline's ITN before masking, as in
a transcription.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from asr_tasks.config import PROJECT_ROOT
from asr_tasks.models import Recording, Segment, SpokenWord, Transcript
from asr_tasks.text.pii import redact
from asr_tasks.text.pii_policy import load_policy, luhn, prc_check_character
from asr_tasks.text.postprocess import itn_en, itn_zh

POLICY = load_policy(PROJECT_ROOT / "include" / "pii")
EN = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
ZH = "零一二三四五六七八九"
MASK = re.compile(r"\[[A-Z -]+(?: \*{4}[\d*]{0,4})?\]")
SAID_DIGIT = re.compile(rf"\d|\b(?:{'|'.join(EN)}|oh|double|triple)\b|[{ZH}幺两洞]", re.IGNORECASE)
RUNS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass(frozen=True)
class Value:
    kind: str
    digits: str  # what is said ("+" for plus)
    groups: tuple[int, ...]  # how the speaker groups it
    lead: dict[str, str]  # language -> what is said before it


def check_digit(body: str) -> str:
    return next(d for d in "0123456789" if luhn(body + d))


def numbers(n: int) -> st.SearchStrategy[str]:
    return st.text("0123456789", min_size=n, max_size=n)


@st.composite
def cards(draw: st.DrawFn) -> Value:
    prefix, length = draw(st.sampled_from([("4", 16), ("4", 13), ("51", 16), ("55", 16), ("2221", 16), ("37", 15),
                                           ("6011", 16), ("62", 16), ("62", 19)]))
    body = prefix + draw(numbers(length - len(prefix) - 1))
    groups = {15: (4, 6, 5), 13: (4, 4, 5), 19: (4, 4, 4, 4, 3)}.get(length, (4, 4, 4, 4))
    return Value("card", body + check_digit(body), groups,
                 {"en": draw(st.sampled_from(["my card number is", "the number on the card is", "it's"])),
                  "zh": draw(st.sampled_from(["我的卡号是", "卡号", "银行卡号码是"]))})


@st.composite
def prc_ids(draw: st.DrawFn) -> Value:
    body = (draw(st.sampled_from(["110105", "310104", "440305", "510107"])) + str(draw(st.integers(1950, 2005)))
            + f"{draw(st.integers(1, 12)):02d}{draw(st.integers(1, 28)):02d}" + draw(numbers(3)))
    return Value("prc_id", body + prc_check_character(body), (6, 8, 4),
                 {"en": "my ID number is", "zh": draw(st.sampled_from(["身份证号是", "我的身份证号码"]))})


@st.composite
def phones(draw: st.DrawFn) -> Value:
    form = draw(st.sampled_from(["cn_mobile", "cn_landline", "nanp", "uk_mobile", "uk_london", "intl_uk", "intl_cn"]))
    d = draw
    made = {
        "cn_mobile": lambda: ("1" + d(st.sampled_from("3456789")) + d(numbers(9)), (3, 4, 4)),
        "cn_landline": lambda: d(st.sampled_from([("010" + d(numbers(8)), (3, 4, 4)),
                                                  ("0755" + d(numbers(8)), (4, 4, 4)),
                                                  ("021" + d(numbers(8)), (3, 8))])),
        "nanp": lambda: (d(st.sampled_from("23456789")) + d(numbers(2)) + d(st.sampled_from("23456789"))
                         + d(numbers(6)), (3, 3, 4)),
        "uk_mobile": lambda: ("07" + d(numbers(9)), (5, 6)),
        "uk_london": lambda: ("020" + d(numbers(8)), (3, 4, 4)),
        "intl_uk": lambda: ("+447" + d(numbers(9)), (3, 4, 6)),
        "intl_cn": lambda: ("+8613" + d(numbers(9)), (3, 3, 4, 4)),
    }[form]()
    return Value("phone", made[0], made[1], {"en": draw(st.sampled_from(["you can call me on", "my number is",
                                                                          "reach me at"])),
                                             "zh": draw(st.sampled_from(["我的电话是", "手机号", "联系电话"]))})


def spoken_en(value: str, rng: st.DataObject) -> str:
    """Digits as words, "oh" for some zeros, "double"/"triple" for some repeats, "plus" for "+"."""
    out, n = [], 0
    while n < len(value):
        ch = value[n]
        if ch in "+X":
            out.append("plus" if ch == "+" else "X")
            n += 1
            continue
        same = len(value[n:]) - len(value[n:].lstrip(ch))
        if same >= 2 and rng.draw(st.booleans()):
            times = 3 if same >= 3 and rng.draw(st.booleans()) else 2
            out += ["triple" if times == 3 else "double", "oh" if ch == "0" else EN[int(ch)]]
            n += times
            continue
        out.append("oh" if ch == "0" and rng.draw(st.booleans()) else EN[int(ch)])
        n += 1
    return " ".join(out)


def spoken_zh(value: str, rng: st.DataObject) -> str:
    """Digits as Chinese numerals, 幺 for some ones, 两 for some twos (as numbers are read on the phone)."""
    out = []
    for ch in value:
        if ch in "+X":
            out.append("加" if ch == "+" else "X")
        elif ch == "1" and rng.draw(st.booleans()):
            out.append("幺")
        elif ch == "2" and rng.draw(st.booleans()):
            out.append("两")
        else:
            out.append(ZH[int(ch)])
    return "".join(out)


def grouped(value: Value) -> list[str]:
    plus = value.digits.startswith("+")
    digits, out, at = value.digits.lstrip("+"), [], 0
    for size in value.groups:
        out.append(digits[at : at + size])
        at += size
    if at < len(digits):
        out[-1] += digits[at:]
    if plus:
        out[0] = "+" + out[0]
    return [g for g in out if g]


def say(value: Value, rng: st.DataObject) -> tuple[str, list[str], list[str]]:
    """(language, the groups as the model writes them after ITN, the same as the model's words before ITN)."""
    form = rng.draw(st.sampled_from(["digits", "words", "zh"]))
    groups = grouped(value)
    if form == "digits":
        return "en", groups, groups
    if form == "words":
        words = [spoken_en(g, rng) for g in groups]
        return "en", [itn_en(w) for w in words], words
    chars = [spoken_zh(g, rng) for g in groups]
    return "zh", [itn_zh(c) for c in chars], chars


def segment(n: int, channel: int, start: float, text: str, raw: str, cjk: bool) -> Segment:
    parts = list(raw.replace(" ", "")) if cjk else raw.split()
    step = 0.3
    words = [SpokenWord(p if cjk else f" {p}", round(start + k * step, 3), round(start + (k + 1) * step, 3))
             for k, p in enumerate(parts)]
    end = words[-1].end if words else start + 1.0
    return Segment("r1", channel, "agent" if channel == 0 else "customer", start, end, text, text_raw=raw,
                   words=words, language="zh" if cjk else "en")


def transcript_of(value: Value, rng: st.DataObject) -> Transcript:
    language, heard, raw = say(value, rng)
    cjk = language == "zh"
    sep = rng.draw(st.sampled_from(["，", "、", ""] if cjk else [" ", ", ", "-", ". ", " , "]))
    lead = value.lead[language]
    join = "" if cjk else " "
    segments = []
    split = rng.draw(st.integers(0, len(heard) - 1)) if len(heard) > 1 else 0
    if split and rng.draw(st.booleans()):  # in two goes
        first, second = heard[:split], heard[split:]
        end = rng.draw(st.sampled_from(["", ".", "，" if cjk else ","]))
        joiner = rng.draw(st.sampled_from(["", "然后是" if cjk else "and the last digits are "]))
        segments.append(segment(0, 0, 1.0, lead + join + sep.join(first) + end,
                                lead + join + sep.join(raw[:split]) + end, cjk))
        gap = rng.draw(st.floats(0.5, 50.0))
        if rng.draw(st.booleans()):
            segments.append(segment(1, 1, segments[0].end + 0.2, "嗯。" if cjk else "Mm-hmm.",
                                    "嗯。" if cjk else "Mm-hmm.", cjk))
        segments.append(segment(2, 0, segments[0].end + gap, joiner + sep.join(second) + ("。" if cjk else "."),
                                joiner + sep.join(raw[split:]), cjk))
    else:
        segments.append(segment(0, 0, 1.0, lead + join + sep.join(heard) + ("。" if cjk else "."),
                                lead + join + sep.join(raw), cjk))
    rec = Recording("r1", "recordings", "calls/2026/11/27/c.wav", "e", 1, "c", "2026-11-27")
    return Transcript(rec, segments[-1].end + 5, segments, language, "m", "1")


def clear(text: str) -> list[str]:
    """What is still said as a digit (a digit, a number word, a numeral), masks aside."""
    return SAID_DIGIT.findall(MASK.sub(" ", text))


def assert_masked(value: Value, transcript: Transcript) -> None:
    clean, found = redact(transcript, POLICY)
    said = [(s.text, "".join(w.text for w in s.words)) for s in transcript.segments]
    assert value.kind in {d.kind for d in found}, said
    for seg in clean.segments:
        assert clear(seg.text) == [], (said, seg.text)
        assert clear("".join(w.text for w in seg.words)) == [], (said, [w.text for w in seg.words])
        assert seg.text_raw is None or clear(seg.text_raw) == []


@RUNS
@given(cards(), st.data())
def test_every_card_in_every_form_is_masked(value: Value, rng: st.DataObject) -> None:
    assert_masked(value, transcript_of(value, rng))


@RUNS
@given(phones(), st.data())
def test_every_phone_number_in_every_form_is_masked(value: Value, rng: st.DataObject) -> None:
    assert_masked(value, transcript_of(value, rng))


@RUNS
@given(prc_ids(), st.data())
def test_every_resident_id_in_every_form_is_masked(value: Value, rng: st.DataObject) -> None:
    assert_masked(value, transcript_of(value, rng))


LOCAL = st.from_regex(r"[a-z]{2,8}(?:[._][a-z]{2,8})?[0-9]{0,3}", fullmatch=True)
DOMAIN = st.from_regex(r"[a-z]{3,10}", fullmatch=True)


@RUNS
@given(LOCAL, DOMAIN, st.sampled_from(["com", "net", "org", "cn", "co.uk", "com.cn"]), st.data())
def test_every_email_address_said_or_written_is_masked(local: str, domain: str, tld: str, rng: st.DataObject) -> None:
    at = rng.draw(st.sampled_from([" at ", "@", " at sign "]))
    dot = rng.draw(st.sampled_from([" dot ", "."]))
    spoken_local = local.replace(".", rng.draw(st.sampled_from([" dot ", "."]))).replace("_", " underscore ")
    address = spoken_local + at + domain + dot + tld.replace(".", dot)
    lead = rng.draw(st.sampled_from(["my email is", "send it to", "write to"]))
    text = f"{lead} {address}, thanks"
    rec = Recording("r1", "recordings", "calls/2026/11/27/c.wav", "e", 1, "c", "2026-11-27")
    clean, found = redact(Transcript(rec, 10.0, [Segment("r1", 1, "customer", 1.0, 5.0, text)], "en", "m", "1"),
                          POLICY)
    assert [d.kind for d in found] == ["email"], text
    assert clean.segments[0].text == f"{lead} [EMAIL], thanks"


@st.composite
def not_personal(draw: st.DrawFn) -> tuple[str, str]:
    """(language, a sentence) with an amount, a date, a time, an order or a policy number: none is personal data."""
    amount = draw(st.integers(1, 9_999_999))
    year, month, day = draw(st.integers(1990, 2030)), draw(st.integers(1, 12)), draw(st.integers(1, 28))
    order = draw(st.sampled_from("23456789")) + draw(numbers(draw(st.integers(5, 11))))
    hour, minute = draw(st.integers(0, 23)), draw(st.integers(0, 59))
    return draw(st.sampled_from([
        ("en", f"it costs {amount:,} dollars"), ("en", f"the balance is ${amount:,}.{draw(numbers(2))}"),
        ("en", f"the payment of {amount} pounds is due on {year}-{month:02d}-{day:02d}"),
        ("en", f"we spoke on {day:02d}/{month:02d}/{year} at {hour}:{minute:02d}"),
        ("en", f"your order number is {order} and it ships on {day}.{month}.{year}"),
        ("en", f"the policy number is {draw(numbers(4))}, renewed in {year}"),
        ("en", f"the claim HB-{draw(numbers(6))} was paid, {amount} in total"),
        ("en", itn_en(f"it costs {EN[amount % 10]} hundred and {EN[day % 10]} dollars")),
        ("zh", f"这笔钱是{amount}元，{year}年{month}月{day}日到期"),
        ("zh", itn_zh(f"订单号是{order}，下午{hour % 12 + 1}点半送到")),
        ("zh", itn_zh("一共一千二百三十四元五角，月利率百分之三")),
    ]))


@RUNS
@given(not_personal())
def test_amounts_dates_times_order_and_policy_numbers_are_not_masked(said: tuple[str, str]) -> None:
    language, text = said
    rec = Recording("r1", "recordings", "calls/2026/11/27/c.wav", "e", 1, "c", "2026-11-27")
    segments = [Segment("r1", 0, "agent", 1.0, 5.0, text, language=language),
                Segment("r1", 1, "customer", 6.0, 7.0, "okay"),
                Segment("r1", 0, "agent", 9.0, 12.0, text, language=language)]
    clean, found = redact(Transcript(rec, 20.0, segments, language, "m", "1"), POLICY)
    assert found == [] and [s.text for s in clean.segments] == [text, "okay", text]
