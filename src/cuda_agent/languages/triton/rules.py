"""The static allowlist for Triton kernels (`kernels/*.py`), read with `ast`.

A file may hold imports, constants, `@triton.jit` kernels (device code) and plain functions
(host code: the launchers `model_new.py` calls through `triton_extension.<name>`). What each may
do, and the rule anything else is: docs/languages.md ("The Triton allowlist, exactly").
"""

from __future__ import annotations

import ast
from pathlib import Path

from ..records import Finding, python_findings

_IMPORTS = frozenset("triton triton.language triton.language.extra triton.language.extra.libdevice "
                     "triton.language.extra.cuda triton.language.extra.cuda.libdevice torch math typing "
                     "__future__".split())
_TORCH_ALLOC = frozenset("empty empty_like empty_strided zeros zeros_like ones ones_like full full_like".split())
_TORCH_NAMES = frozenset("Tensor Size dtype float32 float16 bfloat16 float64 half float double int8 int16 int32 "
                         "int64 uint8 bool long int float8_e4m3fn float8_e5m2 complex64".split())
_STREAMY = frozenset("Stream cuda stream set_stream ExternalStream StreamContext".split())
_SHAPE_ATTRS = frozenset("shape dtype device ndim is_cuda".split())
_SCALAR_METHODS = frozenset("size stride numel dim element_size is_contiguous storage_offset data_ptr "
                            "get_device".split())
_VIEW_METHODS = frozenset("view view_as contiguous reshape flatten unsqueeze squeeze permute transpose expand "
                          "new_empty new_zeros".split())
_HOST_BUILTINS = frozenset("len range min max int float bool tuple list isinstance enumerate zip str print "
                           "ValueError RuntimeError TypeError AssertionError NotImplementedError None True "
                           "False".split())
_DEVICE_BUILTINS = frozenset("range min max len int float bool isinstance tuple print None True False".split())
_DYNAMIC = frozenset("getattr setattr delattr eval exec compile __import__ globals locals vars type object "
                     "breakpoint exit quit memoryview".split())
_SCALAR_ANNOTATIONS = frozenset("int float bool str".split())


def check_triton_file(text: str, filename: str, siblings: frozenset[str] = frozenset()) -> list[Finding]:
    """Findings for one kernels/*.py file; `siblings` are the other files' module names."""
    return python_findings(text, filename, lambda tree: _TritonChecker(tree, filename, siblings).run())


def check_triton_workspace(root: Path) -> list[Finding]:
    """Every kernels/*.py file (and nothing else runnable in kernels/)."""
    kdir = Path(root) / "kernels"
    files = sorted(p for p in kdir.iterdir()) if kdir.is_dir() else []
    found: list[Finding] = []
    siblings = frozenset(p.stem for p in files if p.suffix == ".py")
    for p in files:
        rel = p.relative_to(root).as_posix()
        if p.is_symlink() or not p.is_file():
            found.append(Finding(file=rel, line=1, rule="file-outside-workspace",
                                 message=f"{p.name} is a link or a directory: kernels/ holds plain .py files"))
        elif p.suffix == ".py":
            found += check_triton_file(p.read_text(errors="replace"), rel, siblings)
        elif p.suffix in {".so", ".pyc", ".cu", ".cpp", ".c", ".ptx", ".cubin"}:
            found.append(Finding(file=rel, line=1, rule="forbidden-import",
                                 message=f"{p.name}: a Triton workspace's kernels/ holds Python files only"))
    return found


class _TritonChecker:
    def __init__(self, tree: ast.Module, filename: str, siblings: frozenset[str]) -> None:
        self.tree, self.file, self.siblings = tree, filename, siblings
        self.found: list[Finding] = []
        self.aliases: dict[str, str] = {}  # local name -> dotted module or "sibling"
        self.jit: set[str] = set()
        self.host: set[str] = set()
        self.constants: set[str] = set()

    def add(self, node: ast.AST, rule: str, message: str) -> None:
        self.found.append(Finding(file=self.file, line=getattr(node, "lineno", 1), rule=rule, message=message))

    def run(self) -> list[Finding]:
        for node in self.tree.body:
            self.module_statement(node)
        for node in self.tree.body:
            if isinstance(node, ast.FunctionDef):
                if node.name in self.jit:
                    _Device(self, node).check()
                else:
                    _Host(self, node).check_function()
        return self.found

    # ---- module level -------------------------------------------------------------------
    def module_statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name not in _IMPORTS:
                    self.add(node, "forbidden-import", f"import {a.name}: Triton kernels may import triton, "
                                                       "triton.language, libdevice, torch and math only")
                self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if node.level != 1 or (node.module or "") not in self.siblings:
                    self.add(node, "forbidden-import", "relative imports may name sibling kernels/ files only")
                for a in node.names:
                    self.aliases[a.asname or a.name] = "sibling"
                    self.host.add(a.asname or a.name)
                return
            mod = node.module or ""
            for a in node.names:
                full = f"{mod}.{a.name}"
                if a.name == "*":
                    self.add(node, "forbidden-import", f"from {mod} import *")
                elif full in _IMPORTS or mod in ("typing", "__future__"):
                    self.aliases[a.asname or a.name] = full
                elif mod == "torch" and a.name in _TORCH_ALLOC | _TORCH_NAMES:
                    self.aliases[a.asname or a.name] = full
                elif mod == "triton" and a.name in ("jit", "autotune", "heuristics", "Config", "cdiv",
                                                    "next_power_of_2"):
                    self.aliases[a.asname or a.name] = full
                else:
                    self.add(node, "forbidden-import", f"from {mod} import {a.name} is outside the allow-list")
        elif isinstance(node, ast.FunctionDef):
            kinds = [self.decorator(d) for d in node.decorator_list]
            if "jit" in kinds:
                self.jit.add(node.name)
            else:
                self.host.add(node.name)
                if kinds:
                    self.add(node, "decorator", f"{node.name}: host functions take no decorators")
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            value = node.value
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if value is None or not all(isinstance(t, ast.Name) for t in targets):
                self.add(node, "module-body", "module-level assignments bind plain names to constants")
                return
            if not self.constant(value):
                rule = "mutable-state" if isinstance(value, (ast.List, ast.Dict, ast.Set, ast.Call)) else "module-body"
                self.add(node, rule, "module-level values are constants (numbers, strings, tuples, tl.constexpr, "
                                     "torch dtypes, lists of triton.Config): nothing that can hold state")
            self.constants.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return
        else:
            self.add(node, "module-body", f"{type(node).__name__} at module level: a kernels/ file holds imports, "
                                          "constants, @triton.jit kernels and launcher functions only")

    def dotted(self, e: ast.AST) -> str | None:
        parts = []
        while isinstance(e, ast.Attribute):
            parts.append(e.attr)
            e = e.value
        if not isinstance(e, ast.Name):
            return None
        root = self.aliases.get(e.id, e.id)
        return ".".join([root, *reversed(parts)])

    def constant(self, e: ast.AST) -> bool:
        if isinstance(e, ast.Constant):
            return True
        if isinstance(e, ast.Tuple):
            return all(self.constant(x) for x in e.elts)
        if isinstance(e, ast.UnaryOp):
            return self.constant(e.operand)
        if isinstance(e, ast.BinOp):
            return self.constant(e.left) and self.constant(e.right)
        d = self.dotted(e)
        if d is not None and d.startswith("torch.") and d[6:] in _TORCH_NAMES:
            return True
        if isinstance(e, ast.Name) and e.id in self.constants:
            return True
        if isinstance(e, ast.Call):
            f = self.dotted(e.func)
            if f in ("triton.language.constexpr", "triton.Config"):
                return all(self.constant(a) or isinstance(a, ast.Dict) and all(
                    self.constant(v) for v in a.values) for a in e.args) and all(
                    self.constant(k.value) for k in e.keywords)
        if isinstance(e, ast.List) and e.elts:
            return all(isinstance(x, ast.Call) and self.dotted(x.func) == "triton.Config" and self.constant(x)
                       for x in e.elts)
        return False

    def decorator(self, d: ast.AST) -> str:
        call = d if isinstance(d, ast.Call) else None
        name = self.dotted(call.func if call else d)
        if name == "triton.jit":
            if call and not all(self.constant(k.value) for k in call.keywords):
                self.add(d, "decorator", "triton.jit options must be constants")
            return "jit"
        if name == "triton.autotune" and call:
            for k in call.keywords:
                if k.arg == "configs" and not (self.constant(k.value) or isinstance(k.value, ast.Name)
                                               and k.value.id in self.constants):
                    self.add(d, "decorator", "autotune configs: a list of triton.Config(...) constants")
                elif k.arg == "key" and not (isinstance(k.value, (ast.List, ast.Tuple)) and all(
                        isinstance(x, ast.Constant) for x in k.value.elts)):
                    self.add(d, "decorator", "autotune key: a list of argument names")
                elif k.arg not in ("configs", "key", "warmup", "rep", "cache_results"):
                    self.add(d, "decorator", f"autotune option {k.arg!r} is outside the allow-list "
                                             "(hooks and prune functions run host code)")
            return "jit"
        if name == "triton.heuristics" and call and len(call.args) == 1 and isinstance(call.args[0], ast.Dict):
            for v in call.args[0].values:
                if isinstance(v, ast.Lambda):
                    _Host(self, v).check_lambda()
                else:
                    self.add(d, "decorator", "heuristics values are lambdas over the launch arguments")
            return "jit"
        if name in ("functools.cache", "functools.lru_cache", "functools.cached_property"):
            self.add(d, "output-caching", f"@{name}: results must be computed on every call")
        else:
            self.add(d, "decorator", f"@{name or ast.unparse(d)} is outside the allow-list "
                                     "(triton.jit, triton.autotune, triton.heuristics)")
        return "other"


class _Device:
    """A @triton.jit body: Triton IR only."""

    def __init__(self, top: _TritonChecker, fn: ast.FunctionDef) -> None:
        self.top, self.fn = top, fn
        self.local = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.local.add(node.id)

    def check(self) -> None:
        top = self.top
        body = [n for stmt in self.fn.body for n in ast.walk(stmt)]  # decorators are checked as host code
        for node in body:
            if isinstance(node, ast.Attribute) and node.attr.startswith("__"):
                top.add(node, "dynamic-code", f"dunder attribute {node.attr} in a kernel")
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                top.add(node, "global-state", "global/nonlocal in a kernel")
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                self.name(node)
            elif isinstance(node, (ast.FunctionDef, ast.Lambda, ast.ClassDef)) and node is not self.fn:
                top.add(node, "triton-device-call", "nested functions, lambdas and classes are not device code")

    def name(self, node: ast.Name) -> None:
        top, n = self.top, node.id
        if n in self.local or n in top.constants or n in top.jit or n in _DEVICE_BUILTINS:
            return
        root = top.aliases.get(n)
        if root is not None and (root.startswith("triton.language") or root == "triton"
                                 or root in ("typing", "__future__")):
            return
        if root is not None and root.startswith("triton.") and root.split(".")[1] in ("jit", "cdiv"):
            return
        if root == "sibling":
            return  # a jit function imported from a sibling file (checked there)
        what = f"{n} ({root})" if root else n
        top.add(node, "triton-device-call", f"{what} in a @triton.jit kernel: device code uses tl.*, libdevice and "
                                            "jit functions")


class _Host:
    """A launcher (or a grid / heuristics lambda): allocate, read shapes, launch; nothing else."""

    def __init__(self, top: _TritonChecker, fn: ast.FunctionDef | ast.Lambda, outer: _Host | None = None) -> None:
        self.top, self.fn = top, fn
        # a nested function or lambda starts from what its enclosing launcher knows
        self.scalar: set[str] = set(outer.scalar) if outer else set()
        self.meta: set[str] = set(outer.meta) if outer else set()  # subscriptable non-tensors: shape tuples, meta dicts

    # ---- entry points -----------------------------------------------------------------
    def check_function(self) -> None:
        fn = self.fn
        assert isinstance(fn, ast.FunctionDef)
        self.params(fn.args)
        self.infer(fn)
        for stmt in fn.body:
            self.stmt(stmt)

    def check_lambda(self) -> None:
        fn = self.fn
        assert isinstance(fn, ast.Lambda)
        self.meta.update(a.arg for a in fn.args.args)  # grid(meta) / heuristics(args): dicts of launch values
        self.expr(fn.body)

    # ---- facts ----------------------------------------------------------------------------
    def params(self, args: ast.arguments) -> None:
        every = args.posonlyargs + args.args + args.kwonlyargs
        defaults = [None] * (len(args.posonlyargs + args.args) - len(args.defaults)) + list(args.defaults)
        defaults += list(args.kw_defaults)
        for a, d in zip(every, defaults):
            ann = a.annotation.id if isinstance(a.annotation, ast.Name) else None
            if d is not None and (isinstance(d, (ast.List, ast.Dict, ast.Set)) or not self.top.constant(d)):
                self.top.add(d, "mutable-state", f"default of {a.arg} is not a constant (state across calls)")
            if ann in _SCALAR_ANNOTATIONS or isinstance(d, ast.Constant) and d.value is not None:
                self.scalar.add(a.arg)
        for extra in (args.vararg, args.kwarg):
            if extra is not None:
                self.top.add(self.fn, "dynamic-code", f"*{extra.arg}: launchers take named arguments only")

    def infer(self, fn: ast.FunctionDef) -> None:
        """Names assigned only from scalar (or shape) expressions are scalars, to a fixed point."""
        assigns: dict[str, list[ast.AST]] = {}
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    self._collect(t, node.value, assigns)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name):
                assigns.setdefault(node.target.id, []).append(node.value if node.value is not None else node.target)
            elif isinstance(node, (ast.For, ast.comprehension)):  # an element of the iterable
                self._collect(node.target, ast.Subscript(value=node.iter, slice=ast.Constant(0)), assigns)
        # a parameter not known to be a scalar may be a tensor: that is one of its values
        for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs:
            if a.arg in assigns and a.arg not in self.scalar:
                assigns[a.arg].append(ast.Starred(value=ast.Name(a.arg)))
        # greatest fixed point (loops like `n = n * shape[i]` refer to themselves): assume every
        # assigned name is a scalar / a shape, drop those with any value that is not, repeat
        fixed_scalar, fixed_meta = set(self.scalar), set(self.meta)
        self.scalar |= set(assigns)
        self.meta |= set(assigns)
        changed = True
        while changed:
            changed = False
            for name, values in assigns.items():
                if name in self.scalar and name not in fixed_scalar and not all(self.is_scalar(v) for v in values):
                    self.scalar.discard(name)
                    changed = True
                if name in self.meta and name not in fixed_meta and not all(self.is_meta(v) for v in values):
                    self.meta.discard(name)
                    changed = True

    def _collect(self, target: ast.AST, value: ast.AST, out: dict[str, list[ast.AST]]) -> None:
        if isinstance(target, ast.Name):
            out.setdefault(target.id, []).append(value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for i, t in enumerate(target.elts):
                if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                    self._collect(t, value.elts[i], out)
                else:  # unpacking x.shape / x.stride() / range(): scalars when the whole is a shape
                    self._collect(t, ast.Subscript(value=value, slice=ast.Constant(i)) if self.is_meta(value)
                                  else value, out)

    def is_meta(self, e: ast.AST) -> bool:
        """A shape, a stride tuple, a launch-parameter dict: subscriptable, never a tensor."""
        if isinstance(e, ast.Attribute) and e.attr == "shape":
            return True
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in ("stride", "size") \
                and not e.args:
            return True
        if isinstance(e, ast.Name):
            return e.id in self.meta
        if isinstance(e, (ast.Tuple, ast.List)):
            return all(self.is_scalar(x) or self.is_meta(x) for x in e.elts)
        if isinstance(e, ast.Subscript):
            return self.is_meta(e.value) and isinstance(e.slice, ast.Slice)
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
            return self.is_meta(e.left) and self.is_meta(e.right)
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id in ("range", "tuple", "list"):
            return all(self.is_scalar(a) or self.is_meta(a) for a in e.args)
        return False

    def is_scalar(self, e: ast.AST) -> bool:
        top = self.top
        if isinstance(e, ast.Constant):
            return True
        if isinstance(e, ast.Name):
            return e.id in self.scalar or e.id in top.constants
        if isinstance(e, ast.Attribute):
            if e.attr in ("ndim", "dtype", "device", "is_cuda", "itemsize"):
                return True
            d = top.dotted(e)
            return d is not None and d.startswith("torch.") and d[6:] in _TORCH_NAMES
        if isinstance(e, ast.Subscript):
            return self.is_meta(e.value) and not isinstance(e.slice, ast.Slice)
        if isinstance(e, ast.BinOp):
            return not isinstance(e.op, ast.MatMult) and self.is_scalar(e.left) and self.is_scalar(e.right)
        if isinstance(e, ast.UnaryOp):
            return self.is_scalar(e.operand)
        if isinstance(e, ast.BoolOp):
            return all(self.is_scalar(v) for v in e.values)
        if isinstance(e, ast.Compare):
            return all(self.operand_ok(x) for x in [e.left, *e.comparators])
        if isinstance(e, ast.IfExp):
            return self.is_scalar(e.body) and self.is_scalar(e.orelse)
        if isinstance(e, ast.Call):
            f = e.func
            if isinstance(f, ast.Attribute) and f.attr in _SCALAR_METHODS and not isinstance(f.value, ast.Constant):
                return True
            d = top.dotted(f)
            if d in ("triton.cdiv", "triton.next_power_of_2") or (d or "").startswith("math."):
                return all(self.is_scalar(a) for a in e.args)
            if isinstance(f, ast.Name) and f.id in ("len", "isinstance"):
                return True
            if isinstance(f, ast.Name) and f.id in ("int", "float", "bool", "min", "max", "abs", "str"):
                return all(self.is_scalar(a) for a in e.args)
        return False

    def operand_ok(self, e: ast.AST) -> bool:
        """Comparisons may also test shapes and identity (`x.shape == y.shape`, `b is None`)."""
        return self.is_scalar(e) or self.is_meta(e)

    # ---- statements ----------------------------------------------------------------------
    def stmt(self, node: ast.stmt) -> None:
        top = self.top
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            top.add(node, "global-state", "global/nonlocal: launchers keep no state across calls")
            return
        if isinstance(node, ast.Try):
            if any(not all(isinstance(s, ast.Raise) for s in h.body) for h in node.handlers) or node.orelse \
                    or node.finalbody:
                top.add(node, "silent-fallback", "try/except in a launcher: a failing kernel must fail")
        if isinstance(node, (ast.ClassDef, ast.AsyncFunctionDef, ast.AsyncFor, ast.AsyncWith)):
            top.add(node, "module-body", f"{type(node).__name__} in a launcher")
            return
        if isinstance(node, ast.With):
            top.add(node, "torch-compute", "with-blocks in a launcher (streams, devices, autocast) are not allowed")
        if isinstance(node, ast.FunctionDef):
            _Host(top, node, outer=self).check_function()
            return
        for target in (node.targets if isinstance(node, ast.Assign) else
                       [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For)) else []):
            self.target(target)
        if isinstance(node, ast.AugAssign) and not (self.is_scalar(node.target) and self.is_scalar(node.value)):
            top.add(node, "tensor-arithmetic", "augmented assignment on something not provably a scalar")
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                self.stmt(child)
            elif isinstance(child, ast.expr) and not (isinstance(node, (ast.Assign, ast.AugAssign, ast.For))
                                                      and child in self._targets(node)):
                self.expr(child)

    @staticmethod
    def _targets(node: ast.stmt) -> list[ast.AST]:
        if isinstance(node, ast.Assign):
            return list(node.targets)
        return [node.target] if isinstance(node, (ast.AugAssign, ast.For)) else []

    def target(self, t: ast.AST) -> None:
        if isinstance(t, (ast.Tuple, ast.List)):
            for x in t.elts:
                self.target(x)
        elif not isinstance(t, ast.Name):
            self.top.add(t, "mutable-state", f"assignment to {ast.unparse(t)}: launchers only bind local names "
                                             "(writing a tensor's items is torch compute; attributes keep state)")

    # ---- expressions ---------------------------------------------------------------------
    def expr(self, e: ast.AST) -> None:
        top = self.top
        if isinstance(e, ast.Lambda):
            _Host(top, e, outer=self).check_lambda()
            return
        if isinstance(e, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            for g in e.generators:
                for n in ast.walk(g.target):
                    if isinstance(n, ast.Name):
                        self.scalar.add(n.id) if self.is_meta(g.iter) else None
        if isinstance(e, ast.Call):
            self.call(e)
        elif isinstance(e, ast.Attribute):
            self.attribute(e)
            return
        elif isinstance(e, ast.Name):
            self.name(e)
        elif isinstance(e, ast.Subscript):
            if isinstance(e.value, ast.Name) and e.value.id in top.jit:
                self.expr(e.slice)
                return
            if not (self.is_meta(e.value) or isinstance(e.value, (ast.Tuple, ast.List))):
                top.add(e, "tensor-indexing", f"{ast.unparse(e)}: indexing or slicing a tensor runs torch on the host")
        elif isinstance(e, ast.BinOp):
            if isinstance(e.op, ast.MatMult):
                top.add(e, "matmul-operator", "@ in a launcher is a torch matmul")
            elif not (self.is_scalar(e) or self.is_meta(e)):
                top.add(e, "tensor-arithmetic", f"{ast.unparse(e)}: arithmetic on something not provably a scalar "
                                                "(annotate scalar parameters as int/float)")
        elif isinstance(e, ast.UnaryOp) and not isinstance(e.op, ast.Not) and not self.is_scalar(e):
            top.add(e, "tensor-arithmetic", f"{ast.unparse(e)}: arithmetic on something not provably a scalar")
        elif isinstance(e, ast.Compare):
            plain = all(isinstance(o, (ast.Is, ast.IsNot)) for o in e.ops)
            if not plain and not self.is_scalar(e):
                top.add(e, "tensor-arithmetic", f"{ast.unparse(e)}: comparing something not provably a scalar")
        for child in ast.iter_child_nodes(e):
            if isinstance(child, ast.expr):
                if isinstance(e, ast.Call) and child is e.func:
                    continue
                self.expr(child)

    def name(self, e: ast.Name) -> None:
        top = self.top
        if e.id in _DYNAMIC:
            top.add(e, "dynamic-code", f"{e.id} is not allowed in kernels/")
        elif e.id == "open" or e.id == "input":
            top.add(e, "io-access", f"{e.id}() in a launcher")
        elif top.aliases.get(e.id, "").startswith("triton.language"):
            top.add(e, "triton-host-language", f"{e.id} (triton.language) used on the host")

    def attribute(self, e: ast.Attribute) -> None:
        top = self.top
        if e.attr.startswith("_"):
            top.add(e, "dynamic-code", f"private or dunder attribute .{e.attr}")
            return
        d = top.dotted(e)
        if d is not None and "." in d and d.split(".")[0] in ("torch", "triton", "math", "typing"):
            self.module_name(e, d, called=False)
            return
        if e.attr not in _SHAPE_ATTRS and e.attr not in ("itemsize",):
            top.add(e, "tensor-method-compute", f".{e.attr}: launchers read .shape/.dtype/.device/.ndim only")
        self.expr(e.value)

    def module_name(self, node: ast.AST, d: str, called: bool) -> None:
        """A launcher's use of a module: torch allocation and dtypes, triton.cdiv / next_power_of_2, math, typing."""
        top = self.top
        parts = d.split(".")
        if parts[0] == "torch":
            if not (len(parts) == 2 and (parts[1] in _TORCH_NAMES or called and parts[1] in _TORCH_ALLOC)):
                rule = "stream-creation" if any(p in _STREAMY for p in parts[1:]) else "torch-compute"
                top.add(node, rule, f"{d}: a launcher may only allocate (torch.empty, zeros, ...) and name dtypes")
        elif d.startswith("triton.language"):
            top.add(node, "triton-host-language", f"{d} on the host: triton.language belongs in @triton.jit")
        elif parts[0] == "triton" and d not in ("triton.cdiv", "triton.next_power_of_2"):
            top.add(node, "torch-compute" if "runtime" not in d else "stream-creation",
                    f"{d}: a launcher may use triton.cdiv and triton.next_power_of_2 only")

    def call(self, e: ast.Call) -> None:
        top = self.top
        f = e.func
        if isinstance(f, ast.Subscript) and isinstance(f.value, ast.Name) and f.value.id in top.jit:
            return  # kernel[grid](...)
        if isinstance(f, ast.Name):
            if f.id in top.host or f.id in _HOST_BUILTINS:
                if f.id in ("sum", "abs", "min", "max", "pow", "round") and not all(self.is_scalar(a) for a in e.args):
                    top.add(e, "tensor-arithmetic", f"{f.id}() of something not provably a scalar")
                return
            if f.id in top.jit:
                top.add(e, "triton-device-call", f"{f.id}(...) called without a grid: launch it as {f.id}[grid](...)")
                return
            root = top.aliases.get(f.id)
            if root and root != "sibling":
                self.module_name(e, root, called=True)
                return
            if f.id in ("open", "input"):
                top.add(e, "io-access", f"{f.id}() in a launcher")
            else:
                top.add(e, "dynamic-code", f"{f.id}(...): not a launcher, a builtin on the allow-list or an allocation")
            return
        if isinstance(f, ast.Attribute):
            d = top.dotted(f)
            if d is not None and d.split(".")[0] in ("torch", "triton", "math", "typing") and "." in d:
                self.module_name(e, d, called=True)
                return
            if f.attr.startswith("_"):
                top.add(e, "dynamic-code", f"private or dunder method .{f.attr}")
            elif f.attr not in _SCALAR_METHODS | _VIEW_METHODS:
                top.add(e, "tensor-method-compute", f".{f.attr}(): a launcher may read shapes and allocate only")
            self.expr(f.value)
            return
        top.add(e, "dynamic-code", f"{ast.unparse(f)}(...): a computed callee")
