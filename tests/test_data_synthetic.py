"""The embedded grammar corpus: deterministic, disjoint splits, unambiguous, and it shows the phenomena."""
import re

import pytest

from nmtkit.data import lexicon
from nmtkit.data import synthetic as syn


@pytest.fixture(scope="module")
def corpus():
    return syn.generate(4000, 300, 300, seed=11)


def test_generation_is_deterministic_and_seeded():
    a = syn.generate(300, 30, 30, seed=5)
    b = syn.generate(300, 30, 30, seed=5)
    c = syn.generate(300, 30, 30, seed=6)
    assert a == b
    assert a["train"] != c["train"]
    assert [len(a[s]) for s in ("train", "dev", "test")] == [300, 30, 30]


def test_splits_are_disjoint_and_distinct(corpus):
    train = {en for en, _ in corpus["train"]}
    dev, test = {en for en, _ in corpus["dev"]}, {en for en, _ in corpus["test"]}
    assert len(train) == len(corpus["train"]) and len(dev) == 300 and len(test) == 300
    assert not (train & dev) and not (train & test) and not (dev & test)


def test_translation_is_a_function_of_the_source():
    seen = {}
    for en, de in syn.sample_pairs(20_000, seed=3):
        assert seen.setdefault(en, de) == de, en


def test_lengths_and_vocabulary_stay_modest(corpus):
    lens = [len(en.split()) for en, _ in corpus["train"]]
    assert max(lens) <= syn.MAX_WORDS
    assert sum(4 <= n <= 25 for n in lens) / len(lens) > 0.9
    assert 150 <= syn.lemmas() <= 300


def test_article_case_agreement(corpus):
    # Direct object: den Hund; after "with": dem Hund; subject: der Hund; feminine/neuter keep die/das in acc.
    assert syn.NP(_noun("dog"), det="the").de("acc") == "den Hund"
    assert syn.PP("with", syn.NP(_noun("dog"), det="the")).de() == "mit dem Hund"
    assert syn.PP("in", syn.NP(_noun("house"), det="the")).de() == "im Haus"
    assert syn.NP(_noun("dog"), det="a", adj="big").de("nom") == "ein großer Hund"
    assert syn.NP(_noun("child"), det="a", adj="small").de("acc") == "ein kleines Kind"
    assert syn.NP(_noun("dog"), plural=True, det="two").de("dat") == "zwei Hunden"
    pairs = corpus["train"]
    hits = [(en, de) for en, de in pairs if re.search(r"\bwith the dog\b", en)]
    assert hits and all("mit dem Hund" in de for en, de in hits)
    hits = [(en, de) for en, de in pairs if re.match(r"The dog ", en)]
    assert hits and all(de.startswith("Der Hund ") for en, de in hits)
    # The same English adjective takes different German endings depending on gender/case/article.
    endings = {m.group(1) for _, de in pairs for m in re.finditer(r"\bgroß(\w*)\b", de)}
    assert {"e", "en", "er", "es"} <= endings


def test_subordinate_clauses_are_verb_final(corpus):
    finite = set()
    for v in lexicon.TRANSITIVE + lexicon.INTRANSITIVE:
        finite.update(v.de[1:6])
    for forms in list(lexicon.AUX.values()) + list(lexicon.BE_DE.values()):
        finite.update(forms.values())
    subs = [(en, de) for en, de in corpus["train"] if " that " in en]
    assert len(subs) > 100
    for en, de in subs:
        assert ", dass " in de, (en, de)
        assert de.rstrip(".").split()[-1] in finite, (en, de)


def test_perfect_participle_and_v2_inversion(corpus):
    pairs = corpus["train"]
    perf = [(en, de) for en, de in pairs if re.match(r"The man has seen the \w+\.$", en)]
    for en, de in perf:
        assert de.startswith("Der Mann hat ") and de.endswith(" gesehen."), (en, de)
    fronted = [(en, de) for en, de in pairs if en.startswith("Yesterday ") and " that " not in en]
    assert fronted
    for en, de in fronted:  # the verb comes second, before the subject
        assert de.startswith("Gestern "), (en, de)
    questions = [(en, de) for en, de in pairs if en.startswith("Did the ")]
    assert questions
    for en, de in questions:  # "Did the dog ...?" -> "<past verb> der Hund ...?": the verb comes first
        assert de.endswith("?") and de.split()[1] in ("der", "die", "das"), (en, de)


def test_negation_uses_kein_for_indefinites(corpus):
    hits = [(en, de) for en, de in corpus["train"] if re.search(r"\b(does|do|did) not \w+ a ", en)
            and " that " not in en and " because " not in en and " although " not in en and " while " not in en]
    assert hits and all(re.search(r"\bkein", de) for _, de in hits)


def _noun(en):
    return next(n for n in lexicon.NOUNS if n.en == en)
