"""The canonical operator form of a task file: the semantic contamination measure.

Why: AST similarity (similarity.py) sees syntax, so `nn.ReLU()` and `torch.relu(x)` differ. Here
a task is what `forward` computes: its operators in evaluation order, each under one canonical
name whatever its spelling, layout calls, tensor creation and constants dropped; a second view
expands composites into primitives. docs/data.md gives the rules and the three verdicts.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

# Calls that move or view data, make tensors, or read properties: not operators of the task.
LAYOUT = frozenset("""view reshape flatten unflatten contiguous clone detach to float double half bfloat16 type
typeas size dim numel squeeze unsqueeze expand expandas permute transpose t movedim moveaxis swapaxes split chunk
narrow select item cpu cuda identity dropout dropout1d dropout2d dropout3d alphadropout featurealphadropout
requiresgrad viewas reshapeas getitem setitem get len tolist stride storageoffset isfloatingpoint
dataptr element_size elementsize new newzeros newones newempty newfull""".split())
CREATION = frozenset("""zeros ones empty full zeroslike oneslike emptylike fulllike arange linspace logspace tensor
astensor randn rand randint randnlike randlike randintlike randperm eye normal parameter buffer""".split())
ALIASES = {
    "radd": "add", "iadd": "add", "plus": "add", "rsub": "sub", "isub": "sub", "subtract": "sub",
    "rmul": "mul", "imul": "mul", "multiply": "mul", "truediv": "div", "rtruediv": "div", "itruediv": "div",
    "divide": "div", "truedivide": "div", "floordivide": "floordiv", "rfloordiv": "floordiv",
    "rpow": "pow", "ipow": "pow", "square": "pow", "floatpower": "pow", "negative": "neg", "mm": "matmul",
    "bmm": "matmul", "rmatmul": "matmul", "einsum": "matmul", "absolute": "abs", "clip": "clamp",
    "greater": "gt", "less": "lt", "greaterequal": "ge", "lessequal": "le", "notequal": "ne", "expit": "sigmoid",
    "swish": "silu", "newgelu": "gelu", "fastgelu": "gelu", "gelutanh": "gelu", "pytorchgelutanh": "gelu",
    "mingptnewgelu": "gelu", "accurategelu": "gelu", "gemm": "linear", "amax": "max", "amin": "min",
    "vectornorm": "norm", "frobeniusnorm": "norm", "matrixnorm": "norm",
    "crossentropy": "crossentropyloss", "binarycrossentropy": "bceloss",
    "binarycrossentropywithlogits": "bcewithlogitsloss", "kldiv": "kldivloss",
    "scaleddotproductattention": "sdpa", "multiheadattentionforward": "multiheadattention",
    "multilabelsoftmargin": "multilabelsoftmarginloss", "sinc": "sinc", "arccos": "acos", "arcsin": "asin",
    "arctan": "atan", "arctan2": "atan2", "arccosh": "acosh", "arcsinh": "asinh", "arctanh": "atanh",
    "logsoftmax": "logsoftmax", "specialsoftmax": "softmax", "maximum": "max", "minimum": "min",
}
_SUFFIX_RULES = [(re.compile(r".*rmsnorm$"), "rmsnorm"), (re.compile(r".*layernorm$"), "layernorm"),
                 (re.compile(r"^(batch|instance)norm[123]d$"), r"\1norm"), (re.compile(r"^(.+)activation$"), r"\1"),
                 (re.compile(r"^(.+)withindices$"), r"\1")]
# Composites as primitives (the second view). Multisets: order inside a composite is not compared.
EXPANSIONS: dict[str, tuple[str, ...]] = {
    "silu": ("sigmoid", "mul"), "softsign": ("abs", "add", "div"), "rsqrt": ("sqrt", "div"),
    "rmsnorm": ("pow", "mean", "add", "sqrt", "div"), "normalize": ("norm", "div"), "linear": ("matmul", "add"),
    "addmm": ("matmul", "add"), "baddbmm": ("matmul", "add"), "mseloss": ("sub", "pow", "mean"),
    "gelu": ("mul", "pow", "mul", "add", "mul", "tanh", "add", "mul"), "logsigmoid": ("sigmoid", "log"),
    "softmax2d": ("softmax",), "tanhshrink": ("tanh", "sub"), "mish": ("softplus", "tanh", "mul"),
    "multiheadattention": ("linear", "sdpa", "linear"), "hardswish": ("hardsigmoid", "mul"),
    "sigmoid": ("neg", "exp", "add", "div"),  # 1 / (1 + exp(-x)) written out
}
_COMPARE = {ast.Gt: "gt", ast.Lt: "lt", ast.GtE: "ge", ast.LtE: "le", ast.Eq: "eq", ast.NotEq: "ne"}
_BINOP = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "floordiv",
          ast.Mod: "remainder", ast.Pow: "pow", ast.MatMult: "matmul"}
_MAX_DEPTH = 6
_NAMESPACE = re.compile(r"^(special|fft|linalg)_(?=.)")  # runtime names: special_softmax, fft_hfft2


def canonical_name(name: str) -> str | None:
    """One spelling per operator: `torch.nn.functional.leaky_relu`, `nn.LeakyReLU`, `x.leaky_relu_`
    -> 'leakyrelu'; `__radd__` -> 'add'. None for layout, creation and empty names."""
    base = _NAMESPACE.sub("", name.rsplit(".", 1)[-1].strip("_").lower()).replace("_", "")
    if not base:
        return None
    base = ALIASES.get(base, base)
    for pattern, repl in _SUFFIX_RULES:
        if pattern.match(base):
            base = ALIASES.get(pattern.sub(repl, base), pattern.sub(repl, base))
            break
    if base in LAYOUT or base in CREATION:
        return None
    return base


def expand(ops: Iterable[str]) -> tuple[str, ...]:
    """The primitives view: each composite replaced by its expansion (one level, then recursively)."""
    out: list[str] = []
    for op in ops:
        parts = EXPANSIONS.get(op)
        out.extend(expand(parts) if parts and parts != (op,) else (op,))
    return tuple(out)


@dataclass(frozen=True)
class OpForm:
    """What a task computes: canonical operators in evaluation order, and their primitives."""

    ops: tuple[str, ...]
    primitives: tuple[str, ...] = field(default=())

    @classmethod
    def of(cls, ops: Sequence[str]) -> "OpForm":
        return cls(tuple(ops), expand(ops))


def op_form(source: str) -> OpForm:
    """The canonical form of a task file (static: nothing is executed). Raises SyntaxError."""
    tree = ast.parse(source)
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    imported = _imported_ops(tree)
    model = classes.get("Model") or next((c for c in classes.values() if _method(c, "forward")), None)
    if model is None:
        return OpForm.of(())
    ops: list[str] = []
    _Analyser(classes, imported, ops).run_class(model, 0)
    return OpForm.of(ops)


def canonical_form(source: str) -> OpForm | None:
    """`op_form`, or None for source that does not parse."""
    try:
        return op_form(source)
    except SyntaxError:
        return None


class OpSequences:
    """Semantic de-duplication: the first task seen with each canonical operator sequence
    (the same operators in the same order, whatever the names and layout)."""

    def __init__(self) -> None:
        self._first: dict[tuple[str, ...], str] = {}

    def first(self, form: OpForm | None) -> str | None:
        """The task already holding `form`'s sequence, or None (an empty form matches nothing)."""
        return self._first.get(form.ops) if form is not None and form.ops else None

    def add(self, name: str, form: OpForm | None) -> None:
        if form is not None and form.ops:
            self._first.setdefault(form.ops, name)


def _imported_ops(tree: ast.Module) -> set[str]:
    """Names bound by `from torch... import relu` (called bare in forward)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("torch", "transformers"):
            out.update(a.asname or a.name for a in node.names)
    return out


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    return next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


# A module attribute's meaning: an operator name, a helper class, or a container of those.
Spec = tuple[str, object]  # ("op", name) | ("class", ClassDef) | ("list", [Spec]) | ("param", None)


class _Analyser:
    def __init__(self, classes: dict[str, ast.ClassDef], imported: set[str], out: list[str]):
        self.classes, self.imported, self.out = classes, imported, out

    # ---- __init__: what each self.attr is ------------------------------------------------------
    def attrs_of(self, cls: ast.ClassDef) -> dict[str, Spec]:
        attrs: dict[str, Spec] = {}
        init = _method(cls, "__init__")
        if init is None:
            return attrs
        local: dict[str, list[Spec]] = {}
        for node in ast.walk(init):
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.List):
                local[node.targets[0].id] = [s for e in node.value.elts if (s := self.spec(e, local)) is not None]
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr in ("append", "extend") and isinstance(node.func.value, ast.Name)
                  and node.func.value.id in local and node.args):
                spec = self.spec(node.args[0], local)
                if spec is not None:
                    local[node.func.value.id].append(spec)
        for node in ast.walk(init):
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
                            and node.value is not None):
                        spec = self.spec(node.value, local)
                        if spec is not None:
                            attrs[t.attr] = spec
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr == "add_module" and len(node.args) == 2 and isinstance(node.args[0], ast.Constant)):
                spec = self.spec(node.args[1], local)
                if spec is not None:
                    attrs[str(node.args[0].value)] = spec
        return attrs

    def spec(self, node: ast.AST, local: dict[str, list[Spec]]) -> Spec | None:
        if isinstance(node, (ast.List, ast.Tuple)):
            return ("list", [s for e in node.elts if (s := self.spec(e, local)) is not None])
        if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
            inner = self.spec(node.elt, local)
            return ("list", [inner] if inner else [])
        if isinstance(node, ast.Starred):
            return self.spec(node.value, local)
        if isinstance(node, ast.Name) and node.id in local:
            return ("list", local[node.id])
        if not isinstance(node, ast.Call):
            return None
        name = _dotted(node.func) or ""
        short = name.rsplit(".", 1)[-1]
        if short in ("Parameter", "Buffer"):
            return ("param", None)
        if short in ("Sequential", "ModuleList"):
            items: list[Spec] = []
            for a in node.args:
                s = self.spec(a, local)
                if s is not None:
                    items.extend(s[1] if s[0] == "list" else [s])  # type: ignore[arg-type]
            return ("list", items)
        if short in ("ModuleDict", "ParameterList", "ParameterDict"):
            return ("list", [])
        if short in self.classes:
            return ("class", self.classes[short])
        if short[:1].isupper():  # a module class from a library
            return ("op", short)
        return None

    # ---- forward: operators in evaluation order ------------------------------------------------
    def run_class(self, cls: ast.ClassDef, depth: int) -> None:
        forward = _method(cls, "forward")
        if forward is None or depth > _MAX_DEPTH:
            return
        _FunctionWalk(self, cls, self.attrs_of(cls), depth).body(forward.body)

    def emit_spec(self, spec: Spec, depth: int) -> None:
        kind, value = spec
        if kind == "op":
            name = canonical_name(str(value))
            if name:
                self.out.append(name)
        elif kind == "class":
            self.run_class(value, depth + 1)  # type: ignore[arg-type]
        elif kind == "list":
            for s in value:  # type: ignore[union-attr]
                self.emit_spec(s, depth)


class _FunctionWalk:
    """Post-order walk of one function body: arguments before the call that uses them."""

    def __init__(self, an: _Analyser, cls: ast.ClassDef, attrs: dict[str, Spec], depth: int):
        self.an, self.cls, self.attrs, self.depth = an, cls, attrs, depth
        self.loop_vars: dict[str, Spec] = {}

    def body(self, stmts: list[ast.stmt]) -> None:
        for s in stmts:
            self.stmt(s)

    def stmt(self, s: ast.stmt) -> None:
        if isinstance(s, ast.For):
            it = s.iter
            if isinstance(it, ast.Attribute) and _is_self(it.value) and it.attr in self.attrs and isinstance(s.target, ast.Name):
                self.loop_vars[s.target.id] = self.attrs[it.attr]
            elif isinstance(it, ast.Call) and _dotted(it.func) == "enumerate" and it.args:
                inner = it.args[0]
                if (isinstance(inner, ast.Attribute) and _is_self(inner.value) and inner.attr in self.attrs
                        and isinstance(s.target, ast.Tuple) and isinstance(s.target.elts[-1], ast.Name)):
                    self.loop_vars[s.target.elts[-1].id] = self.attrs[inner.attr]
            self.expr(it)
            self.body(s.body)
            self.body(s.orelse)
        elif isinstance(s, (ast.If, ast.While)):
            self.expr(s.test)
            self.body(s.body)
            self.body(s.orelse)
        elif isinstance(s, ast.With):
            self.body(s.body)
        elif isinstance(s, ast.AugAssign):
            self.expr(s.value)
            op = _BINOP.get(type(s.op))
            if op:
                self.an.out.append(op)
        elif isinstance(s, (ast.Assign, ast.AnnAssign, ast.Return, ast.Expr)):
            if s.value is not None:
                self.expr(s.value)

    def expr(self, node: ast.AST | None) -> None:
        if node is None:
            return
        out = self.an.out
        if isinstance(node, ast.Call):
            self.call(node)
        elif isinstance(node, ast.BinOp):
            self.expr(node.left)
            self.expr(node.right)
            if not (_constant_like(node.left) and _constant_like(node.right)):
                op = _BINOP.get(type(node.op))
                if op:
                    out.append(op)
        elif isinstance(node, ast.UnaryOp):
            self.expr(node.operand)
            if isinstance(node.op, ast.USub) and not _constant_like(node.operand):
                out.append("neg")
        elif isinstance(node, ast.Compare):
            self.expr(node.left)
            for c in node.comparators:
                self.expr(c)
            for o in node.ops:
                if type(o) in _COMPARE:
                    out.append(_COMPARE[type(o)])
        elif isinstance(node, (ast.Tuple, ast.List)):
            for e in node.elts:
                self.expr(e)
        elif isinstance(node, ast.Subscript):
            self.expr(node.value)
        elif isinstance(node, ast.IfExp):
            self.expr(node.test)
            self.expr(node.body)
            self.expr(node.orelse)
        elif isinstance(node, ast.Starred):
            self.expr(node.value)

    def call(self, node: ast.Call) -> None:
        func = node.func
        idiom = _idiom(node)
        if idiom is not None:  # walk only the operand the idiom applies to
            self.expr(idiom[1])
            self.an.out.append(idiom[0])
            return
        if isinstance(func, ast.Attribute) and _dotted(func.value) is None:
            self.expr(func.value)  # (a + b).relu(), f(x).g(): the receiver first
        for a in node.args:
            self.expr(a)
        for k in node.keywords:
            self.expr(k.value)
        if isinstance(func, ast.Call):  # nn.ReLU()(x): a module built and called inline
            spec = self.an.spec(func, {})
            if spec is not None:
                self.an.emit_spec(spec, self.depth)
            return
        # self.attr(...), self.attr[i](...), a loop variable over a module list, self.method(...)
        target = func.value if isinstance(func, ast.Subscript) else func
        if isinstance(target, ast.Attribute) and _is_self(target.value):
            if target.attr in self.attrs:
                self.an.emit_spec(self.attrs[target.attr], self.depth)
                return
            method = _method(self.cls, target.attr)
            if method is not None and self.depth < _MAX_DEPTH:
                _FunctionWalk(self.an, self.cls, self.attrs, self.depth + 1).body(method.body)
                return
            return
        if isinstance(func, ast.Name):
            if func.id in self.loop_vars:
                self.an.emit_spec(self.loop_vars[func.id], self.depth)
            elif func.id in self.an.imported:
                name = canonical_name(func.id)
                if name:
                    self.an.out.append(name)
            elif func.id in self.an.classes:
                self.an.run_class(self.an.classes[func.id], self.depth + 1)
            return  # builtins (len, int, range, max of Python numbers ...) and local helpers
        dotted = _dotted(func) or (func.attr if isinstance(func, ast.Attribute) else "")
        if dotted.split(".")[0] == "math" or dotted.endswith(".Parameter"):
            return
        name = canonical_name(dotted)
        if name:
            self.an.out.append(name)


def _is_self(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def _constant_like(node: ast.AST) -> bool:
    """A Python number (or math of numbers): arithmetic on it alone is no tensor operator."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp):
        return _constant_like(node.operand)
    if isinstance(node, ast.BinOp):
        return _constant_like(node.left) and _constant_like(node.right)
    if isinstance(node, ast.Call):
        return (_dotted(node.func) or "").split(".")[0] == "math" and all(_constant_like(a) for a in node.args)
    if isinstance(node, ast.Attribute):
        return (_dotted(node) or "").split(".")[0] == "math"
    return False


def _zero(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value == 0 and not isinstance(node.value, bool)


def _zeros(node: ast.AST | None) -> bool:
    """A zero constant or a tensor of zeros (`torch.zeros_like(x)`, `x.new_zeros(...)`)."""
    if _zero(node):
        return True
    if isinstance(node, ast.Call):
        name = (_dotted(node.func) or (node.func.attr if isinstance(node.func, ast.Attribute) else ""))
        return name.rsplit(".", 1)[-1] in ("zeros_like", "zeros", "new_zeros")
    return False


def _idiom(node: ast.Call) -> tuple[str, ast.AST] | None:
    """Spellings of one operator through another: clamp(x, min=0) / clamp_min(x, 0) / maximum(x, 0)
    / maximum(x, zeros_like(x)) / threshold(x, 0, 0) / where(x > 0, x, 0) -> 'relu'; where(x > 0, x, x * a) -> 'leakyrelu'.
    Returns (operator, the operand it applies to) or None."""
    name = (_dotted(node.func) or (node.func.attr if isinstance(node.func, ast.Attribute) else "")).rsplit(".", 1)[-1]
    base = name.strip("_").lower()
    kw = {k.arg: k.value for k in node.keywords}
    method = isinstance(node.func, ast.Attribute) and not (_dotted(node.func.value) or "").startswith(("torch", "F", "nn"))
    args = node.args if method else node.args[1:]
    operand = node.func.value if method else (node.args[0] if node.args else None)  # type: ignore[union-attr]
    if base == "where" and len(node.args) == 3 and isinstance(node.args[0], ast.Compare):
        other = node.args[2]
        if _zero(other):
            return "relu", node.args[1]
        if isinstance(other, ast.BinOp) and isinstance(other.op, ast.Mult):
            return "leakyrelu", node.args[1]
    found = _idiom_name(base, args, kw, node)
    return (found, operand) if found and operand is not None else None


def _idiom_name(base: str, args: list[ast.expr], kw: dict[str | None, ast.expr], node: ast.Call) -> str | None:
    if base in ("clamp", "clip"):
        low = kw.get("min", args[0] if args else None)
        high = kw.get("max", args[1] if len(args) > 1 else None)
        if _zero(low) and (high is None or (isinstance(high, ast.Constant) and high.value is None)):
            return "relu"
    if base in ("clamp_min", "maximum") and len(args) == 1 and _zeros(args[0]):
        return "relu"
    if base == "max" and len(args) == 1 and isinstance(args[0], ast.Call) and _zeros(args[0]):
        return "relu"  # torch.max(x, zeros_like(x)); torch.max(x, 0) is a reduction over axis 0
    if base == "threshold" and len(args) >= 2 and _zero(args[0]) and _zero(args[1]):
        return "relu"
    return None


# ---- comparing against an evaluation set --------------------------------------------------------
SAME_OPS, SAME_PRIMITIVES, EVAL_COMPOSITION = "same_ops", "same_primitives", "eval_composition"
VERDICTS = (SAME_OPS, SAME_PRIMITIVES, EVAL_COMPOSITION)
# The screen's default everywhere (synthesis, audit, set-report, `data similarity`): measured in
# docs/data.md, "Choosing the verdicts".
DEFAULT_VERDICTS = VERDICTS


@dataclass(frozen=True)
class Nearest:
    """The evaluation task closest to one query, and whether the query is equivalent to one."""

    name: str
    score: float  # max of the multiset Dice over ops and over primitives; 1.0 = same multiset
    order: float  # longest common subsequence of the op sequences / the longer one
    verdict: str = ""  # one of VERDICTS, or "" when not equivalent
    detail: str = ""
    matched: tuple[str, ...] = ()  # the evaluation tasks the verdict names (several for eval_composition)

    def as_dict(self) -> dict[str, object]:
        return {"nearest_eval": self.name, "eval_score": round(self.score, 4), "eval_order": round(self.order, 4),
                "eval_verdict": self.verdict, "eval_detail": self.detail, "eval_matched": list(self.matched)}


class ContaminationIndex:
    """Canonical forms of evaluation tasks; `check(form)` gives the nearest and the verdict.
    Exact matches are dictionary look-ups; the nearest, a scan of the few hundred forms."""

    def __init__(self, verdicts: Iterable[str] = DEFAULT_VERDICTS) -> None:
        self.names: list[str] = []
        self.forms: list[OpForm] = []
        self._counts: list[tuple[Counter[str], Counter[str]]] = []
        self._by_ops: dict[tuple[str, ...], int] = {}
        self._by_primitives: dict[tuple[str, ...], int] = {}
        self.verdicts = frozenset(verdicts)
        unknown = self.verdicts - set(VERDICTS)
        if unknown:
            raise ValueError(f"unknown contamination verdicts {sorted(unknown)}; known: {VERDICTS}")

    def __len__(self) -> int:
        return len(self.names)

    def add(self, name: str, form: OpForm) -> None:
        if not form.ops:
            return  # nothing to match (a task of layout calls only)
        i = len(self.names)
        self.names.append(name)
        self.forms.append(form)
        self._counts.append((Counter(form.ops), Counter(form.primitives)))
        self._by_ops.setdefault(tuple(sorted(form.ops)), i)
        self._by_primitives.setdefault(tuple(sorted(form.primitives)), i)

    def check(self, form: OpForm) -> Nearest:
        if not self.names:
            return Nearest("", 0.0, 0.0)
        qo, qp = Counter(form.ops), Counter(form.primitives)
        best, best_key = 0, (-1.0, -1.0)
        for i, (co, cp) in enumerate(self._counts):
            key = (max(_dice(qo, co), _dice(qp, cp)), _order(form.ops, self.forms[i].ops))
            if key > best_key:
                best, best_key = i, key
        nearest = Nearest(self.names[best], best_key[0], best_key[1])
        if not form.ops:
            return nearest
        hit = self._by_ops.get(tuple(sorted(form.ops)))
        if hit is not None and SAME_OPS in self.verdicts:
            return Nearest(self.names[hit], 1.0, _order(form.ops, self.forms[hit].ops), SAME_OPS,
                           f"operators {_show(form.ops)} = {self.names[hit]}", (self.names[hit],))
        hit = self._by_primitives.get(tuple(sorted(form.primitives)))
        if hit is not None and SAME_PRIMITIVES in self.verdicts:
            return Nearest(self.names[hit], 1.0, _order(form.ops, self.forms[hit].ops), SAME_PRIMITIVES,
                           f"primitives of {_show(form.ops)} = those of {self.names[hit]} ({_show(self.forms[hit].ops)})",
                           (self.names[hit],))
        if len(form.ops) >= 2 and EVAL_COMPOSITION in self.verdicts:
            parts = [self._by_primitives.get(tuple(sorted(expand([op])))) for op in form.ops]
            if all(p is not None for p in parts):
                names = [self.names[p] for p in parts if p is not None]
                return Nearest(nearest.name, nearest.score, nearest.order, EVAL_COMPOSITION,
                               "each operator is an evaluation task: " + " + ".join(names), tuple(dict.fromkeys(names)))
        return nearest


def _dice(a: Counter[str], b: Counter[str]) -> float:
    total = sum(a.values()) + sum(b.values())
    return 2 * sum((a & b).values()) / total if total else 0.0


def _order(a: Sequence[str], b: Sequence[str]) -> float:
    """Longest common subsequence / the longer length: 1.0 = same operators in the same order."""
    if not a or not b:
        return 0.0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1] / max(len(a), len(b))


def _show(ops: Sequence[str]) -> str:
    return " -> ".join(ops[:12]) + (" ..." if len(ops) > 12 else "")
