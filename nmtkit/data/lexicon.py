"""The synthetic corpus's lexicon: nouns with gender and plural, verbs with their German forms and auxiliaries,
pronouns, prepositions with the case they govern, and the small closed word classes (data; nmtkit.data.synthetic
holds the grammar that uses it)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Noun:
    en: str
    en_pl: str
    de: str
    de_pl: str
    gender: str        # "m", "f", "n"
    kind: str          # "person", "animal", "place", "thing", "food", "text"

    @property
    def animate(self) -> bool:
        return self.kind in ("person", "animal")

    def de_form(self, plural: bool, case: str) -> str:
        if not plural:
            return self.de
        # Dative plural takes -n unless the plural already ends in -n or -s (den Kindern, den Autos).
        if case == "dat" and not self.de_pl.endswith(("n", "s")):
            return self.de_pl + "n"
        return self.de_pl


def _nouns(gender: str, kind: str, table: str) -> list[Noun]:
    out = []
    for entry in table.split(";"):
        en, en_pl, de, de_pl = entry.split()
        out.append(Noun(en, en_pl, de, de_pl, gender, kind))
    return out


NOUNS: list[Noun] = (
    _nouns("m", "person", "man men Mann Männer; teacher teachers Lehrer Lehrer; friend friends Freund Freunde;"
                          "doctor doctors Arzt Ärzte; brother brothers Bruder Brüder; father fathers Vater Väter;"
                          "king kings König Könige; cook cooks Koch Köche; painter painters Maler Maler;"
                          "baker bakers Bäcker Bäcker")
    + _nouns("f", "person",
             "woman women Frau Frauen; mother mothers Mutter Mütter; sister sisters Schwester Schwestern;"
                            "queen queens Königin Königinnen; student students Studentin Studentinnen")
    + _nouns("n", "person", "child children Kind Kinder; girl girls Mädchen Mädchen")
    + _nouns("m", "animal", "dog dogs Hund Hunde; bird birds Vogel Vögel")
    + _nouns("f", "animal", "cat cats Katze Katzen; cow cows Kuh Kühe")
    + _nouns("n", "animal", "horse horses Pferd Pferde")
    + _nouns("m", "place", "garden gardens Garten Gärten; park parks Park Parks")
    + _nouns("f", "place", "city cities Stadt Städte; school schools Schule Schulen; street streets Straße Straßen;"
                           "church churches Kirche Kirchen; kitchen kitchens Küche Küchen")
    + _nouns("n", "place", "house houses Haus Häuser; village villages Dorf Dörfer; hotel hotels Hotel Hotels")
    + _nouns("m", "thing", "table tables Tisch Tische; chair chairs Stuhl Stühle; key keys Schlüssel Schlüssel;"
                           "train trains Zug Züge; hat hats Hut Hüte")
    + _nouns("f", "thing", "door doors Tür Türen; lamp lamps Lampe Lampen; bottle bottles Flasche Flaschen;"
                           "cup cups Tasse Tassen; flower flowers Blume Blumen; bag bags Tasche Taschen")
    + _nouns("n", "thing", "car cars Auto Autos; window windows Fenster Fenster; picture pictures Bild Bilder;"
                           "glass glasses Glas Gläser; boat boats Boot Boote; bed beds Bett Betten")
    + _nouns("m", "food", "apple apples Apfel Äpfel; cake cakes Kuchen Kuchen")
    + _nouns("f", "food", "soup soups Suppe Suppen; pear pears Birne Birnen")
    + _nouns("n", "food", "egg eggs Ei Eier; bread breads Brot Brote")
    + _nouns("m", "text", "letter letters Brief Briefe")
    + _nouns("f", "text", "story stories Geschichte Geschichten; song songs Melodie Melodien")
    + _nouns("n", "text", "book books Buch Bücher; poem poems Gedicht Gedichte")
)

# English adjective -> German stem (endings are added by declension).
ADJECTIVES: dict[str, str] = {
    "big": "groß", "small": "klein", "old": "alt", "young": "jung", "new": "neu", "red": "rot",
    "blue": "blau", "green": "grün", "beautiful": "schön", "good": "gut", "black": "schwarz",
    "white": "weiß", "fast": "schnell", "quiet": "leise", "tired": "müde", "happy": "froh",
}
PREDICATIVE = ("big", "small", "old", "young", "new", "beautiful", "good", "fast", "quiet", "tired", "happy")

NUMBERS = {"two": "zwei", "three": "drei", "four": "vier", "five": "fünf", "six": "sechs",
           "seven": "sieben", "eight": "acht", "nine": "neun", "ten": "zehn", "twelve": "zwölf"}


@dataclass(frozen=True)
class Verb:
    en: tuple            # base, 3sg, past, participle
    de: tuple            # infinitive, 1sg, 3sg, plural, past sg, past pl, participle
    aux: str             # "haben" or "sein" (perfect auxiliary)
    objects: tuple = ()  # noun kinds it takes as direct object; () = intransitive


def _verb(en: str, de: str, aux: str = "haben", objects: str = "") -> Verb:
    return Verb(tuple(en.split()), tuple(de.split()), aux, tuple(objects.split()))


TRANSITIVE = [
    _verb("see sees saw seen", "sehen sehe sieht sehen sah sahen gesehen", objects="person animal thing place"),
    _verb("buy buys bought bought", "kaufen kaufe kauft kaufen kaufte kauften gekauft",
          objects="thing food text animal"),
    _verb("find finds found found", "finden finde findet finden fand fanden gefunden",
          objects="person animal thing text"),
    _verb("need needs needed needed", "brauchen brauche braucht brauchen brauchte brauchten gebraucht",
          objects="person thing food"),
    _verb("love loves loved loved", "lieben liebe liebt lieben liebte liebten geliebt", objects="person animal place"),
    _verb("take takes took taken", "nehmen nehme nimmt nehmen nahm nahmen genommen", objects="thing food text"),
    _verb("carry carries carried carried", "tragen trage trägt tragen trug trugen getragen",
          objects="thing food animal"),
    _verb("visit visits visited visited", "besuchen besuche besucht besuchen besuchte besuchten besucht",
          objects="person place"),
    _verb("sell sells sold sold", "verkaufen verkaufe verkauft verkaufen verkaufte verkauften verkauft",
          objects="thing food animal text"),
    _verb("write writes wrote written", "schreiben schreibe schreibt schreiben schrieb schrieben geschrieben",
          objects="text"),
    _verb("paint paints painted painted", "malen male malt malen malte malten gemalt",
          objects="person animal thing place"),
    _verb("wash washes washed washed", "waschen wasche wäscht waschen wusch wuschen gewaschen", objects="thing animal"),
    _verb("open opens opened opened", "öffnen öffne öffnet öffnen öffnete öffneten geöffnet", objects="thing"),
    _verb("build builds built built", "bauen baue baut bauen baute bauten gebaut", objects="thing place"),
    _verb("hear hears heard heard", "hören höre hört hören hörte hörten gehört", objects="person animal text"),
    _verb("eat eats ate eaten", "essen esse isst essen aß aßen gegessen", objects="food"),
    _verb("call calls called called", "rufen rufe ruft rufen rief riefen gerufen", objects="person animal"),
]
INTRANSITIVE = [
    _verb("sleep sleeps slept slept", "schlafen schlafe schläft schlafen schlief schliefen geschlafen"),
    _verb("work works worked worked", "arbeiten arbeite arbeitet arbeiten arbeitete arbeiteten gearbeitet"),
    _verb("laugh laughs laughed laughed", "lachen lache lacht lachen lachte lachten gelacht"),
    _verb("wait waits waited waited", "warten warte wartet warten wartete warteten gewartet"),
    _verb("sing sings sang sung", "singen singe singt singen sang sangen gesungen"),
    _verb("play plays played played", "spielen spiele spielt spielen spielte spielten gespielt"),
    _verb("dance dances danced danced", "tanzen tanze tanzt tanzen tanzte tanzten getanzt"),
    _verb("come comes came come", "kommen komme kommt kommen kam kamen gekommen", aux="sein"),
    _verb("go goes went gone", "gehen gehe geht gehen ging gingen gegangen", aux="sein"),
    _verb("run runs ran run", "laufen laufe läuft laufen lief liefen gelaufen", aux="sein"),
    _verb("swim swims swam swum", "schwimmen schwimme schwimmt schwimmen schwamm schwammen geschwommen", aux="sein"),
]
# Verbs that take a "that"-clause, and the conjunctions of adverbial clauses.
EMBEDDING = [
    _verb("know knows knew known", "wissen weiß weiß wissen wusste wussten gewusst"),
    _verb("say says said said", "sagen sage sagt sagen sagte sagten gesagt"),
    _verb("think thinks thought thought", "glauben glaube glaubt glauben glaubte glaubten geglaubt"),
    _verb("hope hopes hoped hoped", "hoffen hoffe hofft hoffen hoffte hofften gehofft"),
]
CONJUNCTIONS = {"because": "weil", "although": "obwohl", "while": "während"}

AUX = {  # person -> form: "1sg", "3sg", "pl"
    "haben": {"1sg": "habe", "3sg": "hat", "pl": "haben"},
    "sein": {"1sg": "bin", "3sg": "ist", "pl": "sind"},
    "werden": {"1sg": "werde", "3sg": "wird", "pl": "werden"},
}
BE_EN = {"present": {"1sg": "am", "3sg": "is", "pl": "are"}, "past": {"1sg": "was", "3sg": "was", "pl": "were"}}
BE_DE = {"present": {"1sg": "bin", "3sg": "ist", "pl": "sind"}, "past": {"1sg": "war", "3sg": "war", "pl": "waren"}}

PRONOUNS = [  # English, German, person
    ("I", "ich", "1sg"), ("he", "er", "3sg"), ("she", "sie", "3sg"), ("we", "wir", "pl"), ("they", "sie", "pl"),
]
# Time adverbs and the tenses they go with (so that sentences stay sensible).
TIMES = {"today": ("heute", ("present", "perfect")), "yesterday": ("gestern", ("past", "perfect")),
         "tomorrow": ("morgen", ("future",))}
PREPOSITIONS = {  # English -> (German, case, noun kinds it takes)
    "in": ("in", "dat", ("place",)),
    "with": ("mit", "dat", ("person", "animal")),
    "from": ("von", "dat", ("person", "place")),
    "for": ("für", "acc", ("person", "animal")),
    "without": ("ohne", "acc", ("person", "animal", "thing")),
}
CONTRACTIONS = {("in", "dem"): "im", ("von", "dem"): "vom"}
WH = {"where": "wo", "why": "warum", "when": "wann"}
