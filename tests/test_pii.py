"""Personal data found after ITN and masked: what must be masked, and what must not (amounts, dates, order numbers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from asr_tasks.config import PROJECT_ROOT
from asr_tasks.models import Recording, Segment, Transcript
from asr_tasks.pii import PiiError, find, load_policy, luhn, prc_id, redact

POLICY = load_policy(PROJECT_ROOT / "include" / "pii")


def masked(text: str, language: str = "en") -> str:
    out = text
    for start, end, _, mask in reversed(find(text, POLICY, language)):
        out = out[:start] + mask + out[end:]
    return out


@pytest.mark.parametrize(("text", "language", "expected"), [
    # cards: Luhn-valid always, with spaces or dashes; a failing check only in card context
    ("the number is 4111 1111 1111 1111 thanks", "en", "the number is [CARD ****1111] thanks"),
    ("4111-1111-1111-1111", "en", "[CARD ****1111]"),
    ("the card number is 4, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, thank you", "en",
     "the card number is [CARD ****1111], thank you"),  # as the model writes digits read out one by one
    ("and the security code is 4, 5, 3.", "en", "and the security code is [CARD-SECURITY]."),
    ("my card number is 4111111111111111111", "en", "my card number is [CARD ****1111]"),  # 19 digits, a digit repeated
    ("您的卡号是4111 1111 1111 1112，对吗？", "zh", "您的卡号是[CARD ****1112]，对吗？"),
    ("card 5500005555555559 expires 12/27, the CVV is 123", "en",
     "card [CARD ****5559] expires [CARD-SECURITY], the CVV is [CARD-SECURITY]"),
    # PRC resident ID with a valid check character
    ("身份证号11010519491231002X。", "zh", "身份证号[ID]。"),
    # phones: Chinese mobile and landline, international
    ("打我电话13812345678或者010-12345678", "zh", "打我电话[PHONE]或者[PHONE]"),
    ("call me on +44 20 7946 0958", "en", "call me on [PHONE]"),
    # e-mail, written and spoken
    ("write to li.wei@example.com please", "en", "write to [EMAIL] please"),
    ("it is john dot smith at example dot com", "en", "it is [EMAIL]"),
    # bank accounts only when said as an account
    ("my account number is 6222 0212 3456 7890 12", "en", "my account number is [ACCOUNT]"),
    ("我的银行账号是6222021234567890", "zh", "我的银行账号是[ACCOUNT]"),
    # not personal data: amounts, dates, times, order numbers, 4-digit policy numbers, a year
    ("the order number is 20261127001 and it costs 12050 yuan", "en", None),
    ("这款理财产品年化收益12%，起购金额50000元", "zh", None),
    ("my policy number is 4472, the meeting is at 10:30 on 2026-11-27", "en", None),
    ("the claim was filed in 2019 and paid 1234567 yuan", "en", None),
    ("a 16 digit number that fails the check: 1234567812345678", "en", None),
])
def test_what_is_masked_and_what_is_not(text: str, language: str, expected: str | None) -> None:
    assert masked(text, language) == (text if expected is None else expected)


def test_checks() -> None:
    assert luhn("4111 1111 1111 1111") and not luhn("4111 1111 1111 1112")
    assert prc_id("11010519491231002X") and not prc_id("110105194912310021")


def test_a_number_split_over_segments_is_masked_across_them() -> None:
    rec = Recording("r1", "recordings", "calls/2026/11/27/c.wav", "e", 1, "c", "2026-11-27")
    segments = [Segment("r1", 0, "agent", 1.0, 3.0, "your card number is 4111 1111", text_raw="your card number is four"),
                Segment("r1", 1, "customer", 3.2, 4.0, "okay"),
                Segment("r1", 0, "agent", 3.5, 6.0, "1111 1111, is that right?"),
                Segment("r1", 0, "agent", 20.0, 22.0, "thank you")]
    transcript = Transcript(rec, 30.0, segments, "en", "m", "1")
    clean, found = redact(transcript, POLICY)
    assert [s.text for s in clean.segments] == ["your card number is [CARD ****1111]", "okay", ", is that right?",
                                                "thank you"]
    assert clean.segments[0].text_raw is None  # the model's words held the same number
    assert [(d.kind, d.speaker, d.start, d.end, d.masked) for d in found] == [
        ("card", "agent", 1.0, 6.0, "[CARD ****1111]")]


def test_a_bank_adds_its_own_kind_and_a_broken_file_names_itself(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text((PROJECT_ROOT / "include" / "pii" / "default.yaml").read_text())
    (tmp_path / "b.yaml").write_text("kinds:\n  policy:\n    pattern: 'HB-\\d{6}'\n    mask: '[POLICY]'\n")
    policy = load_policy(tmp_path)
    assert list(policy.kinds)[-1] == "policy" and "card" in policy.kinds
    assert find("policy HB-123456 please", policy)[0][2:] == ("policy", "[POLICY]")
    (tmp_path / "c.yaml").write_text("kinds:\n  broken:\n    pattern: '(unclosed'\n    mask: '[X]'\n")
    with pytest.raises(PiiError, match=r"(?s)c\.yaml.*not a regular expression"):
        load_policy(tmp_path)


@pytest.mark.parametrize(("said", "language", "expected"), [
    ("您的卡号是四一一一一一一一一一一一一一一一", "zh", "您的卡号是[CARD ****1111]"),
    ("手机幺三八一二三四五六七八", "zh", "手机[PHONE]"),
    ("my card number is four one one one one one one one one one one one one one one one", "en",
     "my card number is [CARD ****1111]"),
])
def test_number_words_count_once_itn_made_them_digits(said: str, language: str, expected: str) -> None:
    from asr_tasks.postprocess import itn_en, itn_zh

    assert masked({"zh": itn_zh, "en": itn_en}[language](said), language) == expected
