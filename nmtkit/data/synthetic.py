"""The embedded default corpus: a seeded English->German parallel corpus from a small grammar and lexicon.

The grammar was written for this project so that translating it takes what real translation takes, in
miniature: German nouns have gender, and articles and adjective endings agree with gender, number and case
(der/die/das, ein/eine, den/dem after prepositions, im/vom contractions); verbs conjugate for person and
tense, perfect and future put the participle/infinitive at the end of the clause; "dass/weil/obwohl"
clauses are verb-final; fronted time adverbs invert subject and verb (V2); negation is "nicht" or "kein";
questions front the verb. The mapping is deterministic: every English sentence has exactly one German
translation, so a model can in principle get it all right (BLEU 100).

    pairs = generate(50_000, 1_000, 1_000, seed=1234)   # {"train": [(en, de), ...], "dev": ..., "test": ...}
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Optional

from nmtkit.data import lexicon

# --- German inflection -------------------------------------------------------------------------------

_DEF = {"nom": {"m": "der", "f": "die", "n": "das", "pl": "die"},
        "acc": {"m": "den", "f": "die", "n": "das", "pl": "die"},
        "dat": {"m": "dem", "f": "der", "n": "dem", "pl": "den"}}
_EIN = {"nom": {"m": "ein", "f": "eine", "n": "ein", "pl": "eine"},   # plural: only kein-/mein- (keine, meine)
        "acc": {"m": "einen", "f": "eine", "n": "ein", "pl": "eine"},
        "dat": {"m": "einem", "f": "einer", "n": "einem", "pl": "einen"}}
# Adjective endings: weak after der/die/das, mixed after ein/kein/mein, strong with no article.
_WEAK = {"nom": {"m": "e", "f": "e", "n": "e", "pl": "en"}, "acc": {"m": "en", "f": "e", "n": "e", "pl": "en"},
         "dat": {"m": "en", "f": "en", "n": "en", "pl": "en"}}
_MIXED = {"nom": {"m": "er", "f": "e", "n": "es", "pl": "en"}, "acc": {"m": "en", "f": "e", "n": "es", "pl": "en"},
          "dat": {"m": "en", "f": "en", "n": "en", "pl": "en"}}
_STRONG_PL = {"nom": "e", "acc": "e", "dat": "en"}


def _adj_de(stem: str, ending: str) -> str:
    # Stems ending in -e take only the consonant of the ending: leise -> leisen, müde -> müder.
    return stem + ending[1:] if stem.endswith("e") else stem + ending


@dataclass
class NP:
    noun: lexicon.Noun
    plural: bool = False
    det: str = "the"            # "the", "a", "my", "no" (rendered "a" in English, "kein" in German), number, "" (bare)
    adj: Optional[str] = None

    person = property(lambda self: "pl" if self.plural else "3sg")

    def en(self) -> str:
        words = []
        if self.det in ("the", "my"):
            words.append(self.det)
        elif self.det in ("a", "no"):
            first = self.adj or self.noun.en
            words.append("an" if first[0] in "aeiou" else "a")
        elif self.det:
            words.append(self.det)  # a number
        if self.adj:
            words.append(self.adj)
        words.append(self.noun.en_pl if self.plural else self.noun.en)
        return " ".join(words)

    def de(self, case: str) -> str:
        g = "pl" if self.plural else self.noun.gender
        words = []
        if self.det == "the":
            words.append(_DEF[case][g])
            ending = _WEAK[case][g]
        elif self.det in ("a", "my", "no"):
            words.append({"a": "", "my": "m", "no": "k"}[self.det] + _EIN[case][g])
            assert not (self.plural and self.det == "a")
            ending = _MIXED[case][g]
        else:  # a number or no article: plural, strong endings
            if self.det:
                words.append(lexicon.NUMBERS[self.det])
            ending = _STRONG_PL[case]
        if self.adj:
            words.append(_adj_de(lexicon.ADJECTIVES[self.adj], ending))
        words.append(self.noun.de_form(self.plural, case))
        return " ".join(words)


@dataclass
class Subject:
    """A pronoun, a noun phrase, or two noun phrases joined by "and" (plural agreement)."""
    pronoun: Optional[tuple] = None
    nps: tuple = ()

    @property
    def person(self) -> str:
        if self.pronoun:
            return self.pronoun[2]
        return "pl" if len(self.nps) > 1 else self.nps[0].person

    def en(self) -> str:
        return self.pronoun[0] if self.pronoun else " and ".join(np.en() for np in self.nps)

    def de(self) -> str:
        return self.pronoun[1] if self.pronoun else " und ".join(np.de("nom") for np in self.nps)


@dataclass
class PP:
    prep: str
    np: NP

    def en(self) -> str:
        return f"{self.prep} {self.np.en()}"

    def de(self) -> str:
        de_prep, case, _ = lexicon.PREPOSITIONS[self.prep]
        words = self.np.de(case).split(" ", 1)
        short = lexicon.CONTRACTIONS.get((de_prep, words[0])) if self.np.det == "the" and len(words) > 1 else None
        return f"{short} {words[1]}" if short else f"{de_prep} {' '.join(words)}"


@dataclass
class Clause:
    subj: Subject
    verb: Optional[lexicon.Verb]          # None: copula "be" + predicative adjective
    tense: str                    # "present", "past", "perfect", "future"
    obj: Optional[NP] = None
    pp: Optional[PP] = None
    neg: bool = False
    time: Optional[str] = None
    front_time: bool = False
    pred: Optional[str] = None    # predicative adjective (copula clauses)

    # English --------------------------------------------------------------------------------------
    def _en_verb(self, question: bool = False) -> tuple[list[str], list[str]]:
        """(words before the subject, words after it): the verb group with do-support and negation."""
        p, neg = self.subj.person, ["not"] if self.neg else []
        if self.verb is None:
            be = lexicon.BE_EN[self.tense][p]
            return ([be], neg) if question else ([], [be] + neg)
        base, s3, past, part = self.verb.en
        if self.tense == "perfect":
            have = "has" if p == "3sg" else "have"
            return ([have], neg + [part]) if question else ([], [have] + neg + [part])
        if self.tense == "future":
            return (["will"], neg + [base]) if question else ([], ["will"] + neg + [base])
        if question or self.neg:
            do = "did" if self.tense == "past" else ("does" if p == "3sg" else "do")
            return ([do], neg + [base]) if question else ([], [do] + neg + [base])
        return [], [past if self.tense == "past" else (s3 if p == "3sg" else base)]

    def _en_rest(self, with_obj: bool = True) -> list[str]:
        words = []
        if self.pred:
            words.append(self.pred)
        if self.obj is not None and with_obj:
            words.append(self.obj.en())
        if self.pp:
            words.append(self.pp.en())
        if self.time and not self.front_time:
            words.append(self.time)
        return words

    def en(self) -> str:
        before, after = self._en_verb()
        words = [self.time] if self.time and self.front_time else []
        return " ".join(words + [self.subj.en()] + before + after + self._en_rest())

    def en_question(self, wh: str = "") -> str:
        before, after = self._en_verb(question=True)
        if wh == "who":  # the subject is the question word: no do-support
            c = Clause(Subject(pronoun=("who", "wer", "3sg")), self.verb, self.tense, self.obj, self.pp,
                       time=self.time)
            return " ".join(["who"] + c._en_verb()[1] + c._en_rest())
        return " ".join(([wh] if wh else []) + before + [self.subj.en()] + after + self._en_rest(wh != "what"))

    # German ---------------------------------------------------------------------------------------
    def _de_verb(self) -> tuple[str, list[str]]:
        """(finite verb, right bracket): the participle or infinitive goes to the end of the clause."""
        p = self.subj.person
        if self.verb is None:
            return lexicon.BE_DE[self.tense][p], []
        inf, s1, s3, pl, past_sg, past_pl, part = self.verb.de
        if self.tense == "perfect":
            return lexicon.AUX[self.verb.aux][p], [part]
        if self.tense == "future":
            return lexicon.AUX["werden"][p], [inf]
        if self.tense == "past":
            return (past_pl if p == "pl" else past_sg), []
        return {"1sg": s1, "3sg": s3, "pl": pl}[p], []

    def _de_middle(self, with_obj: bool = True) -> list[str]:
        """The middle field: time, object, nicht, prepositional phrase, predicative adjective."""
        words, neg = [], self.neg
        if self.time and not self.front_time:
            words.append(lexicon.TIMES[self.time][0])
        if self.obj is not None and with_obj:
            if neg and self.obj.det == "a":  # "does not see a dog" -> "sieht keinen Hund"
                words.append(NP(self.obj.noun, self.obj.plural, "no", self.obj.adj).de("acc"))
                neg = False
            else:
                words.append(self.obj.de("acc"))
        if neg:
            words.append("nicht")
        if self.pp:
            words.append(self.pp.de())
        if self.pred:
            words.append(lexicon.ADJECTIVES[self.pred] if self.pred in lexicon.ADJECTIVES else self.pred)
        return words

    def de(self) -> str:  # main clause, verb second
        fin, right = self._de_verb()
        if self.time and self.front_time:
            head = [lexicon.TIMES[self.time][0], fin, self.subj.de()]
        else:
            head = [self.subj.de(), fin]
        return " ".join(head + self._de_middle() + right)

    def de_sub(self) -> str:  # subordinate clause, verb final
        fin, right = self._de_verb()
        return " ".join([self.subj.de()] + self._de_middle() + right + [fin])

    def de_question(self, wh: str = "") -> str:
        fin, right = self._de_verb()
        if wh == "who":
            c = Clause(Subject(pronoun=("who", "wer", "3sg")), self.verb, self.tense, self.obj, self.pp,
                       time=self.time)
            fin, right = c._de_verb()
            return " ".join(["wer", fin] + c._de_middle() + right)
        lead = {"what": ["was"]}.get(wh) or ([lexicon.WH[wh]] if wh else [])
        return " ".join(lead + [fin, self.subj.de()] + self._de_middle(wh != "what") + right)


# --- sampling ----------------------------------------------------------------------------------------

_TENSES = ("present", "past", "perfect", "future")


class _Sampler:
    def __init__(self, rng: random.Random):
        self.r = rng
        self.by_kind: dict[str, list[lexicon.Noun]] = {}
        for n in lexicon.NOUNS:
            self.by_kind.setdefault(n.kind, []).append(n)
        self.animate = [n for n in lexicon.NOUNS if n.animate]

    def np(self, kinds, *, allow_plural=True, dets=("the", "the", "a", "my", "num", "bare")) -> NP:
        r = self.r
        pool = [n for k in kinds for n in self.by_kind[k]]
        noun = r.choice(pool)
        det = r.choice(dets)
        if det == "num":
            det, plural = r.choice(list(lexicon.NUMBERS)), True
        elif det == "bare":
            det, plural = "", True
        elif det == "a":
            plural = False
        else:
            plural = allow_plural and r.random() < 0.3
        if not allow_plural and plural:
            det, plural = "the", False
        adj = r.choice(list(lexicon.ADJECTIVES)) if r.random() < 0.35 else None
        return NP(noun, plural, det, adj)

    def subject(self, coordinate_ok=True, kinds=("person", "animal")) -> Subject:
        r = self.r
        x = r.random()
        if x < 0.3:
            return Subject(pronoun=r.choice(lexicon.PRONOUNS))
        if coordinate_ok and x < 0.36:
            a = self.np(kinds, dets=("the", "a", "my"))
            b = self.np(kinds, dets=("the", "a", "my"))
            return Subject(nps=(a, b))
        return Subject(nps=(self.np(kinds, dets=("the", "the", "a", "my", "num")),))

    def clause(self, *, allow_time=True, allow_neg=True, allow_pp=True, tense=None, copula_ok=True) -> Clause:
        r = self.r
        subj = self.subject()
        tense = tense or r.choice(_TENSES)
        neg = allow_neg and r.random() < 0.25
        if copula_ok and r.random() < 0.12:  # "the dog is (not) big"
            tense = "present" if tense in ("present", "perfect") else "past"
            time = None
            if allow_time and r.random() < 0.3:
                time = "today" if tense == "present" else "yesterday"
            return Clause(subj, None, tense, neg=neg, pred=r.choice(lexicon.PREDICATIVE), time=time,
                          front_time=bool(time) and r.random() < 0.5)
        transitive = r.random() < 0.65
        obj = None
        if transitive:
            verb = r.choice(lexicon.TRANSITIVE)
            # Negated objects take the/a/my so that "nicht"/"kein" placement stays one rule.
            dets = ("the", "a", "my") if neg else ("the", "the", "a", "my", "num", "bare")
            obj = self.np(verb.objects, dets=dets)
        else:
            verb = r.choice(lexicon.INTRANSITIVE)
        pp = None
        if allow_pp and r.random() < (0.3 if transitive else 0.6):
            prep = r.choice(list(lexicon.PREPOSITIONS))
            pp = PP(prep, self.np(lexicon.PREPOSITIONS[prep][2], dets=("the", "the", "a", "my", "num")))
        time = None
        if allow_time and r.random() < 0.3:
            time = r.choice([t for t, (_, tenses) in lexicon.TIMES.items() if tense in tenses])
        return Clause(subj, verb, tense, obj, pp, neg, time, front_time=bool(time) and r.random() < 0.5)

    def sentence(self) -> tuple[str, str]:
        r = self.r
        x = r.random()
        if x < 0.5:  # declarative main clause
            c = self.clause()
            return _finish(c.en(), "."), _finish(c.de(), ".")
        if x < 0.65:  # "X knows that ..." (verb-final subordinate clause)
            main = Clause(self.subject(False, ("person",)), r.choice(lexicon.EMBEDDING), r.choice(("present", "past")))
            sub = self.clause(allow_pp=r.random() < 0.5)
            return (_finish(f"{main.en()} that {sub.en()}", "."),
                    _finish(f"{main.de()}, dass {sub.de_sub()}", "."))
        if x < 0.77:  # "X ..., because Y ..."
            conj = r.choice(list(lexicon.CONJUNCTIONS))
            a = self.clause(allow_pp=False, allow_time=False)
            b = self.clause(allow_pp=r.random() < 0.4)
            return (_finish(f"{a.en()} {conj} {b.en()}", "."),
                    _finish(f"{a.de()}, {lexicon.CONJUNCTIONS[conj]} {b.de_sub()}", "."))
        if x < 0.89:  # yes/no question: the finite verb comes first
            c = self.clause(allow_neg=False)
            c.front_time = False
            return _finish(c.en_question(), "?"), _finish(c.de_question(), "?")
        # wh-question
        c = self.clause(allow_neg=False, copula_ok=False)
        c.front_time = False
        if c.obj is not None and r.random() < 0.35:
            wh = "what"
        elif r.random() < 0.3:
            wh = "who"
        else:
            wh = r.choice(list(lexicon.WH))
            if wh == "where":
                c.pp = None  # "where" asks for the place
        if wh == "when":
            c.time = None
        return _finish(c.en_question(wh), "?"), _finish(c.de_question(wh), "?")


def _finish(text: str, punct: str) -> str:
    return text[0].upper() + text[1:] + punct


MAX_WORDS = 25  # longer samples are redrawn, so sentences stay 4-25 words


def sample_pairs(n: int, seed: int) -> list[tuple[str, str]]:
    """n pairs drawn from the grammar (duplicates possible); the building block of generate()."""
    s = _Sampler(random.Random(seed))
    out = []
    while len(out) < n:
        en, de = s.sentence()
        if len(en.split()) <= MAX_WORDS and len(de.split()) <= MAX_WORDS:
            out.append((en, de))
    return out


def generate(train_size: int = 50_000, dev_size: int = 1_000, test_size: int = 1_000,
             seed: int = 1234) -> dict[str, list[tuple[str, str]]]:
    """Distinct pairs split into train/dev/test; dev and test share no source sentence with train."""
    s = _Sampler(random.Random(seed))
    want = train_size + dev_size + test_size
    seen: dict[str, str] = {}
    order: list[str] = []
    tries = 0
    while len(order) < want:
        tries += 1
        if tries > 20 * want + 1000:
            raise ValueError(f"the grammar cannot supply {want:,} distinct sentences; ask for fewer")
        en, de = s.sentence()
        if len(en.split()) > MAX_WORDS or len(de.split()) > MAX_WORDS:
            continue
        old = seen.get(en)
        if old is None:
            seen[en] = de
            order.append(en)
        elif old != de:  # would make the task ambiguous: a bug in the grammar
            raise AssertionError(f"ambiguous source {en!r}: {old!r} vs {de!r}")
    pairs = [(en, seen[en]) for en in order]
    # Dev and test are taken first, train is the rest: disjoint by construction.
    return {"dev": pairs[:dev_size], "test": pairs[dev_size:dev_size + test_size],
            "train": pairs[dev_size + test_size:]}


def lemmas() -> int:
    """How many lemmas the grammar uses (both languages' content and function words, counted once)."""
    function = ("the a an my not do does did has have will am is are was were that and who what "
                "I he she we they").split()
    lists = (lexicon.NOUNS, lexicon.ADJECTIVES, lexicon.NUMBERS, lexicon.TRANSITIVE, lexicon.INTRANSITIVE,
             lexicon.CONJUNCTIONS, lexicon.PREPOSITIONS, lexicon.TIMES, lexicon.WH, function)
    return sum(len(x) for x in lists)
