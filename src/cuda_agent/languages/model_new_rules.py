"""The grammar every language holds `model_new.py` to, read with `ast` before anything in the workspace
runs: imports, torch use, tensor arithmetic, dynamic code, the shape of its module and classes
(`_PyChecker.grammar`). docs/guards.md ("Static rules") states the allow-lists below in prose."""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import re
import types

from .records import Finding, dedupe, python_findings


# ---- model_new.py policy ------------------------------------------------------------------
_ALLOWED_MODULES = frozenset("torch torch.nn torch.nn.functional torch.nn.init torch.cuda torch.autograd math "
                             "typing typing_extensions dataclasses functools collections collections.abc "
                             "itertools numbers operator abc enum __future__".split())
_VIEWS = ("reshape flatten unflatten squeeze unsqueeze permute transpose t narrow select split chunk unbind "
          "movedim moveaxis swapaxes swapdims as_strided").split()
_TORCH_OK = frozenset(
    ["torch", "torch.nn", "torch.nn.functional", "torch.nn.init", "torch.cuda", "torch.autograd",
     "torch.autograd.Function"]
    + [f"torch.{n}" for n in _VIEWS + ("empty empty_like empty_strided zeros zeros_like ones ones_like full "
       "full_like tensor as_tensor arange Tensor Size device dtype no_grad inference_mode set_grad_enabled "
       "enable_grad is_grad_enabled is_tensor is_floating_point is_complex numel finfo iinfo "
       "get_default_dtype").split()]
    + [f"torch.nn.{n}" for n in "Module Parameter ParameterList ParameterDict ModuleList ModuleDict Identity "
       "Buffer".split()]
    + [f"torch.cuda.{n}" for n in "current_device is_available device_count get_device_properties "
       "get_device_capability get_device_name current_stream synchronize device".split()])
_MAKERS = frozenset(n for n in _TORCH_OK if n.split(".")[-1] in _VIEWS or n.split(".")[-1].split("_")[0] in (
    "empty", "zeros", "ones", "full", "tensor", "as", "arange"))
_PARAMS = frozenset(f"torch.nn.{n}" for n in ("Parameter", "Buffer", "ParameterList", "ParameterDict"))
_NONCOMPUTE_MODULES = frozenset(n.split(".")[-1] for n in _TORCH_OK if n.startswith("torch.nn.") and n[9:10].isupper())
_STREAMS = frozenset(f"torch.{n}" for n in "Stream cuda.Stream cuda.stream cuda.set_stream cuda.ExternalStream "
                     "cuda.StreamContext".split())
_INIT_DENY = frozenset("compile load save from_file manual_seed seed use_deterministic_algorithms vmap cond "
                       "export".split())
_SAFE_METHODS = frozenset(_VIEWS + (
    "contiguous view view_as reshape_as expand expand_as size dim ndimension numel nelement stride "
    "storage_offset is_contiguous data_ptr to cuda cpu float half bfloat16 double int long bool byte char "
    "short type type_as detach clone copy_ zero_ fill_ new_empty new_zeros new_ones new_full "
    "new_empty_strided new_tensor element_size item tolist get_device is_floating_point is_complex "
    "requires_grad_ pin_memory is_pinned unfold dim_order").split())
_SHAPE_METHODS = frozenset("size dim ndimension numel nelement stride storage_offset is_contiguous data_ptr "
                           "element_size item tolist get_device is_floating_point is_complex is_pinned "
                           "dim_order".split())
_TENSOR_PROPS = frozenset("T mT H mH data real imag grad".split())
_MODULE_SAFE = frozenset("parameters named_parameters buffers named_buffers children named_children modules "
                         "named_modules state_dict extra_repr to cuda cpu float half double bfloat16 train eval "
                         "requires_grad_ register_buffer register_parameter get_parameter get_buffer "
                         "get_submodule type".split())
_DYNAMIC = frozenset("eval exec compile __import__ globals locals vars breakpoint exit quit".split())
_INTROSPECT = frozenset("__globals__ __builtins__ __dict__ __code__ __closure__ __subclasses__ __bases__ __mro__ "
                        "__base__ __import__ __loader__ __spec__ __self__ __func__ __wrapped__ __getattribute__ "
                        "__setattr__ __delattr__ __reduce__ __reduce_ex__ __traceback__ f_back f_globals f_locals "
                        "f_code f_builtins gi_frame cr_frame tb_frame tb_next".split())
_BUILTINS_OK = frozenset(
    "len range enumerate zip map filter list tuple dict set frozenset int float bool str complex bytes isinstance "
    "issubclass super print min max sum abs round divmod sorted reversed any all slice iter next hasattr callable "
    "repr format hash id pow chr ord bin hex oct property staticmethod classmethod object NotImplemented Ellipsis "
    "True False None __name__".split()) | frozenset(n for n in dir(builtins) if isinstance(getattr(builtins, n), type)
                                         and issubclass(getattr(builtins, n), BaseException))
_REFLECTIVE = frozenset("typing.get_type_hints typing_extensions.get_type_hints typing.ForwardRef "
                        "typing_extensions.ForwardRef typing.evaluate_forward_ref typing_extensions.evaluate_forward_ref "
                        "typing_extensions.get_annotations operator.attrgetter operator.methodcaller".split())
_DECORATORS = frozenset("staticmethod classmethod property torch.no_grad torch.inference_mode torch.enable_grad "
                        "functools.wraps functools.cache functools.lru_cache functools.cached_property "
                        "dataclasses.dataclass typing.overload typing.final typing_extensions.overload "
                        "typing_extensions.final typing_extensions.override abc.abstractmethod".split())
_BASES = frozenset("torch.nn.Module torch.autograd.Function object typing.NamedTuple typing.Generic enum.Enum "
                   "enum.IntEnum abc.ABC".split())
_CLASS_DUNDERS_OK = frozenset("__init__ __repr__ __str__".split())
_FIELD_ACCESS = re.compile(r"\{[^{}]*[.\[]")
_COMPUTE_BUILTINS = frozenset("sum abs pow max min round divmod sorted any all".split())
_MEMO = frozenset(("functools.cache", "functools.lru_cache", "functools.cached_property"))
_MATMUL = frozenset(("matmul", "imatmul", "__matmul__", "__rmatmul__", "__imatmul__"))
_OP_DUNDERS = frozenset([f"__{p}{n}__" for n in "add sub mul matmul truediv floordiv div mod pow lshift rshift and "
                         "or xor".split() for p in ("", "r", "i")]
                        + [f"__{n}__" for n in "neg pos abs invert lt le eq ne ge gt".split()])
_MISC_OPS = (ast.Is, ast.IsNot, ast.In, ast.NotIn)


@functools.cache
def _torch_facts() -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """(public Tensor methods, dtype names, torch namespace functions) of the installed torch."""
    import torch

    def is_method(n: str) -> bool:
        a = inspect.getattr_static(torch.Tensor, n, None)
        plain = not isinstance(a, (property, types.GetSetDescriptorType, types.MemberDescriptorType))
        return plain and not n.startswith("_") and callable(getattr(torch.Tensor, n, None))

    methods = frozenset(n for n in dir(torch.Tensor) if is_method(n))
    dtypes = frozenset(f"torch.{n}" for n in dir(torch) if isinstance(getattr(torch, n), torch.dtype))
    fns = frozenset(n for n in dir(torch) if not n.startswith("_") and callable(getattr(torch, n))
                    and not isinstance(getattr(torch, n), type) and not inspect.ismodule(getattr(torch, n)))
    return methods, dtypes, fns


@functools.cache
def _compute_methods() -> frozenset[str]:
    """Tensor methods that compute and that plain Python objects do not also have."""
    return _torch_facts()[0] - _SAFE_METHODS - {"add", "index", "sort", "values"}


def _short(node: ast.AST) -> str:
    s = ast.unparse(node)
    return s if len(s) <= 60 else s[:57] + "..."


def _is_self(e: ast.AST) -> bool:
    return isinstance(e, ast.Name) and e.id in ("self", "cls")


def _names(target: ast.AST) -> list[str]:
    """Names an assignment target binds (not the `self` of `self.x = ...`)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Starred):
        return _names(target.value)
    return [n for t in getattr(target, "elts", []) for n in _names(t)]


class _PyChecker:
    """One pass over model_new.py: imports and aliases, class facts, reachability, a small
    flow-insensitive tensor dataflow, then every node is checked in its function's context."""

    def __init__(self, tree: ast.Module, ext: str, filename: str) -> None:
        self.tree, self.ext, self.file = tree, ext, filename
        self.found: list[Finding] = []
        self.aliases: dict[str, str] = {}
        self.funcs: dict[tuple, ast.AST] = {}
        self.owner: dict[ast.AST, tuple] = {}
        self.parent = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
        self.tensor_attrs: set[str] = set()
        self.submodules: set[str] = set()
        self.tnames: dict[tuple, set[str]] = {}
        self.mnames: dict[tuple, set[str]] = {}
        self.returns: dict[tuple, bool] = {}
        self.local_fns: dict[tuple, dict[str, list[str]]] = {}

    def add(self, node: ast.AST, rule: str, message: str) -> None:
        self.found.append(Finding(file=self.file, line=getattr(node, "lineno", 1), rule=rule, message=message))

    # ---- facts --------------------------------------------------------------------------
    def dotted(self, e: ast.AST) -> str | None:
        """The imported thing an expression names (`F.relu` -> "torch.nn.functional.relu")."""
        if isinstance(e, ast.Name):
            return self.aliases.get(e.id)
        if isinstance(e, ast.Attribute):
            base = self.dotted(e.value)
            return f"{base}.{e.attr}" if base else None
        got = self.getattr_const(e)
        if got:
            base = self.dotted(got[0])
            return f"{base}.{got[1]}" if base else None
        return None

    @staticmethod
    def getattr_const(e: ast.AST) -> tuple[ast.AST, str] | None:
        if (isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "getattr"
                and len(e.args) >= 2 and isinstance(e.args[1], ast.Constant) and isinstance(e.args[1].value, str)):
            return e.args[0], e.args[1].value
        return None

    def imports(self) -> None:
        allowed = _ALLOWED_MODULES | {self.ext}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                mods = [(a.name, a.asname or a.name.split(".")[0], a.name if a.asname else a.name.split(".")[0])
                        for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                if node.level or (any(a.name == "*" for a in node.names) and mod.startswith("torch")):
                    self.add(node, "forbidden-import", f"`{_short(node)}`: relative imports and star imports "
                             "from torch cannot be checked; import names explicitly")
                    continue
                mods = [(mod, a.asname or a.name, f"{mod}.{a.name}") for a in node.names]
            else:
                continue
            for mod, local, target in mods:
                if mod.split(".")[0] in ("model", "reference_task"):
                    self.add(node, "forbidden-import", f"`{_short(node)}` imports the reference: ModelNew must "
                             "compute its outputs itself, not read or call Model")
                elif mod not in allowed:
                    self.add(node, "forbidden-import", f"`{_short(node)}`: `{mod}` is not allowed in "
                             f"model_new.py (allowed: torch, torch.nn, torch.nn.functional, math, typing, "
                             f"functools, collections, itertools, ... and `{self.ext}`)")
                else:
                    self.aliases[local] = target

    def collect(self) -> None:
        """Functions and who owns each node; `self.<x>` attributes that hold tensors or modules."""
        def visit(node: ast.AST, key: tuple, cls: str | None) -> None:
            for c in ast.iter_child_nodes(node):
                k = key
                if isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef)) and key == ("<module>",):
                    k = (cls, c.name)
                    self.funcs[k] = c
                elif isinstance(c, ast.If) and ast.unparse(c.test) == "__name__ == '__main__'":
                    k = ("<main>",)  # never runs on import: checked like the constructor
                self.owner[c] = k
                visit(c, k, c.name if isinstance(c, ast.ClassDef) and cls is None else cls)
        visit(self.tree, ("<module>",), None)
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                for t in node.targets:
                    if isinstance(t, ast.Attribute) and _is_self(t.value):
                        self._classify_attr(t.attr, node.value)
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _is_self(node.func.value)
                    and node.func.attr in ("register_buffer", "register_parameter") and node.args
                    and isinstance(node.args[0], ast.Constant)):
                self.tensor_attrs.add(str(node.args[0].value))

    def _classify_attr(self, attr: str, value: ast.Call) -> None:
        d = self.dotted(value.func) or ""
        calls = [self.dotted(c.func) or "" for c in ast.walk(value) if isinstance(c, ast.Call)]
        if any(c.startswith("torch.nn.") and c.count(".") == 2 and c.split(".")[2][:1].isupper()
               and c.split(".")[2] not in _NONCOMPUTE_MODULES for c in calls):
            self.submodules.add(attr)
        elif d.split(".")[0] == self.ext or d in _MAKERS or d in _PARAMS or (
                d.startswith("torch.") and d not in _TORCH_OK and not d.startswith("torch.nn.")):
            self.tensor_attrs.add(attr)

    def runtime_keys(self) -> set[tuple]:
        """Everything but what only the constructor (or get_inputs) can reach."""
        edges: dict[tuple, set[tuple]] = {k: set() for k in self.funcs}
        for node, key in self.owner.items():
            if key in edges:
                if isinstance(node, ast.Attribute) and _is_self(node.value) and (key[0], node.attr) in self.funcs:
                    edges[key].add((key[0], node.attr))
                elif isinstance(node, ast.Name) and (None, node.id) in self.funcs:
                    edges[key].add((None, node.id))

        def closure(start: set[tuple]) -> set[tuple]:
            seen, todo = set(start), list(start)
            while todo:
                for nxt in edges.get(todo.pop(), ()):
                    if nxt not in seen:
                        seen.add(nxt)
                        todo.append(nxt)
            return seen
        init = closure({k for k in self.funcs if k[1] == "__init__" or k in ((None, "get_inputs"),
                                                                             (None, "get_init_inputs"))})
        # a function stored or passed (not called) can run later, from forward: it is runtime code
        escaped = set()
        for node, key in self.owner.items():
            parent = self.parent.get(node)
            if isinstance(parent, ast.Call) and parent.func is node:
                continue
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and (None, node.id) in self.funcs:
                escaped.add((None, node.id))
            elif (isinstance(node, ast.Attribute) and _is_self(node.value) and isinstance(node.ctx, ast.Load)
                  and (key[0], node.attr) in self.funcs):
                escaped.add((key[0], node.attr))
        return closure({k for k in self.funcs if k not in init or k[1] == "forward"} | escaped) | {("<module>",)}

    # ---- dataflow ---------------------------------------------------------------------------
    def is_tensor(self, e: ast.AST, key: tuple) -> bool:
        if isinstance(e, ast.Name):
            return e.id in self.tnames.get(key, ())
        if isinstance(e, (ast.Starred, ast.NamedExpr, ast.Subscript)):
            return self.is_tensor(e.value, key)
        if isinstance(e, ast.Attribute):
            if _is_self(e.value):
                return e.attr in self.tensor_attrs
            if self.module_valued(e.value, key):
                return "weight" in e.attr or "bias" in e.attr or e.attr.startswith("running_")
            return e.attr in _TENSOR_PROPS and self.is_tensor(e.value, key)
        if isinstance(e, ast.Call):
            d = self.dotted(e.func)
            if d:
                return d.split(".")[0] == self.ext or (d.startswith("torch.") and d not in _TORCH_OK) or d in _MAKERS
            f = e.func
            if isinstance(f, ast.Name) and (None, f.id) in self.funcs:
                return self.returns.get((None, f.id), False)
            if isinstance(f, ast.Attribute) and _is_self(f.value):
                return self.returns.get((key[0], f.attr), f.attr in self.submodules)
            if self.module_valued(f, key):
                return True
            return isinstance(f, ast.Attribute) and f.attr not in _SHAPE_METHODS and self.is_tensor(f.value, key)
        if isinstance(e, ast.BinOp):
            return self.is_tensor(e.left, key) or self.is_tensor(e.right, key)
        if isinstance(e, ast.UnaryOp):
            return self.is_tensor(e.operand, key)
        if isinstance(e, ast.IfExp):
            return self.is_tensor(e.body, key) or self.is_tensor(e.orelse, key)
        if isinstance(e, (ast.Tuple, ast.List)):
            return any(self.is_tensor(x, key) for x in e.elts)
        return False

    def module_valued(self, e: ast.AST, key: tuple) -> bool:
        if isinstance(e, ast.Attribute) and _is_self(e.value):
            return e.attr in self.submodules
        if isinstance(e, ast.Subscript):
            return self.module_valued(e.value, key)
        return isinstance(e, ast.Name) and e.id in self.mnames.get(key, ())

    def dataflow(self) -> None:
        """Which names hold tensors (or compute modules), to a fixpoint across helper calls."""
        pairs: dict[tuple, list[tuple[ast.AST, ast.AST, bool]]] = {}
        for node, key in self.owner.items():
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node is not self.funcs.get(key):
                self.local_fns.setdefault(key, {})[node.name] = [a.arg for a in node.args.args]
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
                for t in node.targets:
                    self.local_fns.setdefault(key, {}).update({n: [a.arg for a in node.value.args.args]
                                                               for n in _names(t)})
            if isinstance(node, ast.Assign):
                pairs.setdefault(key, []).extend((t, node.value, False) for t in node.targets)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and node.value is not None:
                pairs.setdefault(key, []).append((node.target, node.value, False))
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                pairs.setdefault(key, []).append((node.target, node.iter, True))
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                pairs.setdefault(key, []).append((node.optional_vars, node.context_expr, False))
        for key, fn in self.funcs.items():
            a = fn.args
            params = set()
            if key[1] == "forward":
                pos = a.posonlyargs + a.args
                defaults = [None] * (len(pos) - len(a.defaults)) + list(a.defaults)
                for arg, dflt in zip(pos[1:], defaults[1:]):
                    ann = arg.annotation is not None and "Tensor" not in ast.unparse(arg.annotation)
                    const = isinstance(dflt, ast.Constant) and dflt.value is not None
                    if not ann and not const:
                        params.add(arg.arg)
                params |= {v.arg for v in (a.vararg,) if v}
            self.tnames[key] = params
        for _ in range(8):
            before = (sum(map(len, self.tnames.values())), sum(map(len, self.mnames.values())),
                      sum(self.returns.values()))
            for key, items in pairs.items():
                for target, value, is_iter in items:
                    mod = (any(self.module_valued(n, key) for n in ast.walk(value)) if is_iter
                           else self.module_valued(value, key))
                    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and (
                            len(target.elts) == len(value.elts)):
                        for t, v in zip(target.elts, value.elts):
                            if self.is_tensor(v, key):
                                self.tnames.setdefault(key, set()).update(_names(t))
                    elif self.is_tensor(value, key):
                        self.tnames.setdefault(key, set()).update(_names(target))
                    if mod:
                        self.mnames.setdefault(key, set()).update(_names(target))
            for node, key in self.owner.items():
                if isinstance(node, ast.Return) and node.value is not None and key in self.funcs:
                    self.returns[key] = self.returns.get(key, False) or self.is_tensor(node.value, key)
                if isinstance(node, ast.Call):
                    self._propagate(node, key)
            if before == (sum(map(len, self.tnames.values())), sum(map(len, self.mnames.values())),
                          sum(self.returns.values())):
                break

    def _propagate(self, call: ast.Call, key: tuple) -> None:
        """Tensor arguments make the callee's parameters tensors."""
        f = call.func
        if isinstance(f, ast.Name) and f.id == "map" and call.args and isinstance(call.args[0], ast.Lambda):
            if any(self.is_tensor(a, key) for a in call.args[1:]):  # map(lambda t: ..., tensors)
                self.tnames.setdefault(key, set()).update(a.arg for a in call.args[0].args.args)
            return
        local = self.local_fns.get(key, {}).get(f.id) if isinstance(f, ast.Name) else None
        if local is not None:  # a lambda or nested def: its parameters live in the same scope
            self.tnames.setdefault(key, set()).update(p for p, a in zip(local, call.args) if self.is_tensor(a, key))
            return
        callee = ((key[0], f.attr) if isinstance(f, ast.Attribute) and _is_self(f.value)
                  else (None, f.id) if isinstance(f, ast.Name) else None)
        fn = self.funcs.get(callee)
        if fn is None:
            return
        pos = [a.arg for a in fn.args.posonlyargs + fn.args.args][1 if callee[0] else 0:]
        got = {p for p, arg in zip(pos, call.args) if self.is_tensor(arg, key)}
        got |= {k.arg for k in call.keywords if k.arg and self.is_tensor(k.value, key)}
        self.tnames.setdefault(callee, set()).update(got)

    # ---- checks ----------------------------------------------------------------------------
    def run(self) -> list[Finding]:
        self.imports()
        self.collect()
        runtime = self.runtime_keys()
        self.dataflow()
        self.grammar()
        for node in ast.walk(self.tree):
            key = self.owner.get(node, ("<module>",))
            self.check_node(node, key, key in runtime)
        return self.found

    def grammar(self) -> None:
        """The shape a model_new.py may have: module and class bodies, decorators, bases, the
        builtins it may name and how it may reach attributes (never by a string)."""
        bound = set(self.aliases)
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                bound.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(node.name)
            elif isinstance(node, ast.arg):
                bound.add(node.arg)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                bound.add(node.name)
        self.module_body(self.tree.body)
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.AsyncFunctionDef, ast.Await, ast.AsyncFor, ast.AsyncWith)):
                self.add(node, "dynamic-code", "async code is outside what a ModelNew may be")
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                if node.id.startswith("__") and node.id.endswith("__") and node.id != "__name__":
                    self.add(node, "dynamic-code", f"`{node.id}`: module internals give string-keyed access to "
                             "everything; not allowed")
                elif node.id not in bound and hasattr(builtins, node.id) and node.id not in _BUILTINS_OK:
                    self.add(node, "dynamic-code", f"`{node.id}` is not an allowed builtin: attribute access by "
                             "string, reflection, dynamic code and I/O cannot be checked")
            elif isinstance(node, ast.Attribute):
                self.check_attribute(node)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                    "format", "format_map"):
                recv = node.func.value
                if node.func.attr == "format_map" or not (isinstance(recv, ast.Constant) and isinstance(
                        recv.value, str)) or _FIELD_ACCESS.search(recv.value):
                    self.add(node, "dynamic-code", f"`{_short(node)}`: a format string can reach attributes by "
                             "name; use an f-string")
            elif isinstance(node, ast.ClassDef):
                self.class_shape(node)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                for dec in node.decorator_list:
                    self.check_decorator(dec)

    def check_attribute(self, node: ast.Attribute) -> None:
        a, recv = node.attr, node.value
        is_self = _is_self(recv) or (isinstance(recv, ast.Call) and isinstance(recv.func, ast.Name)
                                     and recv.func.id == "super")
        if a.startswith("__") and a.endswith("__"):
            if a != "__init__":
                self.add(node, "dynamic-code", f"`{_short(node)}`: dunder attributes reach classes, modules and "
                         "frames by name; not allowed")
        elif a.startswith("_") and not is_self:
            self.add(node, "dynamic-code", f"`{_short(node)}`: private attributes of other objects are not part of "
                     "what a ModelNew may use")

    def check_decorator(self, dec: ast.AST) -> None:
        target = dec.func if isinstance(dec, ast.Call) else dec
        d = self.dotted(target) or (target.id if isinstance(target, ast.Name) and target.id not in self.aliases
                                    else None)
        setter = isinstance(target, ast.Attribute) and target.attr in ("setter", "getter", "deleter")
        if d not in _DECORATORS and not setter:
            self.add(dec, "decorator", f"`@{_short(dec)}` is not an allowed decorator (staticmethod, classmethod, "
                     "property, torch.no_grad, functools.wraps/cache, dataclasses.dataclass, ...)")

    def class_shape(self, node: ast.ClassDef) -> None:
        local = {c.name for c in ast.walk(self.tree) if isinstance(c, ast.ClassDef)}
        for base in node.bases:
            d = self.dotted(base)
            name = base.id if isinstance(base, ast.Name) else None
            if d in _BASES or d == "torch.Tensor" or (d or "").startswith("torch.nn.") or (
                    name and (name in local or name == "object" or name in _BUILTINS_OK and name[0].isupper())):
                continue  # nn compute modules and torch.Tensor have their own rules
            self.add(base, "class-definition", f"class `{node.name}` derives from `{_short(base)}`: allowed bases "
                     "are nn.Module, torch.autograd.Function, object, exceptions and classes of this file")
        for kw in node.keywords:
            self.add(kw.value, "class-definition", f"class `{node.name}`: `{kw.arg}=` (metaclasses, class "
                     "arguments) is not allowed")
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if item.name.startswith("__") and item.name.endswith("__") and item.name not in _CLASS_DUNDERS_OK \
                        and item.name not in ("__torch_function__", "__torch_dispatch__"):
                    self.add(item, "class-body", f"`{node.name}.{item.name}` hooks into Python's object model; "
                             "a ModelNew may define __init__, forward and helpers")
            elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                for tgt in targets:
                    if not isinstance(tgt, ast.Name) or (tgt.id.startswith("__") and tgt.id not in (
                            "__constants__", "__slots__")):
                        self.add(item, "class-body", f"`{_short(item)}`: a class body may only assign plain names")
            elif not (isinstance(item, ast.Pass) or (isinstance(item, ast.Expr) and isinstance(item.value, ast.Constant))):
                self.add(item, "class-body", f"`{_short(item)}`: a class body may only define methods and assign "
                         "names")

    def module_body(self, body: list[ast.stmt]) -> None:
        for item in body:
            if isinstance(item, ast.If) and ast.unparse(item.test) == "__name__ == '__main__'":
                continue  # never runs on import
            if isinstance(item, ast.If):
                self.module_body(item.body + item.orelse)
            elif isinstance(item, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                if any(isinstance(n, ast.Name) and n.id.startswith("__") and n.id != "__all__"
                       for tgt in targets for n in ast.walk(tgt)):
                    self.add(item, "module-body", f"`{_short(item)}` sets a module dunder (module __getattr__, "
                             "__builtins__, ...)")
            elif not isinstance(item, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef,
                                       ast.ClassDef, ast.Pass)) and not (
                    isinstance(item, ast.Expr) and isinstance(item.value, ast.Constant)):
                self.add(item, "module-body", f"`{_short(item)}`: module-level code may only import, define and "
                         "assign (anything else runs on import, outside every check)")

    def check_node(self, node: ast.AST, key: tuple, rt: bool) -> None:
        parent = self.parent.get(node)
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            self.add(node, "global-state", f"`{_short(node)}`: state kept across calls can cache outputs "
                     "or count calls; keep state on self")
        elif isinstance(node, ast.ClassDef):
            self.check_class(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for dec in node.decorator_list:
                d = self.dotted(dec.func if isinstance(dec, ast.Call) else dec)
                if d in _MEMO and rt and self.tnames.get(key):
                    self.add(dec, "output-caching", f"@{_short(dec)} on `{node.name}`, which takes tensors: "
                             "results must be computed on every call, not remembered")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            for t in getattr(node, "targets", None) or [node.target]:
                root = t
                while isinstance(root, (ast.Attribute, ast.Subscript)):
                    root = root.value
                if root is not t and isinstance(root, ast.Name) and root.id in self.aliases:
                    self.add(node, "monkeypatch", f"`{_short(t)}` changes the imported `{self.aliases[root.id]}`:"
                             " patching torch, timers or checks is not allowed")
            if isinstance(node, ast.AugAssign) and rt:
                self.check_operator(node, node.op, [node.target, node.value], key)
        elif isinstance(node, ast.Try) and rt and key != ("<module>",):
            for h in node.handlers:
                if not all(isinstance(s, ast.Raise) for s in h.body):
                    self.add(h, "silent-fallback", "an except handler in runtime code that does more than "
                             "raise: a failing kernel must fail, not fall back to something else")
        elif isinstance(node, ast.BinOp) and rt:
            self.check_operator(node, node.op, [node.left, node.right], key)
        elif isinstance(node, ast.UnaryOp) and rt and isinstance(node.op, (ast.USub, ast.Invert)):
            self.check_operator(node, node.op, [node.operand], key)
        elif isinstance(node, ast.Compare) and rt and not all(isinstance(o, _MISC_OPS) for o in node.ops):
            self.check_operator(node, node.ops[0], [node.left, *node.comparators], key)
        elif isinstance(node, ast.Call):
            self.check_call(node, key, rt)
        if isinstance(node, (ast.Name, ast.Attribute, ast.Call)) and not (
                isinstance(parent, ast.Attribute) and parent.value is node) and not isinstance(
                getattr(node, "ctx", None), (ast.Store, ast.Del)):
            d = self.dotted(node)
            if d:
                self.check_dotted(node, d, rt, isinstance(parent, ast.Call) and parent.func is node, key)
        attr = node.attr if isinstance(node, ast.Attribute) else (self.getattr_const(node) or (None, ""))[1]
        if attr in _INTROSPECT:
            self.add(node, "dynamic-code", f"`{_short(node)}`: frame and namespace introspection can reach "
                     "the reference or the checker")
        elif attr in _OP_DUNDERS and rt:
            self.add(node, "matmul-operator" if attr in _MATMUL else "tensor-arithmetic",
                     f"`{_short(node)}` calls an operator of torch: compute it in your kernels")

    def check_class(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            d = self.dotted(base) or ""
            if d == "torch.Tensor":
                self.add(node, "tensor-subclass", f"class `{node.name}` subclasses torch.Tensor: deferred or "
                         "overridden tensor behaviour is not allowed")
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name in ("__torch_function__", "__torch_dispatch__"):
                self.add(item, "tensor-subclass", f"`{item.name}` intercepts torch calls; not allowed")

    def check_dotted(self, node: ast.AST, d: str, rt: bool, called: bool, key: tuple) -> None:
        root, parts = d.split(".")[0], d.split(".")
        if d in _REFLECTIVE:
            self.add(node, "dynamic-code", f"`{_short(node)}` reaches attributes or evaluates annotations by "
                     "string")
        ops = parts[3:] if parts[:3] == ["torch", "ops", self.ext] else parts[1:] if root == self.ext else None
        if ops is not None and (len(ops) > 2 or (len(ops) == 2 and ops[1] != "default")
                                or any(p.startswith("_") for p in ops)):
            self.add(node, "extension-access", f"`{_short(node)}`: use the extension's ops as `{self.ext}.<op>(...)`;"
                     " nothing else of the module or the op objects")
        if root == "operator" and len(parts) > 1 and rt:
            if parts[1] in _MATMUL:
                self.add(node, "matmul-operator", f"`{_short(node)}` is matrix multiplication by Python")
            call = self.parent.get(node)
            if called and isinstance(call, ast.Call) and any(self.is_tensor(a, key) for a in call.args):
                self.add(node, "tensor-arithmetic", f"`{_short(call)}` applies an operator to tensors")
        if root != "torch":
            return
        if d in _STREAMS:
            self.add(node, "stream-creation", f"`{_short(node)}`: work must run on the current stream")
        elif not self.torch_ok(d, parts, init_call=called and not rt):
            hint = " (nn modules may be created in __init__ to hold weights, never called)" if (
                d.startswith("torch.nn.") and parts[-1][:1].isupper()) else ""
            self.add(node, "torch-compute", f"`{_short(node)}` uses `{d}`, which is not tensor creation or "
                     f"introspection: all compute must happen in your own kernels{hint}")

    def torch_ok(self, d: str, parts: list[str], init_call: bool) -> bool:
        if d in _TORCH_OK or ".".join(parts[:2]) in _torch_facts()[1] or d.startswith(f"torch.ops.{self.ext}."):
            return True
        if parts[:2] == ["torch", "Tensor"] and len(parts) == 3:
            return parts[2] in _SAFE_METHODS
        if not init_call:
            return False
        if len(parts) == 2:
            return parts[1] in _torch_facts()[2] and parts[1] not in _INIT_DENY and not parts[1].startswith("set_")
        return parts[1] in ("linalg", "fft", "special") or d.startswith(("torch.nn.init.", "torch.nn.functional.")) \
            or (parts[1] == "nn" and len(parts) == 3 and parts[2][:1].isupper())

    def check_operator(self, node: ast.AST, op: ast.AST, operands: list[ast.AST], key: tuple) -> None:
        if isinstance(op, ast.MatMult):
            self.add(node, "matmul-operator", f"`{_short(node)}`: the @ operator is torch matmul; write a kernel")
        elif any(self.is_tensor(x, key) for x in operands):
            self.add(node, "tensor-arithmetic", f"`{_short(node)}` computes on tensors in Python (torch "
                     "does the work): fuse it into your kernel")

    def check_call(self, node: ast.Call, key: tuple, rt: bool) -> None:
        f = node.func
        if isinstance(f, ast.Name) and f.id not in self.aliases:
            if f.id in _DYNAMIC or (f.id == "getattr" and not self.getattr_const(node)):
                self.add(node, "dynamic-code", f"`{_short(node)}`: dynamic code, computed attribute names and "
                         "exits cannot be checked")
            elif f.id in ("open", "input"):
                self.add(node, "io-access", f"`{_short(node)}`: model_new.py must not read files or input")
            elif f.id in ("setattr", "delattr") and node.args and self.dotted(node.args[0]):
                self.add(node, "monkeypatch", f"`{_short(node)}` changes an imported module")
            elif f.id in _COMPUTE_BUILTINS and rt and any(self.is_tensor(a, key) for a in node.args):
                self.add(node, "tensor-arithmetic", f"`{_short(node)}` computes on tensors with a builtin")
        if not rt:
            return
        method = (f.value, f.attr) if isinstance(f, ast.Attribute) else self.getattr_const(f)
        if self.module_valued(f, key) or (method and self.module_valued(method[0], key)
                                          and method[1] not in _MODULE_SAFE):
            self.add(node, "torch-compute", f"`{_short(node)}` runs a torch nn module: hold it for its "
                     "weights only and pass them to your kernel")
            return
        if not method or method[1].startswith("__") or self.dotted(f):
            return
        recv, name = method
        if _is_self(recv) or isinstance(recv, ast.Constant) or self.module_valued(recv, key) or (
                isinstance(recv, ast.Call) and isinstance(recv.func, ast.Name) and recv.func.id == "super"):
            return
        if (self.is_tensor(recv, key) and name not in _SAFE_METHODS) or name in _compute_methods():
            self.add(node, "tensor-method-compute", f"`{_short(node)}`: `.{name}()` computes in torch; "
                     "allowed tensor methods are views, casts, copies and size queries")


def check_model_new(source: str, extension_name: str, filename: str = "model_new.py") -> list[Finding]:
    """Check model_new.py's source against the allow-lists (docs/guards.md, "Static rules")."""
    return python_findings(source, filename, lambda tree: dedupe(_PyChecker(tree, extension_name, filename).run()))
