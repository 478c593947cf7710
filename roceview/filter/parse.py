"""Wireshark display-filter syntax -> a small syntax tree (no field knowledge here).

    expr    := xor (("or" | "||") xor)*
    xor     := and (("xor" | "^^") and)*
    and     := unary (("and" | "&&") unary)*
    unary   := ("not" | "!") unary | "(" expr ")" | test
    test    := FIELD [op value | ["not"] "in" "{" item ("," item)* "}"]
    item    := value [".." value]

The grammar and operator spellings are Wireshark's (wireshark-filter(4), Wireshark 4.0): `==`
any_eq, `!=` all_ne (true only where the field is present), `===` all_eq, `!==` / `~=` any_ne, and the
English forms. Positions are 1-based character columns, as the error messages show them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from roceview.errors import BadInput


class FilterError(BadInput):
    """A display filter that cannot be compiled; `str()` is the one line the CLI prints: a
    control character of the filter (a newline, ESC, U+2028) is shown escaped, never sent to
    the terminal, where it would break the line or the screen."""

    def __init__(self, message: str, column: int | None = None, hint: str | None = None):
        text = "filter: " + message + (f" at column {column}" if column is not None else "")
        super().__init__(printable(text + (f" ({hint})" if hint else "")))
        self.column = column


SHOWN = 40                      # characters of a long literal or name an error message quotes


def printable(text: str) -> str:
    """`text` with each non-printable character as its Python escape (\\n, \\x1b, \\u2028)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def quote(text: str) -> str:
    """`"text"` for a message, cut to its first SHOWN characters (and its length) when longer:
    a 100,000-digit literal is named, not printed."""
    if len(text) > SHOWN:
        text = f"{text[:SHOWN]}...({len(text)} characters)"
    return f'"{text}"'


COMPARE = {"==": "==", "eq": "==", "any_eq": "==", "!=": "!=", "ne": "!=", "all_ne": "!=",
           "===": "===", "all_eq": "===", "!==": "!==", "~=": "!==", "any_ne": "!==",
           "<": "<", "lt": "<", "<=": "<=", "le": "<=", ">": ">", "gt": ">", ">=": ">=", "ge": ">="}
LOGIC = {"and": "and", "&&": "and", "or": "or", "||": "or", "xor": "xor", "^^": "xor", "not": "not", "!": "not"}
MAX_DEPTH = 64                  # Python's recursion limit, not Wireshark's (which has none)
UNSUPPORTED = ("contains", "matches", "~", "&", "[")

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<op>===|!==|==|!=|~=|<=|>=|&&|\|\||\^\^|[<>!(){},~&\[]|\.\.)
  | (?P<word>(?:[A-Za-z0-9_:/\-]|\.(?!\.))+)
""", re.VERBOSE)


@dataclass(frozen=True)
class Token:
    kind: str        # "string", "op", "word", "end"
    text: str
    column: int


@dataclass(frozen=True)
class Value:
    text: str
    quoted: bool
    column: int


@dataclass(frozen=True)
class Node:
    """op: "or"/"and"/"xor"/"not" (args: Nodes), "has" (field), a comparison (field, value),
    "in" (field, items: tuples (Value, Value | None)), "not in"."""
    op: str
    args: tuple = ()
    field: str = ""
    column: int = 0
    value: Value | None = None
    items: tuple = ()


def tokenize(text: str) -> list[Token]:
    tokens, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            hint = 'did you mean "=="?' if text[pos] == "=" else None
            raise FilterError(f"unexpected character {quote(text[pos])}", pos + 1, hint)
        if m.lastgroup != "space":
            tokens.append(Token(m.lastgroup, m.group(), pos + 1))
        pos = m.end()
    tokens.append(Token("end", "", len(text) + 1))
    return tokens


class _Parser:
    def __init__(self, text: str):
        self.tokens = tokenize(text)
        self.i = 0
        self.depth = 0

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def take(self) -> Token:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def logic(self, *names: str) -> bool:
        t = self.tok
        return t.kind in ("op", "word") and LOGIC.get(t.text.lower() if t.kind == "word" else t.text) in names

    def binary(self, op: str, sub) -> Node:
        args = [sub()]
        while self.logic(op):
            self.take()
            args.append(sub())
        return args[0] if len(args) == 1 else Node(op, tuple(args))

    def expr(self) -> Node:
        return self.binary("or", lambda: self.binary("xor", lambda: self.binary("and", self.unary)))

    def unary(self) -> Node:
        t = self.tok
        if self.logic("not") or t.text == "(" and t.kind == "op":
            self.depth += 1             # the parser and the compiled filter recurse per level
            if self.depth > MAX_DEPTH:
                raise FilterError(f"more than {MAX_DEPTH} nested parentheses or negations", t.column)
        if self.logic("not"):
            self.take()
            inner = self.unary()
            self.depth -= 1
            return Node("not", (inner,))
        if t.text == "(" and t.kind == "op":
            self.take()
            inner = self.expr()
            self.depth -= 1
            if self.tok.text != ")":
                raise FilterError(f'expected ")" (to close the "(" at column {t.column}), found {_show(self.tok)}',
                                  self.tok.column)
            self.take()
            return inner
        return self.test()

    def test(self) -> Node:
        t = self.take()
        if t.kind != "word" or t.text.lower() in LOGIC or t.text.lower() == "in":
            raise FilterError(f"expected a field name, found {_show(t)}", t.column)
        nxt = self.tok
        word = nxt.text.lower() if nxt.kind == "word" else nxt.text
        if word in COMPARE and nxt.kind in ("op", "word"):
            self.take()
            return Node(COMPARE[word], field=t.text, column=t.column, value=self.value(nxt))
        if word == "in" or word == "not" and self.tokens[self.i + 1].text.lower() == "in":
            negate = word == "not"
            self.i += 2 if negate else 1
            return Node("not in" if negate else "in", field=t.text, column=t.column, items=self.members())
        if word in UNSUPPORTED:
            raise FilterError(f'{quote(nxt.text)} is not supported (comparisons, "in" and presence are)', nxt.column)
        return Node("has", field=t.text, column=t.column)

    def value(self, after: Token) -> Value:
        t = self.take()
        if t.kind == "string":
            return Value(_unquote(t.text), True, t.column)
        if t.kind == "word" and t.text.lower() not in LOGIC:
            return Value(t.text, False, t.column)
        raise FilterError(f"expected a value after {quote(after.text)}, found {_show(t)}", t.column)

    def members(self) -> tuple:
        start = self.take()
        if start.text != "{":
            raise FilterError(f'expected "{{" after "in", found {_show(start)}', start.column)
        items = []
        while True:
            low = self.value(start if not items else self.tokens[self.i - 1])
            high = None
            if self.tok.text == "..":
                dots = self.take()
                high = self.value(dots)
            items.append((low, high))
            t = self.take()
            if t.text == "}":
                return tuple(items)
            if t.text != ",":
                raise FilterError(f'expected "," or "}}" in the set opened at column {start.column}, found {_show(t)}',
                                  t.column)


def _show(t: Token) -> str:
    return "the end of the filter" if t.kind == "end" else quote(t.text)


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text[1:-1])


def parse(text: str) -> Node:
    p = _Parser(text)
    if p.tok.kind == "end":
        raise FilterError("empty filter", 1)
    tree = p.expr()
    if p.tok.kind != "end":
        raise FilterError(f"unexpected {_show(p.tok)} (expected and/or or the end of the filter)", p.tok.column)
    return tree
