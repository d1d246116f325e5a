"""QA rules that understand a call: conditions, negation, proximity, windows, fuzzy matching, tags, rule tests,
the rule set's identity and re-scoring, and the default set on the labelled set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from qa_labelled import CALLS, fired, scores, transcript_of
from test_audit import DAY, _record_day, call

from asr_tasks.audit.reports import run_audit, stored_audit
from asr_tasks.audit.rules import RuleError, audit, evaluate, load_rule_set, load_rules
from asr_tasks.config import PROJECT_ROOT, Settings
from asr_tasks.intake.stores import LocalStore
from asr_tasks.models import Transcript
from asr_tasks.text.pii_policy import load_policy

RULES = PROJECT_ROOT / "include" / "qa_rules"
POLICY = load_policy(PROJECT_ROOT / "include" / "pii")
ASR = str(Path(sys.executable).parent / "asr")


def rules_of(tmp_path: Path, text: str, name: str = "r.yaml") -> Path:
    folder = tmp_path / "rules"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text, encoding="utf-8")
    return folder


def fires(tmp_path: Path, rule: str, *lines: tuple[str, float, float, str], duration: float = 60.0) -> list[str]:
    """The matched texts of a one-rule set over one call."""
    (only,) = load_rules(rules_of(tmp_path, "rules:\n" + rule))
    return [f.matched_text for f in evaluate(only, call("c", list(lines), duration=duration))]


PROMISE = """  - id: p
    severity: high
    speaker: agent
    when:
      said: [guarantee, 保证]
      near: {said: [return, returns, 收益], within: 4}
"""


@pytest.mark.parametrize("text, hit", [
    ("I guarantee a return of five percent.", True),
    ("I cannot guarantee a return.", False),
    ("Nobody can guarantee you a return.", False),
    ("Not many banks do this, but I guarantee you a return.", True),  # the negator's clause ends at the comma
    ("We don't guarantee the return.", False),
    ("I guarantee it, and as for the fund, the return is not fixed.", False),  # 7 words apart: beyond within
    ("No. I guarantee a return.", True),  # the negator ends its own sentence
    ("我们保证收益。", True),
    ("我们不能保证收益。", False),
    ("收益没法保证。", False),
    ("不过我们保证收益。", True),  # 不过 (but) negates nothing
    ("我保证，收益很高。", True),
])
def test_negation_and_proximity_in_both_languages(tmp_path: Path, text: str, hit: bool) -> None:
    assert bool(fires(tmp_path, PROMISE, ("agent", 1.0, 4.0, text))) == hit


def test_negated_true_matches_only_the_negated_phrase(tmp_path: Path) -> None:
    rule = """  - id: n
    severity: low
    when:
      said: [recorded]
      negated: true
"""
    assert fires(tmp_path, rule, ("agent", 1.0, 3.0, "This call is not recorded.")) == ["recorded"]
    assert fires(tmp_path, rule, ("agent", 1.0, 3.0, "This call is recorded.")) == []


def test_speaker_and_time_windows(tmp_path: Path) -> None:
    lines = [("agent", 1.0, 3.0, "goodbye"), ("customer", 5.0, 7.0, "goodbye"), ("agent", 55.0, 58.0, "goodbye")]
    first = "  - id: w\n    severity: low\n    when: {said: goodbye, first_seconds: 10}\n"
    assert len(fires(tmp_path, first, *lines)) == 2
    last = "  - id: w\n    severity: low\n    speaker: agent\n    when: {said: goodbye, last_seconds: 10}\n"
    assert fires(tmp_path, last, *lines) == ["goodbye"]
    middle = "  - id: w\n    severity: low\n    when: {said: goodbye, position: [0.05, 0.5], speaker: customer}\n"
    assert fires(tmp_path, middle, *lines) == ["goodbye"]
    absent = "  - id: w\n    severity: low\n    require: {said: thank you, speaker: agent, last_seconds: 30}\n"
    (only,) = load_rules(rules_of(tmp_path, "rules:\n" + absent))
    (finding,) = evaluate(only, call("c", lines, duration=60.0))
    assert (finding.speaker, finding.start, finding.end, finding.matched_text) == ("agent", 30.0, 60.0, "")


def test_combinations_metrics_and_order(tmp_path: Path) -> None:
    rule = """  - id: x
    severity: medium
    when:
      all:
        - said: [balance is]
          speaker: agent
          not_preceded_by: {said: [date of birth], speaker: agent}
        - not: {metric: non_talk_share, above: 0.5}
"""
    unverified = [("agent", 1.0, 3.0, "Your balance is ten dollars.")]
    verified = [("agent", 1.0, 3.0, "Your date of birth?"), ("customer", 4.0, 5.0, "May 1."),
                ("agent", 6.0, 8.0, "Your balance is ten dollars.")]
    assert fires(tmp_path, rule, *unverified) == ["your balance is"[5:]]
    assert fires(tmp_path, rule, *verified) == []
    quiet = call("q", unverified)
    quiet.analytics = {"non_talk_share": 0.8, "speakers": {}}
    (only,) = load_rules(tmp_path / "rules")
    assert evaluate(only, quiet) == []
    metric = "  - id: m\n    severity: low\n    when: {metric: words_per_minute, speaker: agent, above: 180}\n"
    (fast,) = load_rules(rules_of(tmp_path, "rules:\n" + metric, "r.yaml"))
    quiet.analytics = {"speakers": {"agent": {"words_per_minute": 210.0}, "customer": {"words_per_minute": 120.0}}}
    assert [f.matched_text for f in evaluate(fast, quiet)] == ["words_per_minute 210"]


def test_fuzzy_matches_what_the_model_wrote_and_says_how_alike(tmp_path: Path) -> None:
    rule = "  - id: f\n    severity: high\n    when: {said: [guaranteed return, 保证收益], fuzzy: 0.8}\n"
    (only,) = load_rules(rules_of(tmp_path, "rules:\n" + rule))
    misheard = evaluate(only, call("c", [("agent", 1.0, 3.0, "It has a garanteed returns every year.")]))
    assert [f.matched_text for f in misheard] == ["garanteed returns"] and 0.8 <= misheard[0].confidence < 1.0
    homophone = evaluate(only, call("c", [("agent", 1.0, 3.0, "我们保正收益。")]))  # 正 for 证: same syllable
    assert [f.matched_text for f in homophone] == ["保正收益"] and 0.9 <= homophone[0].confidence < 1.0
    assert not evaluate(only, call("c", [("agent", 1.0, 3.0, "我们保证收入。")]))  # another word, not another sound
    exact = evaluate(only, call("c", [("agent", 1.0, 3.0, "A guaranteed return.")]))
    assert [(f.matched_text, f.confidence) for f in exact] == [("guaranteed return", 1.0)]


def test_tags_categorise_calls_and_never_become_findings(tmp_path: Path) -> None:
    folder = rules_of(tmp_path, """rules:
  - id: cancel
    tag: cancellation
    speaker: customer
    when: {said: [close my account, 销户]}
""")
    calls = [call("a", [("customer", 1.0, 3.0, "I want to close my account.")]),
             call("b", [("customer", 1.0, 3.0, "I do not want to close my account.")]),
             call("c", [("agent", 1.0, 3.0, "Shall I close my account for you? Ha.")])]
    result = audit(calls, load_rule_set(folder), DAY, POLICY)
    assert result.findings == [] and result.tags == {calls[0].recording.recording_id: ["cancellation"]}
    assert result.totals()["by_tag"] == {"cancellation": 1}


@pytest.mark.parametrize("body, message", [
    ("  - id: a\n    severity: high\n    when: {said: refund}\n    examples: ['no money back']\n",
     "r.yaml:2: rule 'a': example does not fire it: 'no money back'"),
    ("  - id: a\n    severity: high\n    when: {said: refund}\n    counter_examples: ['I want a refund']\n",
     "r.yaml:2: rule 'a': counter-example fires it: 'I want a refund'"),
    ("  - id: a\n    severity: high\n    when: {said: refund, near: refund}\n",
     "r.yaml:4: rule 'a': near must be a mapping"),
    ("  - id: a\n    severity: high\n    when: {said: refund, fuzzy: 2}\n", "fuzzy must be a number from 0.5 to 1"),
    ("  - id: a\n    severity: high\n    when: {metric: loudness, above: 1}\n", "metric 'loudness': not one of"),
    ("  - id: a\n    tag: Complaint!\n    when: {said: refund}\n", "tag must be lower-case"),
    ("  - id: a\n    severity: high\n    when: {said: refund}\n    require: {said: sorry}\n", "one of them"),
    ("  - id: a\n    severity: high\n    when: {said: refund, first_seconds: 5, last_seconds: 5}\n",
     "one time window at most"),
    ("  - id: a\n    severity: high\n    speaker: agnet\n    when: {said: refund}\n", "speaker 'agnet': not a speaker"),
    ("  - id: a\n    severity: high\n    when: {pii: [crad]}\n", "'crad' is not a kind of personal data"),
    ("  - id: a\n    severity: high\n    when:\n      said: refund\n      said: money back\n", "r.yaml:6: 'said' is written twice"),
    ("  - id: a\n    severity: high\n    require: {not: []}\n", "not: needs the condition"),
    ("  - id: a\n    severity: high\n    require: []\n", "an empty list of conditions"),
    ("  - id: a\n    severity: high\n    when:\n      said: refund\n      fuzy: 0.9\n", "r.yaml:6: rule 'a': said: unknown"),
    ("  - id: a\n    severity: high\n    when: {said: refund}\n    examples: [5]\n", "example 1 cannot be read"),
    ("  - id: a\n    severity: high\n    when: {metric: talk_share, speaker: agent, above: 85}\n",
     "above must be a number from 0 to 1"),
    ("  - id: a\n    severity: high\n    when: {metric: turns, above: 600, below: 60}\n", "can never both hold"),
    ("  - id: a\n    severity: high\n    when: {pattern: '\\d+', luhn: 'false'}\n", "luhn must be true or false"),
    ("  - id: a\n    severity: high\n    when: {said: refund, near: {said: money, speaker: customer}}\n",
     "near: unknown field(s) speaker"),
])
def test_a_rule_set_is_refused_at_load_naming_the_rule(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(RuleError) as info:
        load_rules(rules_of(tmp_path, "rules:\n" + body))
    assert message in str(info.value)


def env_of(settings: Settings) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASR_")}
    env.update(ASR_INDEX_PATH=str(settings.index.path("index_path")),
               ASR_STORE_ROOT=str(settings.storage.path("store_root")), ASR_LEDGER_URL=settings.ledger.ledger_url,
               ASR_MODEL_DIR=settings.asr.model_dir)
    return env


def test_asr_rules_test_runs_every_example(tmp_path: Path) -> None:
    ok = subprocess.run([ASR, "rules", "test"], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert ": 0 failed" in ok.stdout and "without examples" not in ok.stdout
    folder = rules_of(tmp_path, "rules:\n  - id: a\n    severity: low\n    when: {said: refund}\n"
                                "    examples: ['money back', 'a refund']\n    counter_examples: ['no refund']\n")
    bad = subprocess.run([ASR, "rules", "test", "--rules", str(folder)], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1
    assert "r.yaml:2: rule 'a': example does not fire it: 'money back'" in bad.stderr
    assert "1 rule, 3 examples checked: 1 failed" in bad.stdout
    (folder / "s.yaml").write_text("rules:\n  - id: a\n    severity: low\n    when: {said: money back}\n")
    twice = subprocess.run([ASR, "rules", "test", "--rules", str(folder)], capture_output=True, text=True, timeout=120)
    assert twice.returncode == 1 and "s.yaml:2: rule id 'a' already defined at" in twice.stderr


def test_the_rule_sets_identity_follows_its_content(tmp_path: Path) -> None:
    base = (RULES / "default.yaml").read_text(encoding="utf-8")
    one = load_rule_set(rules_of(tmp_path, base)).identity
    assert load_rule_set(tmp_path / "rules").identity == one
    (tmp_path / "rules" / "r.yaml").write_text(base.replace("for more than a minute", "for over a minute"), encoding="utf-8")
    assert load_rule_set(tmp_path / "rules").identity != one
    result = audit(CALLS_AS_TRANSCRIPTS[:3], load_rule_set(tmp_path / "rules"), DAY, POLICY)
    assert result.findings and {f.rule_set for f in result.findings} == {result.rule_set} != {""}


CALLS_AS_TRANSCRIPTS: list[Transcript] = [transcript_of(c) for c in CALLS]


def test_rescoring_days_replaces_their_findings_and_says_what_changed(settings: Settings, tmp_path: Path) -> None:
    index = _record_day(settings)
    store = LocalStore(settings.storage.path("store_root"))
    first = run_audit(DAY, load_rule_set(RULES), index, store, settings)
    assert "promise-of-return" in first.totals()["by_rule"]
    changed = (RULES / "default.yaml").read_text(encoding="utf-8").replace("id: promise-of-return",
                                                                        "id: promise-of-gain")
    folder = rules_of(tmp_path, changed)
    proc = subprocess.run([ASR, "audit", "--from", DAY, "--to", DAY, "--rules", str(folder), "--json"],
                          env=env_of(settings), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    (day,) = out["days"]
    assert day["rule_set_before"] == first.rule_set and day["rule_set"] == out["rule_set"] != first.rule_set
    assert [f["rule_id"] for f in day["added"]] == ["promise-of-gain"]
    assert [f["rule_id"] for f in day["removed"]] == ["promise-of-return"]
    stored = stored_audit(DAY, store, settings)
    assert stored is not None and stored.rule_set == out["rule_set"]
    assert {f["rule_id"] for f in index.findings(DAY)} >= {"promise-of-gain"}
    assert "promise-of-return" not in {f["rule_id"] for f in index.findings(DAY)}
    again = subprocess.run([ASR, "audit", "--from", DAY, "--to", DAY, "--rules", str(folder)], env=env_of(settings),
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and f"{DAY}: 0 findings added, 0 removed" in again.stdout, again.stdout
    empty = subprocess.run([ASR, "audit", "--from", "2031-01-01", "--to", "2031-01-01", "--rules", str(folder)],
                           env=env_of(settings), capture_output=True, text=True, timeout=300)
    assert empty.returncode == 0 and "2031-01-01: no calls and no audit, nothing written" in empty.stdout
    assert stored_audit("2031-01-01", store, settings) is None
    refused = subprocess.run([ASR, "audit", "--from", DAY, "--date", DAY], env=env_of(settings), capture_output=True,
                             text=True, timeout=60)
    assert refused.returncode == 2 and "give --date" in refused.stderr


def test_the_default_set_on_the_labelled_set() -> None:
    """Precision and recall overall, and every rule and tag of the default set met on it (bench/qa_rules.py
    prints the same figures, and the spoken ones)."""
    rules = load_rules(RULES)
    found = fired(CALLS_AS_TRANSCRIPTS, rules, POLICY)
    score = scores(CALLS, found, rules)
    assert score["overall"]["precision"] >= 0.95 and score["overall"]["recall"] >= 0.9, score["overall"]
    assert all(r.examples and r.counter_examples for r in rules)
    assert {rule for c in CALLS for rule in c.fires} == {r.id for r in rules}  # each fires on some call


def test_a_findings_words_follow_its_conditions(tmp_path: Path) -> None:
    from asr_tasks.web.call_page import finding_words

    rules = {r.id: r for r in load_rules(RULES)}
    absent = {"rule_id": "recording-disclosure", "matched_text": "", "speaker": "agent", "start": 0.0, "end": 15.0}
    assert finding_words(absent, rules) == "no recording disclosure in the first 15 s from the agent"
    fuzzy = {"rule_id": "promise-of-return", "matched_text": "garanteed returns", "speaker": "agent", "start": 5.5,
             "end": 9.0, "confidence": 0.91}
    assert finding_words(fuzzy, rules) == "promise-of-return at 0:05.5: the agent said “garanteed returns” " \
                                          "(words 91% alike)"
    measured = {"rule_id": "agent-interrupts", "matched_text": "interruptions 8", "speaker": "agent", "start": 0.0,
                "end": 90.0}
    assert finding_words(measured, rules) == "agent-interrupts: interruptions 8 (the agent)"
    card = {"rule_id": "card-number-read-out", "matched_text": "[CARD ****]", "speaker": "customer", "start": 20.0,
            "end": 31.0}
    assert finding_words(card, rules) == "card-number-read-out at 0:20.0: the customer read out [CARD ****]"


def test_a_sentence_the_recogniser_cut_reads_as_one(tmp_path: Path) -> None:
    """A segment without punctuation runs on into its speaker's next, through the other side's "mm": negation and
    proximity see the whole sentence, and the two pieces are one finding."""
    (rule,) = load_rules(rules_of(tmp_path, "rules:\n" + PROMISE))
    cut = [("agent", 1.0, 3.0, "I cannot"), ("agent", 3.2, 6.0, "guarantee you any return on this.")]
    assert evaluate(rule, call("c", cut), POLICY) == []
    through = [("agent", 1.0, 3.0, "I guarantee"), ("customer", 3.1, 3.5, "mm"), ("agent", 3.6, 6.0, "a return.")]
    assert [f.matched_text for f in evaluate(rule, call("c", through), POLICY)] == ["guarantee"]
    ended = [("agent", 1.0, 3.0, "I guarantee it."), ("agent", 3.2, 6.0, "Returns vary.")]
    assert evaluate(rule, call("c", ended), POLICY) == []  # a full stop ends the sentence: nothing near
    (phrase,) = load_rules(rules_of(tmp_path, "rules:\n  - id: g\n    severity: high\n    when: {said: guaranteed return}\n"))
    split = evaluate(phrase, call("c", [("agent", 1.0, 3.0, "This is a guaranteed"), ("agent", 3.2, 6.0, "return.")]))
    assert [(f.start, f.end, f.matched_text) for f in split] == [(1.0, 6.0, "guaranteed return")]


def test_a_phrase_is_timed_and_ordered_within_its_segment(tmp_path: Path) -> None:
    rules = load_rules(RULES)
    disclosure = next(r for r in rules if r.id == "recording-disclosure")
    late = [("agent", 1.0, 30.0, "Hello, thank you for calling, let me tell you about our products and our new "
                                 "savings plans and then before we go on this call is recorded.")]
    assert evaluate(disclosure, call("c", late)), "finished at about 29 s, so not within the first 15 s"
    on_time = [("agent", 1.0, 30.0, "This call is recorded, and let me tell you about our products and our new "
                                    "savings plans and everything else we have.")]
    assert not evaluate(disclosure, call("c", on_time))
    balance = next(r for r in rules if r.id == "account-details-before-identity")
    one_segment = [("agent", 1.0, 8.0, "Thanks for confirming your date of birth. Your balance is 400 dollars.")]
    assert not evaluate(balance, call("c", one_segment))
    reversed_order = [("agent", 1.0, 8.0, "Your balance is 400 dollars. Now, your date of birth?")]
    assert evaluate(balance, call("c", reversed_order))


@pytest.mark.parametrize("said, hit", [
    ("You cannot lose a single cent.", True),
    ("I cannot close your account today.", False),  # a short word is never another: lose is not close
    ("It has a garanteed returns clause.", True),
    ("我肯定转给您。", False),  # 转 for 赚: under four characters, a phrase matches only as written
])
def test_fuzzy_matching_never_takes_one_short_word_for_another(tmp_path: Path, said: str, hit: bool) -> None:
    rule = ("  - id: f\n    severity: high\n    when: {said: [cannot lose, guaranteed return, 肯定赚], fuzzy: 0.8}\n")
    assert bool(fires(tmp_path, rule, ("agent", 1.0, 4.0, said))) == hit


def test_a_rule_file_not_in_utf8_is_refused_in_words(tmp_path: Path) -> None:
    folder = tmp_path / "rules"
    folder.mkdir()
    (folder / "r.yaml").write_bytes("rules:\n  - id: a\n    severity: high\n    when: {said: 保证收益}\n".encode("gbk"))
    with pytest.raises(RuleError, match="r.yaml: not UTF-8 text"):
        load_rules(folder)
