"""A labelled set of bank calls for the QA rules: what each must and must not produce under the default rule set.

Every call lists the rules (and tags) that must fire on it; every other rule of the
default set must not. Text-level transcripts in English and Chinese, turns four
seconds apart (with the call's analytics where a rule measures them); the English
ones without are also spoken (espeak-ng, stereo) by ``bench/qa_rules.py``, which
puts them through the model first. Written as the
wordings callers and agents use, not as the rules' own examples.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable

from asr_tasks.audit.rules import Rule, audit
from asr_tasks.models import Recording, Segment, Transcript, recording_id_for
from asr_tasks.text.pii_policy import Policy

DAY = "2026-11-30"
EN_DISCLOSE = ("agent", "Thank you for calling Harbor Bank, this call is recorded for quality and training.")
ZH_DISCLOSE = ("agent", "您好，这里是海港银行，本次通话将被录音。")


@dataclass(frozen=True)
class Labelled:
    name: str
    turns: tuple[tuple[str, str], ...]  # (speaker, text)
    fires: frozenset[str]  # rule ids (tag rules too) that must fire; every other must not
    analytics: tuple[tuple[str, Any], ...] = ()  # the call's analytics, where a rule measures them

    @property
    def english(self) -> bool:
        return all(ord(c) < 0x2E80 for _, text in self.turns for c in text)

    @property
    def spoken(self) -> bool:
        """Whether speaking it keeps its labels: English, and nothing measured that speech would not reproduce."""
        return self.english and not self.analytics


def _call(name: str, fires: Iterable[str], *turns: tuple[str, str], **analytics: Any) -> Labelled:
    return Labelled(name, tuple(turns), frozenset(fires), tuple(analytics.items()))


def _talk(agent: float, customer: float, agent_interrupts: int = 0) -> dict[str, Any]:
    return {"agent": {"talk_seconds": agent, "interruptions": agent_interrupts},
            "customer": {"talk_seconds": customer, "interruptions": 0}}


def a(text: str) -> tuple[str, str]:
    return ("agent", text)


def c(text: str) -> tuple[str, str]:
    return ("customer", text)


CALLS = [
    # promises of returns and of no risk, in other words than the rules' examples
    _call("en_promise_words", {"promise-of-return"}, EN_DISCLOSE, c("Is my money safe in this plan?"),
          a("Absolutely, you cannot lose a single cent, I promise you will earn eight percent a year."), c("Okay.")),
    _call("en_promise_guarantee", {"promise-of-return"}, EN_DISCLOSE, c("What will I get back?"),
          a("We guarantee you a return of six percent, whatever the market does."),
          c("That is good to hear, my old savings account paid almost nothing.")),
    _call("en_no_risk", {"promise-of-return"}, EN_DISCLOSE, c("And the risk?"),
          a("There is no risk at all with this bond, it is risk-free."),
          c("I see, so my money is as safe as in a savings account then.")),
    _call("en_denies_promise", set(), EN_DISCLOSE, c("Can you guarantee the return?"),
          a("I cannot guarantee a return, and no investment is risk free."), c("Understood.")),
    _call("en_past_performance", set(), EN_DISCLOSE, c("How did it do last year?"),
          a("It grew by four percent, but past performance does not guarantee future returns."), c("Fine.")),
    _call("en_risk_warning", set(), EN_DISCLOSE, c("Tell me about the fund."),
          a("The value can go down as well as up, and you may get back less than you invest."), c("Thanks.")),
    _call("zh_promise", {"promise-of-return"}, ZH_DISCLOSE, c("这个产品安全吗？"),
          a("您放心，这款理财保本保息，年化收益百分之六。"), c("好的。")),
    _call("zh_promise_commit", {"promise-of-return"}, ZH_DISCLOSE, c("能赚多少？"),
          a("我向您保证，一年至少能赚百分之八。"), c("明白了。")),
    _call("zh_promise_traditional", {"promise-of-return"}, ZH_DISCLOSE, c("有風險嗎？"),
          a("這個產品零風險，穩賺不賠。"), c("好。")),
    _call("zh_denies_promise", set(), ZH_DISCLOSE, c("你们能保证收益吗？"),
          a("我们不能保证收益，理财产品有风险，投资需谨慎。"), c("好的，我再想想。")),
    _call("zh_no_guarantee", set(), ZH_DISCLOSE, c("收益是固定的吗？"),
          a("收益无法保证，历史业绩不代表未来表现。"), c("明白。")),
    # the disclosure: in time, late, missing, in other words
    _call("en_disclosure_other_words", set(), a("Hi, this is Jane from Harbor Bank, we record all our calls."),
          c("Hello Jane."), a("How can I help?"), c("Just a question about my statement.")),
    _call("en_disclosure_late", {"recording-disclosure"}, a("Good morning, Harbor Bank, Jane speaking."),
          c("Good morning Jane, I am calling about the letter you sent me last week."),
          a("Of course, can you tell me which letter it was, the one about the new fees?"),
          c("Yes, the one about the new account fees that start in January."),
          a("Before we go on, this call is recorded."), c("Fine.")),
    _call("en_disclosure_missing", {"recording-disclosure"}, a("Hello, Harbor Bank."), c("Hello, I have a question."),
          a("Sure, go ahead."), c("When does my branch open?"), a("At nine.")),
    _call("zh_disclosure_other_words", set(), a("您好，您的通话会被录音，请问有什么可以帮您？"), c("我想查一下账单。"),
          a("好的，请稍等。")),
    _call("zh_disclosure_late", {"recording-disclosure"}, a("您好，海港银行。"), c("你好。"), a("请问有什么可以帮您？"),
          c("我想问一下。"), a("本次通话将被录音。"), c("好的。")),
    _call("zh_disclosure_missing", {"recording-disclosure"}, a("您好，请问是王先生吗？"), c("是的。"),
          a("我们有一款新产品想给您介绍一下。")),
    # security codes, prohibited advice, pressure
    _call("en_asks_cvv", {"security-code-asked"}, EN_DISCLOSE, c("I want to pay my bill by card."),
          a("Sure, and can you read me the three digit security code on the back?"), c("It is, hmm, let me look.")),
    _call("en_asks_password", {"security-code-asked"}, EN_DISCLOSE, c("I can't log in."),
          a("No problem, just give me your password and I will check it."), c("Okay.")),
    _call("en_warns_pin", set(), EN_DISCLOSE, c("Someone called me asking for my PIN."),
          a("We will never ask for your PIN, please do not share it with anyone."), c("Thank you.")),
    _call("zh_asks_code", {"security-code-asked"}, ZH_DISCLOSE, c("我要转账。"), a("好的，请把手机收到的验证码告诉我。"),
          c("好。")),
    _call("zh_warns_code", set(), ZH_DISCLOSE, c("有人让我报验证码。"), a("请不要把验证码告诉任何人，我们不会索要。"),
          c("谢谢提醒。")),
    _call("en_borrow_to_invest", {"prohibited-advice"}, EN_DISCLOSE, c("I do not have the money right now."),
          a("Then take out a loan to invest, the fund pays more than the loan costs."), c("Hmm.")),
    _call("en_no_borrow", set(), EN_DISCLOSE, c("Should I borrow for this?"),
          a("No, we do not recommend that you borrow money to invest."), c("Okay.")),
    _call("zh_all_savings", {"prohibited-advice"}, ZH_DISCLOSE, c("我应该买多少？"), a("建议您把所有积蓄都投进来。"),
          c("这么多？")),
    _call("en_pressure", {"pressure-selling"}, EN_DISCLOSE, c("I need to think about it."),
          a("This is your last chance, the offer ends today."), c("Really?")),
    _call("en_no_pressure", set(), EN_DISCLOSE, c("I need to think about it."),
          a("Of course, there is no rush, call us back when you are ready."), c("Thanks.")),
    _call("zh_pressure", {"pressure-selling"}, ZH_DISCLOSE, c("我考虑一下。"), a("名额有限，今天是最后一天了。"),
          c("这样啊。")),
    _call("zh_no_pressure", set(), ZH_DISCLOSE, c("我考虑一下。"), a("没关系，您不用马上决定。"), c("好的。")),
    # identity before account details
    _call("en_balance_unverified", {"account-details-before-identity"}, EN_DISCLOSE, c("What is my balance?"),
          a("Your balance is two thousand four hundred dollars."), c("Thanks.")),
    _call("en_balance_verified", set(), EN_DISCLOSE, c("What is my balance?"),
          a("First, can you confirm your date of birth?"), c("The third of March, nineteen eighty."),
          a("Thank you. Your balance is two thousand four hundred dollars.")),
    _call("zh_balance_unverified", {"account-details-before-identity"}, ZH_DISCLOSE, c("我的余额是多少？"),
          a("您的余额是三千二百元。"), c("谢谢。")),
    _call("zh_balance_verified", set(), ZH_DISCLOSE, c("我的余额是多少？"), a("请先报一下身份证后四位，核实一下您的身份。"),
          c("1234。"), a("好的，您的余额是三千二百元。")),
    # complaints, cancellations, vulnerable customers
    _call("en_complaint_handled", {"complaint"}, EN_DISCLOSE,
          c("I want to make a complaint, I was charged twice this month."),
          a("I am so sorry about that, I will log your complaint and refund the charge."), c("Thank you.")),
    _call("en_complaint_ignored", {"complaint", "complaint-not-acknowledged"}, EN_DISCLOSE,
          c("This is unacceptable, I want to speak to your manager."), a("The fee is in your contract."),
          c("Fine.")),
    _call("zh_complaint_handled", {"complaint"}, ZH_DISCLOSE, c("我要投诉，你们多扣了我的钱。"),
          a("非常抱歉，我马上帮您记录您的投诉。"), c("好。")),
    _call("zh_complaint_ignored", {"complaint", "complaint-not-acknowledged"}, ZH_DISCLOSE,
          c("你们服务太差了，我要投诉。"), a("这个是系统规定的。"), c("算了。")),
    _call("en_no_complaint", set(), EN_DISCLOSE, c("No complaints at all, I just want to update my address."),
          a("Of course, what is the new address?"), c("Ten Park Road.")),
    _call("en_cancel", {"cancellation"}, EN_DISCLOSE, c("I would like to cancel my credit card, please."),
          a("I can help with that."), c("Thanks.")),
    _call("zh_cancel", {"cancellation"}, ZH_DISCLOSE, c("我想注销我的信用卡。"), a("好的，我帮您办理。"), c("谢谢。")),
    _call("en_keep", set(), EN_DISCLOSE, c("I do not want to cancel my policy, only change the payment day."),
          a("Sure, which day suits you?"), c("The first.")),
    _call("en_vulnerable", {"vulnerable-customer"}, EN_DISCLOSE,
          c("My wife passed away in May and I am struggling to pay the mortgage."),
          a("I am very sorry for your loss, let me see what we can do."), c("Thank you.")),
    _call("zh_vulnerable", {"vulnerable-customer"}, ZH_DISCLOSE, c("我最近失业了，这个月的贷款付不起。"),
          a("理解您的情况，我帮您看看延期还款。"), c("谢谢。")),
    # personal data read out on the recorded line
    _call("en_card", {"card-number-read-out"}, EN_DISCLOSE, c("I want to pay by card."),
          a("Of course, can I have the long number on the front of the card?"), c("It is 4539 1488 0343 6467.")),
    _call("zh_id", {"id-number-read-out"}, ZH_DISCLOSE, c("我的身份证号是11010519491231002X。"), a("好的，收到。")),
    # more of the same, in the wordings neighbours use
    _call("en_returns_are_guaranteed", {"promise-of-return"}, EN_DISCLOSE, c("Is the interest fixed?"),
          a("Yes, the returns on this account are guaranteed for five years."), c("Sounds fine to me.")),
    _call("en_make_money_for_sure", {"promise-of-return"}, EN_DISCLOSE, c("Will this work for me?"),
          a("Trust me, you will make money with this one, you can't go wrong."), c("If you say so.")),
    _call("en_no_guarantee_of_profit", set(), EN_DISCLOSE, c("So I will make a profit?"),
          a("There is no guarantee of any profit, the price of the shares can fall."), c("I understand.")),
    _call("zh_sure_win", {"promise-of-return"}, ZH_DISCLOSE, c("这个基金怎么样？"), a("这个基金肯定能赚，您就放心买吧。"),
          c("那好吧。")),
    _call("zh_not_capital_protected", set(), ZH_DISCLOSE, c("这个保本吗？"), a("这个产品不保本，可能会亏损本金。"),
          c("知道了。")),
    _call("en_disclosure_conversation", set(), a("Hello, you are through to Harbor Bank, this conversation is being "
                                                  "recorded."), c("Hi, I need help with my card."), a("Of course.")),
    _call("zh_disclosure_other_order", set(), a("您好，为了保证服务质量，我们的通话过程将会录音。"), c("好的，我想问一下贷款。"),
          a("请讲。")),
    _call("en_disclosure_denied", {"recording-disclosure"}, a("Hello, this call is not recorded, so feel free to talk."),
          c("Great, I have a question."), a("Sure.")),
    _call("en_asks_pin_plainly", {"security-code-asked"}, EN_DISCLOSE, c("I want to check my card."),
          a("Okay, what is your PIN?"), c("Is that safe?")),
    _call("en_keypad_pin", set(), EN_DISCLOSE, c("How do I change my PIN?"),
          a("You can change your PIN at any cash machine, you never need to tell us the number."), c("Thanks.")),
    _call("zh_asks_password", {"security-code-asked"}, ZH_DISCLOSE, c("我的卡被锁了。"), a("您把银行卡密码说一下，我帮您解锁。"),
          c("好的。")),
    _call("en_cash_in_pension", {"prohibited-advice"}, EN_DISCLOSE, c("Where would I find the money?"),
          a("Many customers cash in your pension and put it here, I mean their pension."), c("I see.")),
    _call("zh_credit_card_invest", {"prohibited-advice"}, ZH_DISCLOSE, c("我现在没钱。"), a("没关系，您可以刷信用卡买这个产品。"),
          c("这样可以吗？")),
    _call("en_wont_last", {"pressure-selling"}, EN_DISCLOSE, c("Let me talk to my wife first."),
          a("I would not wait, this rate won't last, you should sign today."), c("Hmm.")),
    _call("zh_hurry", {"pressure-selling"}, ZH_DISCLOSE, c("我再想想。"), a("过了今天就没有这个价格了，机不可失。"), c("好吧。")),
    _call("en_current_balance_unverified", {"account-details-before-identity"}, EN_DISCLOSE,
          c("Hi, can you tell me how much I have?"), a("Sure, your current balance is five hundred pounds."),
          c("Thank you.")),
    _call("en_balance_after_security", set(), EN_DISCLOSE, c("Can you tell me how much I have?"),
          a("I just need to run a quick security check, what is your postcode?"), c("It is AB1 2CD."),
          a("Thanks, your current balance is five hundred pounds.")),
    _call("zh_card_left_unverified", {"account-details-before-identity"}, ZH_DISCLOSE, c("我卡里还有多少钱？"),
          a("您卡里还有两千元。"), c("谢谢。")),
    _call("en_complaint_raise", {"complaint"}, EN_DISCLOSE,
          c("I am really unhappy with how my loan application was handled."),
          a("I apologise for that, let me raise this with the team."), c("Okay.")),
    _call("zh_complaint_ignored_two", {"complaint", "complaint-not-acknowledged"}, ZH_DISCLOSE,
          c("我要投诉你们的客户经理，他一直不回电话。"), a("他最近比较忙。"), c("那怎么办？")),
    _call("en_cant_complain", set(), EN_DISCLOSE, c("How are things?"), a("Fine, how about you?"),
          c("I can't complain, thanks. I want to order a new cheque book.")),
    _call("en_cancel_direct", {"cancellation"}, EN_DISCLOSE, c("I want to cancel the insurance on my car loan."),
          a("Okay, let me bring it up."), c("Thanks.")),
    _call("zh_keep_card", set(), ZH_DISCLOSE, c("我不想注销这张卡，只是想换个密码。"), a("好的，您可以在手机银行修改。"),
          c("谢谢。")),
    _call("en_vulnerable_illness", {"vulnerable-customer"}, EN_DISCLOSE,
          c("I have been in hospital for two months and I could not pay my card bill."),
          a("I am sorry to hear that, let me see what we can do."), c("Thank you.")),
    _call("zh_vulnerable_bereaved", {"vulnerable-customer"}, ZH_DISCLOSE, c("我父亲上个月去世了，他的账户怎么处理？"),
          a("请节哀，我来帮您查一下需要的材料。"), c("谢谢。")),
    _call("en_card_by_context", {"card-number-read-out"}, EN_DISCLOSE, c("I would like to pay my bill."),
          a("Sure, what is the card number?"), c("Four five three nine, one four eight eight, zero three four three, "
                                                 "six four six seven.")),
    # what the analytics measure: holds, who talks, who talks over whom
    _call("en_long_hold", {"long-hold"}, EN_DISCLOSE, c("Can you check my last payment?"),
          a("Let me look, please hold."), a("Thank you for holding, it arrived on Monday."),
          silences=[[12.0, 95.0]], speakers=_talk(20.0, 8.0)),
    _call("en_short_hold", set(), EN_DISCLOSE, c("Can you check my last payment?"), a("One moment please."),
          a("It arrived on Monday."), silences=[[12.0, 30.0]], speakers=_talk(20.0, 8.0)),
    _call("zh_agent_monologue", {"agent-dominates"}, ZH_DISCLOSE, a("我给您详细介绍一下这款产品的特点和历史表现。"),
          c("嗯。"), speakers=_talk(240.0, 12.0)),
    _call("zh_balanced", set(), ZH_DISCLOSE, a("请问有什么可以帮您？"), c("我想了解一下这款产品。"),
          speakers=_talk(60.0, 45.0)),
    _call("en_talks_over", {"agent-interrupts"}, EN_DISCLOSE, c("I wanted to ask about"), a("Yes, yes, the fees."),
          speakers=_talk(50.0, 40.0, agent_interrupts=9)),
    _call("en_few_overlaps", set(), EN_DISCLOSE, c("I wanted to ask about the fees."), a("Of course."),
          speakers=_talk(50.0, 40.0, agent_interrupts=2)),
    _call("en_reference_only", set(), EN_DISCLOSE, c("My reference is 55 12 90."), a("Thanks, I have found it."),
          c("Great.")),
]


def transcript_of(call: Labelled) -> Transcript:
    """The call as a text-level transcript: its turns four seconds apart, the agent on channel 0."""
    key = f"calls/2026/11/30/{call.name}.wav"
    rec = Recording(recording_id=recording_id_for("recordings", key, "e"), bucket="recordings", key=key, etag="e",
                    size=1, call_id=call.name, call_date=DAY, agent_id="AG-1")
    segments = [Segment(rec.recording_id, 0 if who == "agent" else 1, who, 4.0 * n, 4.0 * n + 3.5, text)
                for n, (who, text) in enumerate(call.turns)]
    return Transcript(recording=rec, duration=4.0 * len(segments), segments=segments, language=None, model="m",
                      pipeline_version="1", analytics=dict(call.analytics))


def fired(transcripts: list[Transcript], rules: list[Rule], policy: Policy) -> list[set[str]]:
    """Per call, the rules that fired on it (findings and tags)."""
    result = audit(transcripts, rules, DAY, policy)
    by_call: dict[str, set[str]] = {t.recording.recording_id: set() for t in transcripts}
    for f in result.findings:
        by_call[f.recording_id].add(f.rule_id)
    tag_rule = {r.tag: r.id for r in rules if r.tag}
    for rid, tags in result.tags.items():
        by_call[rid] |= {tag_rule[t] for t in tags}
    return [by_call[t.recording.recording_id] for t in transcripts]


def scores(calls: list[Labelled], found: list[set[str]], rules: list[Rule]) -> dict[str, dict[str, float]]:
    """Per rule and overall: tp, fp, fn (a call counts once per rule), precision and recall."""
    counts: dict[str, Counter[str]] = {r.id: Counter() for r in rules}
    for call, got in zip(calls, found):
        for rule in rules:
            truth, said = rule.id in call.fires, rule.id in got
            counts[rule.id]["tp" if truth and said else "fp" if said else "fn" if truth else "tn"] += 1
    total = sum(counts.values(), Counter())
    out = {}
    for name, n in [*counts.items(), ("overall", total)]:
        out[name] = {"tp": n["tp"], "fp": n["fp"], "fn": n["fn"],
                     "precision": round(n["tp"] / (n["tp"] + n["fp"]), 3) if n["tp"] + n["fp"] else 1.0,
                     "recall": round(n["tp"] / (n["tp"] + n["fn"]), 3) if n["tp"] + n["fn"] else 1.0}
    return out
