"""Sentences of retrieved text that speak to the system instead of about a company: prompt-injection attempts.

Built from the general vocabulary of prompt injection, never from a particular attack: phrases that override earlier
instructions, chat-template and role tags, words addressed to a model or an assistant, and directives about an
agent's replies, routing, tools or scores. A sentence with one strong cue, or two weak ones, is an instruction. The
extractive provider leaves such sentences out of the findings it quotes; the evidence itself is kept as it was.
"""
from __future__ import annotations

import re

_I = re.I

# strong: one is enough
_OVERRIDE = re.compile(
    r"\b(?:ignore|disregard|forget|override|bypass|discard|stop\s+following|(?:do\s+not|don't|no\s+longer)\s+(?:follow|obey))\b"
    r"[\w\s,'-]{0,40}?"
    r"\b(?:instructions?|prompts?|rules|directions|directives?|guidelines|constraints|programming|system messages?)\b", _I)
_OVERRIDE_ABOVE = re.compile(
    r"\b(?:ignore|disregard|forget)\s+(?:all\s+|everything\s+)?(?:of\s+)?(?:the\s+|what\s+(?:is|was)\s+)?"
    r"(?:above|everything|(?:previous|prior|preceding|earlier)\s+(?:text|messages?|context|content))\b", _I)
_ROLE_TAG = re.compile(r"<\|[a-z_]*\|>|\[/?INST\]|<</?SYS>>|(?:^|\s)#{2,}\s*(?:system|instructions?|assistant)\b"
                       r"|\b(?:system|developer|assistant)\s+(?:prompt|message|override|notice|note)\s*:", _I)
_MODEL_ADDRESS = re.compile(
    r"\b(?:from\s+now\s+on,?\s+(?:you|the\s+assistant)|pretend\s+(?:to\s+be|you\s+are)|act\s+as\s+(?:an?\s+)?"
    r"(?:ai|assistant|model|unrestricted|jailbroken)|your\s+new\s+(?:task|role|instructions?|goal)|you\s+must\s+now"
    r"|as\s+an?\s+(?:ai|language\s+model|llm|assistant)\b|system\s+prompt|developer\s+mode|jailbreak"
    r"|(?:ai|llm|language\s+model|assistant|chatbot|agent)s?\s+(?:reading|processing|summari[sz]ing|analy[sz]ing|parsing)"
    r"\s+this)", _I)

# weak: two are needed
_WEAK = [
    re.compile(r"\byou\s+are\s+now\b", _I),
    re.compile(r"\b(?:reply|respond|answer|output|print|say|write|return)\s+(?:only\s+)?(?:with|exactly|the\s+word)\b", _I),
    re.compile(r"\b(?:reply|respond|answer|output|print|return|say)\s+only\b|\bonly\s+(?:reply|respond|answer|output)\b", _I),
    re.compile(r"\b(?:previous|prior|earlier|above|original)\s+(?:instructions?|directives?|rules|prompts?|guidelines)\s+"
               r"(?:are|is|have\s+been|were)\s+(?:void|cancell?ed|obsolete|revoked|invalid|null|no\s+longer\s+(?:valid|in\s+effect))", _I),
    re.compile(r"\bwithout\s+(?:any\s+)?(?:restrictions|limits|filters|rules)\b|\b(?:unrestricted|uncensored)\b", _I),
    re.compile(r"\b(?:ai|model|llm|assistant|chatbot)\s+(?:must|should|shall)\s+(?:now\s+)?"
               r"(?:say|reply|respond|output|state|write|answer|rate|ignore|recommend|mark|describe|report)\b", _I),
    re.compile(r"\bwhen\s+summari[sz]ing\b", _I),
    re.compile(r"\bset\s+(?:the\s+|your\s+|its\s+)?(?:confidence|score|rating|quality|grade)\b", _I),
    re.compile(r"\b(?:confidence|score|rating|quality)\s+(?:to|of|at)\s+(?:100|1\.0|maximum|max|full|the\s+highest)\b", _I),
    re.compile(r"\b(?:route|send|forward|redirect|hand)\s+(?:this|the|your)\s+(?:question|query|request|prompt|task)\b", _I),
    re.compile(r"\b(?:call|use|invoke|run|trigger)\s+(?:the\s+)?[\w-]*\s*(?:tool|function|plugin)s?\b", _I),
    re.compile(r"\b(?:rate|score|grade|classify|mark|label)\s+(?:this|the)\s+(?:answer|response|passage|document|source|filing)"
               r"\s+(?:as|with|a)\b", _I),
    re.compile(r"\b(?:instructions?|commands?|orders)\s*:", _I),
    re.compile(r"(?:^|[\s\"'])(?:ai|assistant|model|llm|chatbot|bot|agent)\s*[,:]\s", _I),
    re.compile(r"\b(?:important|attention|note)\s*(?:to|for)\s+(?:the\s+)?(?:ai|assistant|model|llm|agent|system)\b", _I),
    re.compile(r"\b(?:do\s+not|don't|never)\s+(?:mention|cite|reveal|tell|show)\s+(?:the\s+user|this|that\s+you|your)\b", _I),
]
_STRONG = [_OVERRIDE, _OVERRIDE_ABOVE, _ROLE_TAG, _MODEL_ADDRESS]


def is_instruction(sentence: str) -> bool:
    """True when the sentence addresses the system (a model, an agent, its tools or scores) rather than the reader."""
    if any(p.search(sentence) for p in _STRONG):
        return True
    return sum(1 for p in _WEAK if p.search(sentence)) >= 2
