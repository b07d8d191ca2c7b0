"""AST similarity between task files: the contamination and near-duplicate screen.

Why: two files are "the same task" when they compute the same thing with the same structure,
whatever their names, sizes and formatting. The score is the smaller of two multiset Dice
coefficients, over k-grams of the normalised AST and over the operators called, so a near-copy
must both look the same and call the same operators (docs/data.md gives the definition).
"""

from __future__ import annotations

import ast
import threading
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

K = 3
_KEEP_NAMES = frozenset({"torch", "nn", "F", "math", "np", "numpy", "self", "Model", "forward", "__init__",
                         "get_inputs", "get_init_inputs", "super", "range", "len", "int", "float", "list",
                         "tuple", "dict", "min", "max", "sum", "abs"})
_RANDOM_MAKERS = frozenset({"rand", "randn", "randint", "rand_like", "randn_like", "randperm", "normal"})
_OP_NODES = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "floordiv",
             ast.Mod: "remainder", ast.Pow: "pow", ast.MatMult: "matmul", ast.USub: "neg",
             ast.BitAnd: "bitwise_and", ast.BitOr: "bitwise_or", ast.BitXor: "bitwise_xor",
             ast.Invert: "bitwise_not", ast.LShift: "lshift", ast.RShift: "rshift"}


@dataclass(frozen=True)
class Fingerprint:
    """Numbered feature sets of one file: structure k-grams and operator names."""

    structure: frozenset[str]
    operators: frozenset[str]


class SimilarityError(ValueError):
    """A source that cannot be fingerprinted (it does not parse)."""


def fingerprint(source: str) -> Fingerprint:
    """The two feature sets of `source` (raises SimilarityError if it does not parse)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise SimilarityError(f"does not parse: {exc.msg} (line {exc.lineno})") from None
    tree = _Normaliser().visit(_strip(tree))
    labels: list[str] = []
    operators: list[str] = []
    _walk(tree, labels, operators)
    grams = ["|".join(labels[i:i + K]) for i in range(max(1, len(labels) - K + 1))]
    return Fingerprint(_numbered(grams), _numbered(operators))


def similarity(a: str | Fingerprint, b: str | Fingerprint) -> float:
    """The similarity of two sources (or fingerprints), in [0, 1]; 1.0 = same task."""
    fa = a if isinstance(a, Fingerprint) else fingerprint(a)
    fb = b if isinstance(b, Fingerprint) else fingerprint(b)
    return min(_dice(fa.structure, fb.structure), _dice(fa.operators, fb.operators))


def _dice(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return 2 * len(a & b) / (len(a) + len(b))


def _numbered(items: Iterable[str]) -> frozenset[str]:
    seen: Counter[str] = Counter()
    out = []
    for item in items:
        out.append(f"{item}#{seen[item]}")
        seen[item] += 1
    return frozenset(out)


# ---- normalisation ------------------------------------------------------------------------
def _strip(tree: ast.Module) -> ast.Module:
    """Drop what does not define the task: imports, docstrings, module constants, __main__."""
    body = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.AugAssign)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, ast.If) and "__main__" in ast.dump(node.test):
            continue
        body.append(node)
    tree.body = body
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            node.body = [s for s in node.body if not _is_docstring(s) and not _is_super_init(s)] or [ast.Pass()]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.body = _inline(node.body)
            node.returns = None
            node.decorator_list = []
            for arg in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs):
                arg.annotation = None
    return tree


def _inline(body: list[ast.stmt]) -> list[ast.stmt]:
    """Fold `x = f(x); x = g(x); return x` into `return g(f(x))`: a value assigned to a name and
    read exactly once, by the next statement, is substituted there. Statement-per-op and
    one-expression styles then compare equal; anything less simple is left alone."""
    body = list(body)
    i = 0
    while i < len(body) - 1:
        stmt, nxt = body[i], body[i + 1]
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and isinstance(nxt, (ast.Assign, ast.Return, ast.Expr))):
            name = stmt.targets[0].id
            loads = [n for n in ast.walk(nxt) if isinstance(n, ast.Name) and n.id == name
                     and isinstance(n.ctx, ast.Load)]
            rebinds = isinstance(nxt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in nxt.targets)
            later = any(isinstance(n, ast.Name) and n.id == name for s in body[i + 2:] for n in ast.walk(s))
            if len(loads) == 1 and (rebinds or not later):
                _Substitute(loads[0], stmt.value).visit(nxt)
                del body[i]
                i = max(0, i - 1)
                continue
        i += 1
    return body


class _Substitute(ast.NodeTransformer):
    def __init__(self, target: ast.Name, value: ast.expr) -> None:
        self.target, self.value = target, value

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return self.value if node is self.target else node


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _is_super_init(stmt: ast.stmt) -> bool:
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    func = stmt.value.func
    return (isinstance(func, ast.Attribute) and func.attr == "__init__" and isinstance(func.value, ast.Call)
            and isinstance(func.value.func, ast.Name) and func.value.func.id == "super")


class _Normaliser(ast.NodeTransformer):
    """Rename names by first appearance within each function (so reusing `x` in two functions
    and using `x` and `t` read the same) and `self.` attributes by first appearance in the
    file; random-tensor makers become one name; numbers become one token."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.attrs: dict[str, str] = {}

    def _name(self, name: str) -> str:
        if name in _KEEP_NAMES:
            return name
        return self.names.setdefault(name, f"v{len(self.names)}")

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self._name(node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg = self._name(node.arg)
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.name = self._name(node.name)
        outer, self.names = self.names, {}
        self.generic_visit(node)
        self.names = outer
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        node.name = self._name(node.name)
        self.generic_visit(node)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            node.attr = self.attrs.setdefault(node.attr, f"a{len(self.attrs)}")
        elif node.attr in _RANDOM_MAKERS:
            node.attr = "rand"
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if isinstance(node.value, (int, float, complex)) and not isinstance(node.value, bool):
            node.value = "<num>"
        return node


def _walk(node: ast.AST, labels: list[str], operators: list[str]) -> None:
    """Pre-order node labels, and the operator names applied along the way."""
    labels.append(_label(node))
    if isinstance(node, ast.Call):
        name = _callee(node.func)
        if name:
            operators.append(name)
    elif isinstance(node, (ast.BinOp, ast.UnaryOp, ast.AugAssign)):
        op = _OP_NODES.get(type(node.op))
        if op:
            operators.append(op)
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Load, ast.Store, ast.Del)):
            continue
        _walk(child, labels, operators)


_LABELLED = {ast.Name: "id", ast.Attribute: "attr", ast.keyword: "arg", ast.FunctionDef: "name",
             ast.ClassDef: "name", ast.arg: "arg"}  # node type -> the field its label carries


def _label(node: ast.AST) -> str:
    kind = type(node).__name__
    if isinstance(node, ast.Constant):
        return f"{kind}:{node.value!r}"[:60]
    field = _LABELLED.get(type(node))
    return f"{kind}:{getattr(node, field)}" if field else kind


def _callee(func: ast.expr) -> str | None:
    """`torch.nn.functional.relu` -> 'relu'; `self.a0` (a module call) -> None."""
    if isinstance(func, ast.Attribute):
        if isinstance(func.value, ast.Name) and func.value.id == "self":
            return None
        return func.attr.lower()
    if isinstance(func, ast.Name):  # a builtin or a helper the task defined
        renamed = func.id.startswith("v") and func.id[1:].isdigit()
        return None if renamed or func.id in _KEEP_NAMES else func.id.lower()
    return None


# ---- screening many files at once -----------------------------------------------------------
@dataclass(frozen=True)
class Match:
    """The most similar reference for one query: its position and the score."""

    score: float
    index: int  # -1 when there is no reference at all


class SimilarityIndex:
    """Fingerprints of reference tasks in an inverted index (feature -> references holding it).
    A query counts hits per reference over its features' posting lists (`numpy.bincount`): no
    pairwise loop. Thread-safe: synthesis workers query and add from several threads."""

    _KINDS = ("structure", "operators")

    def __init__(self) -> None:
        self._vocab: dict[str, dict[str, int]] = {k: {} for k in self._KINDS}
        self._postings: dict[str, list[array[int]]] = {k: [] for k in self._KINDS}  # int32 ref ids
        self._sizes = np.zeros((0, 2), dtype=np.float64)
        self._count = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._count

    def add(self, item: str | Fingerprint) -> int:
        """Add one reference; returns its index."""
        fp = item if isinstance(item, Fingerprint) else fingerprint(item)
        with self._lock:
            ref = self._count
            for kind in self._KINDS:
                vocab, postings = self._vocab[kind], self._postings[kind]
                for feature in getattr(fp, kind):
                    fid = vocab.get(feature)
                    if fid is None:
                        fid = vocab[feature] = len(postings)
                        postings.append(array("i"))
                    postings[fid].append(ref)
            if ref >= len(self._sizes):
                grown = np.zeros((max(64, 2 * len(self._sizes)), 2))
                grown[:ref] = self._sizes[:ref]
                self._sizes = grown
            self._sizes[ref] = (len(fp.structure), len(fp.operators))
            self._count += 1
            return ref

    def extend(self, items: Iterable[str | Fingerprint]) -> None:
        for item in items:
            self.add(item)

    def best(self, item: str | Fingerprint) -> Match:
        """The most similar reference to one query (score 0, index -1 if the index is empty)."""
        fp = item if isinstance(item, Fingerprint) else fingerprint(item)
        with self._lock:
            n = self._count
            if n == 0:
                return Match(0.0, -1)
            score = None
            for j, kind in enumerate(self._KINDS):
                feats = getattr(fp, kind)
                vocab, postings = self._vocab[kind], self._postings[kind]
                lists = [np.frombuffer(postings[vocab[f]], dtype=np.int32) for f in feats if f in vocab]
                hits = np.bincount(np.concatenate(lists), minlength=n)[:n] if lists else np.zeros(n)
                del lists  # a view pins its array (no append while one exists): drop them under the lock
                total = len(feats) + self._sizes[:n, j]
                dice = np.where(total > 0, 2 * hits / np.maximum(total, 1), 1.0)
                score = dice if score is None else np.minimum(score, dice)
            assert score is not None
            i = int(np.argmax(score))
            return Match(float(score[i]), i)

    def best_many(self, items: Sequence[str | Fingerprint]) -> list[Match]:
        """`best` for each query."""
        return [self.best(i) for i in items]

