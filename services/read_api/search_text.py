"""Search over statements in Python, for a listing as of a past point of the log: the database's full-text
index holds the statements as they are now, so a past listing searches the pages folded as of then, read by
the rules of the database's own search.

The same as the database's search: the query is read by one function (``search_terms``, which also writes
SQLite's FTS5 expression): every word, "a phrase", -excluded, ``or`` between alternatives; only statements
are searched; words are lowercased and stemmed as the database does it. SQLite (FTS5, ``porter unicode61
remove_diacritics 2``): diacritics removed, Snowball's ``porter`` stemmer, words under three letters kept
as they are. PostgreSQL (``english``): Snowball's ``english`` stemmer, its stop words left out (their places
kept, so a phrase spans them as ``<2>`` does), a query of stop words only matching nothing.

Where it differs: a statement is split at every character that is not a letter or a digit (as FTS5's
unicode61 splits); PostgreSQL's parser also keeps a hyphenated word whole beside its parts, and a number with
a point, an e-mail or an address as one lexeme, which a query in Python matches as the phrase of its parts.
Relevance is BM25 on both databases, as SQLite's ``bm25()`` computes it (k1 1.2, b 0.75, each phrase's IDF
over every claim drafted by then); PostgreSQL's present search ranks by ``ts_rank`` instead.
"""

from __future__ import annotations

import math
import re
import unicodedata
from array import array
from collections import Counter, OrderedDict, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache

import snowballstemmer
from snowballstemmer.basestemmer import BaseStemmer

TERM = re.compile(r'(-?)(?:"([^"]*)"?|(\S+))')
WORD = re.compile(r"\w+")
TOKEN = re.compile(r"[^\W_]+")  # a letter or digit: the underscore that \w keeps separates, as in unicode61
K1, B = 1.2, 0.75  # FTS5's bm25() defaults
KNOWN = 1 << 16  # words whose terms are kept
KEEP = 4  # points of the log whose statement index is kept (as many as their summaries)

# PostgreSQL's english.stop (the Snowball English stop words), which its ``english`` configuration leaves out.
ENGLISH_STOP_LIST = """
i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers herself
it its itself they them their theirs themselves what which who whom this that these those am is are was were be
been being have has had having do does did doing a an the and but if or because as until while of at by for with
about against between into through during before after above below to from up down in out on off over under
again further then once here there when where why how all any both each few more most other some such no nor not
only own same so than too very s t can will just don should now
"""
ENGLISH_STOP_WORDS = frozenset(ENGLISH_STOP_LIST.split())

Alternative = tuple[list[list[str]], list[list[str]]]  # wanted phrases, excluded phrases; each phrase its words
Phrase = tuple[tuple[int, str], ...]  # each stemmed word and its place from the phrase's first


def search_terms(q: str) -> list[Alternative]:
    """A web-search query read as PostgreSQL's websearch_to_tsquery reads it: alternatives (``or`` between
    them), each with the phrases it wants and those it excludes; an alternative that wants nothing is left out."""
    alternatives: list[Alternative] = [([], [])]
    for negated, quoted, bare in TERM.findall(q):
        if bare.lower() == "or" and not negated:
            alternatives.append(([], []))
            continue
        if words := WORD.findall(quoted or bare):
            alternatives[-1][bool(negated)].append(words)
    return [alternative for alternative in alternatives if alternative[0]]


@dataclass(frozen=True)
class Rules:
    """How a database's search reads text into terms."""

    stemmer: str
    stop_words: frozenset[str] = frozenset()
    fold_diacritics: bool = False
    shortest_stemmed: int = 1  # shorter words are kept as they are
    # Each word read once, however many statements hold it (emptied when it holds KNOWN words).
    known: dict[str, str | None] = field(default_factory=dict, compare=False, repr=False)

    def term(self, word: str) -> str | None:
        """One lowercased word as these rules index it: None for a stop word."""
        if self.fold_diacritics and not word.isascii():
            word = "".join(char for char in unicodedata.normalize("NFD", word) if not unicodedata.combining(char))
        if word in self.stop_words:
            return None
        return word if len(word) < self.shortest_stemmed else _stemmer(self.stemmer).stemWord(word)


RULES = {
    "sqlite": Rules("porter", fold_diacritics=True, shortest_stemmed=3),
    "postgresql": Rules("english", stop_words=ENGLISH_STOP_WORDS),
}


_UNKNOWN = object()


def terms(text: str, rules: Rules) -> list[str | None]:
    """The text's words, lowercased and stemmed by ``rules``, in order; None in the place of a stop word."""
    if not text.isascii():
        text = unicodedata.normalize("NFC", text)
    known = rules.known
    if len(known) > KNOWN:
        known.clear()
    found = []
    for word in TOKEN.findall(text.lower()):
        term = known.get(word, _UNKNOWN)
        if term is _UNKNOWN:
            term = known[word] = rules.term(word)
        found.append(term)
    return found


@cache
def _stemmer(algorithm: str) -> BaseStemmer:
    return snowballstemmer.stemmer(algorithm)


class StatementIndex:
    """The statements of every claim at one point of the log, read into terms once, for ``scores``: each
    statement's terms in order, and for each term the statements that hold it, once per occurrence (4 bytes
    each, so the index stays a small part of the summaries it is built from)."""

    def __init__(self, statements: Iterable[tuple[str, str]], rules: Rules) -> None:
        self._rules = rules
        self._claims: list[str] = []
        self._terms: list[tuple[str | None, ...]] = []
        self._postings: defaultdict[str, array] = defaultdict(lambda: array("I"))  # term -> statement numbers
        for number, (claim_id, statement) in enumerate(statements):
            words = tuple(terms(statement, rules))
            self._claims.append(claim_id)
            self._terms.append(words)
            for term in words:
                if term is not None:
                    self._postings[term].append(number)
        self._average = sum(map(len, self._terms)) / len(self._terms) if self._terms else 0.0

    def scores(self, q: str) -> dict[str, float]:
        """The claims whose statement matches ``q``, each with its relevance (BM25, larger is better)."""
        found: dict[Phrase, Counter[int]] = {}
        alternatives = [([self._phrase(p) for p in wanted], [self._phrase(p) for p in unwanted])
                        for wanted, unwanted in search_terms(q)]
        matched: set[int] = set()
        for wanted, unwanted in alternatives:
            wanted, unwanted = [p for p in wanted if p], [p for p in unwanted if p]  # stop words only: left out
            if not wanted:
                continue
            numbers = set.intersection(*(set(self._hits(p, found)) for p in wanted))
            matched |= numbers.difference(*(self._hits(p, found) for p in unwanted))
        phrases = [p for wanted, unwanted in alternatives for p in wanted + unwanted if p]
        return {self._claims[number]: self._bm25(number, phrases, found) for number in matched}

    def _phrase(self, words: list[str]) -> Phrase:
        """A query phrase's terms and their places, stop words at either end dropped."""
        placed = [(place, term) for place, term in enumerate(terms(" ".join(words), self._rules)) if term is not None]
        return tuple((place - placed[0][0], term) for place, term in placed)

    def _hits(self, phrase: Phrase, found: dict[Phrase, Counter[int]]) -> Counter[int]:
        """How many times each statement holds the phrase (statements without it left out)."""
        if phrase not in found:
            if len(phrase) == 1:
                found[phrase] = Counter(self._postings.get(phrase[0][1], ()))
            else:
                found[phrase] = self._phrase_hits(phrase)
        return found[phrase]

    def _phrase_hits(self, phrase: Phrase) -> Counter[int]:
        """A phrase's occurrences, looked for in the statements that hold all its terms."""
        postings = sorted((self._postings.get(term, array("I")) for _, term in phrase), key=len)
        (_, first), rest = phrase[0], phrase[1:]
        hits: Counter[int] = Counter()
        for number in set(postings[0]).intersection(*postings[1:]):
            words, start = self._terms[number], -1
            end = len(words) - phrase[-1][0]  # the phrase starts before this
            while (start := _find(words, first, start + 1, end)) >= 0:
                if all(words[start + offset] == term for offset, term in rest):
                    hits[number] += 1
        return hits

    def _bm25(self, number: int, phrases: list[Phrase], found: dict[Phrase, Counter[int]]) -> float:
        """FTS5's bm25() of one statement, with the opposite sign (larger is better)."""
        statements, score = len(self._terms), 0.0
        norm = K1 * (1 - B + B * len(self._terms[number]) / self._average)
        for phrase in phrases:
            hits = self._hits(phrase, found)
            idf = max(math.log((statements - len(hits) + 0.5) / (len(hits) + 0.5)), 1e-6)
            frequency = hits.get(number, 0)
            score += idf * frequency * (K1 + 1) / (frequency + norm)
        return score


def _find(words: tuple[str | None, ...], term: str, start: int, end: int) -> int:
    """The first place of ``term`` in ``words[start:end]``, or -1."""
    try:
        return words.index(term, start, end)
    except ValueError:
        return -1


class StatementIndexes:
    """The statement index of the last few points of the log searched, each built once from the summaries
    folded for that point (the past does not change, so a point's index stays right)."""

    def __init__(self, *, keep: int = KEEP) -> None:
        self._keep = keep
        self._kept: OrderedDict[tuple[int, str], StatementIndex] = OrderedDict()

    def at(self, seq: int, dialect: str, rows: list[dict]) -> StatementIndex:
        """The index of ``rows`` (every claim's summary as of ``seq``), read by the rules of ``dialect``."""
        key = (seq, dialect)
        if key not in self._kept:
            self._kept[key] = StatementIndex(((row["claim_id"], row["statement"]) for row in rows), RULES[dialect])
            while len(self._kept) > self._keep:
                self._kept.popitem(last=False)
        self._kept.move_to_end(key)
        return self._kept[key]
