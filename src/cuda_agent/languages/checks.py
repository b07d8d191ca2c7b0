"""Static checks on a workspace, run before anything in it is built or executed.

They turn the reward hacks that can be seen in the source into findings a person can read; a
first layer only, the runtime checks stay the backstop. docs/guards.md ("Static rules") states
the allow-lists below in prose; model_new.py is also held to a grammar (`_PyChecker.grammar`),
and kernels/ is scanned again after the real preprocessor (`check_preprocessed`).
"""

from __future__ import annotations

import ast
import bisect
import builtins
import functools
import inspect
import os
import re
import types
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel


from .vendor import DEFAULT_RULES, LT_EPILOGUE, check_rules, header_allowed, vendor_allowed

_VENDOR_SCOPE = {"paper": "cuBLAS GEMM and cuDNN convolution only", "strict": "no vendor libraries"}


class Finding(BaseModel):
    """One rule violation: where, which rule, and what a person should know about it."""

    file: str
    line: int
    rule: str
    message: str


RULES: dict[str, str] = {
    "syntax-error": "model_new.py does not parse, so it cannot be checked",
    "forbidden-import": "model_new.py imports a module outside the allow-list (or the reference)",
    "torch-compute": "model_new.py calls or binds torch compute: torch.*, F.*, aten, _C, nn compute modules",
    "tensor-method-compute": "model_new.py calls a computing tensor method such as .softmax() or .sum()",
    "matmul-operator": "model_new.py uses the @ operator",
    "tensor-arithmetic": "model_new.py applies arithmetic, comparisons or numeric builtins to tensors",
    "dynamic-code": "eval/exec/__import__, computed getattr, frame or namespace introspection",
    "io-access": "model_new.py opens files or reads input",
    "monkeypatch": "model_new.py assigns to, deletes or setattr()s attributes of imported modules",
    "global-state": "model_new.py uses global or nonlocal",
    "silent-fallback": "a try/except in runtime code whose handler does more than raise",
    "output-caching": "a memoising decorator on a function that takes tensors",
    "tensor-subclass": "a torch.Tensor subclass or a __torch_function__/__torch_dispatch__ override",
    "stream-creation": "creates or selects a stream other than the current one",
    "aten-compute-in-cpp": "at::/torch:: compute (functions, Tensor methods) in kernels/",
    "heavy-torch-include": "a torch header that pulls in the ATen compute API (and ~40 s per build)",
    "third-party-include": "an #include outside the standard library, CUDA's own headers and kernels/",
    "library-kernel": "Thrust or CUB device-wide algorithms: kernels nobody in the workspace wrote",
    "thread-creation": "creates threads or host callbacks (OpenMP is fine)",
    "process-creation": "fork/exec/system/popen from a kernel file",
    "io-in-kernel": "files, environment variables, sockets or dlopen from a kernel file",
    "l2-persistence": "L2 persistence windows or limits that keep data warm across timed calls",
    "op-registration": "registers torch ops or uses the dispatcher outside REGISTER_BINDING",
    "file-outside-workspace": "model_new.py or a kernels/ entry is a link to outside the workspace",
    "workspace-file": "a kernels/ entry that cannot be a source: a FIFO, device or socket, or over the size bounds",
    "extension-access": "model_new.py reaches past an extension op (`ext.op.x`, private names, the loader's globals)",
    "decorator": "a decorator outside the allow-list (staticmethod, property, torch.no_grad, functools.wraps, ...)",
    "class-definition": "a class whose bases or metaclass are outside the allow-list",
    "class-body": "a class body doing more than defining methods and assigning names, or defining dunder hooks",
    "module-body": "module-level code outside imports, definitions, assignments and the __main__ block",
    "blas-fallback": "a vendor math library (BLAS, MKL, cuBLAS, cuDNN, ...) instead of a written kernel",
    "dynamic-loading": "dlopen/dlsym, driver entry-point lookup or run-time code loading",
    "raw-syscall": "syscall() or a system-call instruction in kernels/ or the built library",
    "inline-asm": "host inline asm other than a compiler barrier (device PTX is fine)",
    "symbol-not-allowed": "the built library imports a symbol outside the allow-list",
    "triton-host-language": "triton.language (tl.*) used in host code: it only means something inside @triton.jit",
    "triton-device-call": "a @triton.jit function calls or names something other than tl.*, libdevice or jit functions",
    "tensor-indexing": "a Triton launcher indexes or slices a tensor (torch compute on the host)",
    "mutable-state": "a Triton launcher keeps state across calls: attribute/item assignment, mutable defaults or globals",
}

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
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as e:
        return [Finding(file=filename, line=e.lineno or 1, rule="syntax-error", message=f"cannot parse: {e.msg}")]
    return _dedupe(_PyChecker(tree, extension_name, filename).run())


# ---- kernels/ policy ----------------------------------------------------------------------
_CPP_EXTS = frozenset(".cu .cuh .cpp .cc .cxx .c .h .hpp .hh .hxx .inl .inc".split())
_TOKENS = re.compile(r'//[^\n]*|/\*.*?(?:\*/|$)|R"([^()\\\s]{0,16})\(.*?\)\1"|"(?:\\.|[^"\\\n])*"'
                     r"|'(?:\\.|[^'\\\n])*'", re.S)
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*(?:<([^>\n]+)>|"([^"\n]+)"|(\S[^\n]*))', re.M)
_STD = frozenset(
    "algorithm any array atomic barrier bit bitset cassert ccomplex cctype cerrno cfenv cfloat charconv chrono "
    "cinttypes climits clocale cmath complex concepts condition_variable cstdarg cstddef cstdint cstdio cstdlib "
    "cstring ctime cwchar deque exception execution filesystem forward_list fstream functional future "
    "initializer_list iomanip ios iosfwd iostream istream iterator latch limits list map memory mutex new "
    "numbers numeric optional ostream queue random ranges ratio semaphore set shared_mutex source_location span "
    "sstream stack stdexcept streambuf string string_view system_error thread tuple type_traits typeindex "
    "typeinfo unordered_map unordered_set utility valarray variant vector version assert.h complex.h ctype.h "
    "errno.h fenv.h float.h inttypes.h limits.h math.h stdalign.h stdarg.h stdbool.h stddef.h stdint.h stdio.h "
    "stdlib.h string.h time.h omp.h immintrin.h x86intrin.h xmmintrin.h emmintrin.h pmmintrin.h tmmintrin.h "
    "smmintrin.h nmmintrin.h wmmintrin.h avxintrin.h avx2intrin.h avx512fintrin.h arm_neon.h arm_sve.h "
    "arm_fp16.h cpuid.h".split())
_HEAVY = frozenset("ATen/ATen.h ATen/Functions.h ATen/NativeFunctions.h ATen/CPUFunctions.h ATen/CUDAFunctions.h "
                   "ATen/CompositeImplicitAutogradFunctions.h ATen/CompositeExplicitAutogradFunctions.h".split())
_ALLOC_OPS = re.compile(r"ATen/ops/(empty|empty_like|empty_strided|zeros|zeros_like|ones|ones_like|full|"
                        r"full_like|from_blob)(_ops|_native)?\.h|ATen/ops/contiguous_ops\.h")
_QUAL = re.compile(r"(?<![\w:])(?:::\s*)?(at|torch)\s*::\s*((?:\w+\s*::\s*)*\w+)")
_AT_OK = frozenset(
    "Tensor TensorBase TensorOptions ScalarType IntArrayRef ArrayRef OptionalIntArrayRef SymIntArrayRef Device "
    "DeviceType DeviceGuard OptionalDeviceGuard Layout MemoryFormat Half BFloat16 Scalar optional nullopt "
    "TensorAccessor PackedTensorAccessor32 PackedTensorAccessor64 GenericPackedTensorAccessor RestrictPtrTraits "
    "DefaultPtrTraits empty empty_like empty_strided zeros zeros_like ones ones_like full full_like from_blob "
    "device dtype layout elementSize toString isFloatingType isComplexType isIntegralType isReducedFloatingType "
    "typeMetaToScalarType indexing".split())
_AT_CUDA_OK = frozenset(
    "getCurrentCUDAStream getDefaultCUDAStream CUDAGuard OptionalCUDAGuard CUDAStreamGuard CUDAStream "
    "getCurrentDeviceProperties getDeviceProperties current_device device_count warp_size".split())
_CPP_SAFE = _SAFE_METHODS | frozenset(
    "sizes strides mutable_data_ptr const_data_ptr options scalar_type dtype device is_cuda is_cpu defined "
    "itemsize nbytes layout slice index sym_sizes requires_grad accessor packed_accessor32 packed_accessor64 "
    "size data begin end empty fill swap at front back resize reserve insert erase find count clear get reset "
    "release load store value values str copy".split())
_NOT_AFTER = r"(?<![\w.])(?<!->)"
_CPP_PATTERNS: list[tuple[str, re.Pattern[str], str]] = [(rule, re.compile(rx), msg) for rule, rx, msg in [
    ("stream-creation", r"\bcu(?:da)?StreamCreate\w*|\bcudaStreamPerThread\b|\bcudaStreamLegacy\b|"
     r"\bgetStreamFromPool\b|\bsetCurrentCUDAStream\b",
     "`{}`: launch on current_stream(); other streams escape the timer"),
    ("thread-creation", r"\bstd\s*::\s*(?:j?thread|async)\b|\bpthread_create\b|\bstd\s*::\s*execution\s*::\s*par"
     r"\w*|\bcudaLaunchHostFunc\b|\bcudaStreamAddCallback\b",
     "`{}`: work on other threads escapes the timer (OpenMP is fine)"),
    ("process-creation", _NOT_AFTER + r"\b(?:v?fork|system|popen|exec[lv]p?e?|execvpe|posix_spawnp?)\s*\(",
     "`{}`: kernels must not start processes"),
    ("io-in-kernel", _NOT_AFTER + r"\b(?:fopen|freopen|open|openat|creat|getenv|secure_getenv|setenv|putenv|socket|"
     r"connect|dlopen|dlsym|mmap|opendir|unlink|syscall|cuModuleLoad)\s*\(|\bstd\s*::\s*(?:[io]?fstream|"
     r"filesystem)\b", "`{}`: kernels must not touch files, the environment or the network"),
    ("l2-persistence", r"\baccessPolicyWindow\b|\baccess_property\s*::\s*persisting\b|\bapply_access_property\b|"
     r"\bcuda(?:Stream|Launch)AttributeAccessPolicyWindow\b|\bcudaLimitPersistingL2CacheSize\b|"
     r"\bcudaAccessPropertyPersisting\b|\bCU_LIMIT_PERSISTING_L2_CACHE_SIZE\b",
     "`{}`: L2 persistence keeps inputs warm across timed calls"),
    ("op-registration", r"\bTORCH_LIBRARY(?:_IMPL|_FRAGMENT)?\b|\bRegisterOperators\b|\bDispatcher\b|"
     r"\bcallBoxed\b|\bfindSchema\w*|\btorch\s*::\s*Library\b",
     "`{}`: register ops only with REGISTER_BINDING; overriding or dispatching torch ops is not allowed"),
    ("library-kernel", r"\bthrust\s*::\s*\w+|\bcub\s*::\s*Device\w+",
     "`{}` launches library kernels; write the kernel (CUB block/warp primitives are fine)"),
    ("aten-compute-in-cpp", r"\busing\s+namespace\s+(?:::\s*)?(?:at|torch)\b(?!\s*::\s*indexing)|"
     r"\bnamespace\s+\w+\s*=\s*(?:::\s*)?(?:at|torch)\b",
     "`{}` hides at::/torch:: calls; name them in full"),
]]
_SKIP_QUAL = re.compile(r"getStreamFromPool|setCurrentCUDAStream|Library|Dispatcher|RegisterOperators")
_METHOD_CALL = re.compile(r"(?:\.|->)\s*(\w+)\s*(?:<[^<>;(){}]*>\s*)?\(")
_PLAIN_CALL = re.compile(_NOT_AFTER + r"(?<!::)\b(\w+)\s*\(")
_DECLARED = re.compile(r"\b(?!return\b|else\b|case\b|throw\b|new\b|delete\b)\w+[\s*&>]+(\w+)\s*\(")
_LIBM = frozenset("abs fabs exp exp2 expm1 log log2 log10 log1p sqrt cbrt pow sin cos tan asin acos atan atan2 "
                  "sinh cosh tanh asinh acosh atanh floor ceil round trunc fmod remainder min max erf erfc lgamma "
                  "tgamma hypot fmax fmin copysign nextafter frexp ldexp isnan isinf isfinite signbit clamp swap "
                  "sort empty empty_like empty_strided zeros zeros_like ones ones_like full full_like from_blob "
                  "numel is_tensor".split())


def _strip_cpp(text: str) -> tuple[str, str]:
    """(text without comments, text without comments or string contents): same offsets and lines."""
    def blank(s: str) -> str:
        return re.sub(r"[^\n]", " ", s)
    nc = _TOKENS.sub(lambda m: blank(m[0]) if m[0][0] == "/" else m[0], text)
    code = _TOKENS.sub(lambda m: blank(m[0]) if m[0][0] == "/" else m[0][0] + blank(m[0][1:-1]) + m[0][-1], text)
    return nc, code


def _include_problem(n: str, angle: bool, backend: str, local_files: frozenset[str] | None,
                     rules: str = DEFAULT_RULES) -> tuple[str, str] | None:
    """(rule, message) for one #include, or None when it is allowed."""
    from ..backends import backend_class

    be = backend_class(backend)
    name = f"<{n}>" if angle else f'"{n}"'
    if (n in _HEAVY or n.startswith("ATen/native/") or (n.startswith("ATen/ops/") and not _ALLOC_OPS.fullmatch(n))
            or (n.startswith("torch/") and n != "torch/library.h")):
        return "heavy-torch-include", (f"`#include {name}` pulls in the ATen compute API: include only "
                                       "\"binding_registry.h\" (allocation, checks, REGISTER_BINDING); "
                                       "torch/extension.h also costs ~40 s per build")
    if n.startswith(("ATen/", "c10/", "torch/")) or n == "binding_registry.h":
        return None
    if not angle and not n.startswith("/") and ".." not in Path(n).parts and (local_files is None or n in local_files):
        return None
    if angle and n in be.vendor_library_headers and not header_allowed(n, rules, backend):
        return "blas-fallback", (f"`#include {name}`: not allowed under the `{rules}` rules profile "
                                 f"({_VENDOR_SCOPE[rules]}); write the kernel")
    if angle and (n in _STD or n in be.runtime_headers or n.startswith(be.runtime_header_dirs)):
        return None
    why = "Thrust launches library kernels" if n.startswith("thrust/") else (
        "not a file in kernels/" if not angle else "not the standard library or CUDA's own headers")
    return "third-party-include", f"`#include {name}`: {why}; third-party libraries are not allowed"


@dataclass(frozen=True)
class Dialect:
    """What a language adds to the C++ rules: includes it allows that the rules would refuse
    (still counted as torch headers, so argument-dependent lookup into ATen is still caught),
    and patterns it refuses, matched with comments stripped and strings kept."""

    includes: re.Pattern[str] | None = None
    patterns: tuple[tuple[str, re.Pattern[str], str], ...] = ()  # (rule, pattern, message; {} = the match)


def check_kernel_source(text: str, filename: str, backend: str, *, local_files: frozenset[str] | None = None,
                        torch_visible: bool | None = None, dialect: Dialect = Dialect(),
                        rules: str = DEFAULT_RULES) -> list[Finding]:
    """Check one file from kernels/. `local_files`: names a quoted #include may use (None: any plain
    name); `torch_visible`: whether it is a binding or a header a binding includes (None: guess);
    `rules`: the rules profile deciding which cuBLAS / cuDNN calls are allowed (languages/vendor.py)."""
    check_rules(rules)
    nc, code = _strip_cpp(text)
    starts = [0] + [m.end() for m in re.finditer(r"\n", text)]
    found: list[Finding] = []

    def add(pos: int, rule: str, message: str) -> None:
        found.append(Finding(file=filename, line=bisect.bisect_right(starts, pos), rule=rule, message=message))
    heavy = torch_inc = False
    for m in _INCLUDE.finditer(nc):
        if m[3] is not None:
            add(m.start(), "third-party-include", f"`#include {m[3].strip()}`: computed includes cannot be checked")
            continue
        name = (m[1] or m[2]).strip()
        torch_inc |= name.startswith(("torch/", "ATen/", "c10/")) or name == "binding_registry.h"
        problem = _include_problem(name, bool(m[1]), backend, local_files, rules)
        if problem:
            heavy |= problem[0] == "heavy-torch-include"
            if not (dialect.includes and problem[0] in ("heavy-torch-include", "third-party-include")
                    and dialect.includes.match(name)):
                add(m.start(), *problem)
    if torch_visible is None:
        torch_visible = filename.endswith("_binding.cpp") or torch_inc
    for rule, rx, msg in _CPP_PATTERNS:
        for m in rx.finditer(code):
            add(m.start(), rule, msg.format(" ".join(m[0].split()).rstrip("( ")))
    for rule, rx, msg in dialect.patterns:
        for m in rx.finditer(nc):
            add(m.start(), rule, msg.format(m[0].strip()))
    for m in re.finditer(r"\.incbin\b", nc):
        add(m.start(), "io-in-kernel", "`.incbin` embeds a file from outside the sources")
    for m in _QUAL.finditer(code):
        parts = [p.strip() for p in m[2].split("::")]
        if _SKIP_QUAL.fullmatch(parts[-1]) or _qualified_ok(parts):
            continue
        add(m.start(), "aten-compute-in-cpp", f"`{m[1]}::{'::'.join(parts)}` is ATen compute: bindings may only "
            "allocate (empty, zeros, ...), check, and pass data_ptr()s, sizes and strides to your kernels")
    for m in re.finditer(r"\b(cublas\w*|cudnn\w*|cblas_\w+|mkl_\w+|openblas_\w+)\s*\(", code):
        if not vendor_allowed(m[1], rules, backend):
            add(m.start(), "blas-fallback", f"`{m[1]}` is a vendor math library call that the `{rules}` rules "
                f"profile does not allow ({_VENDOR_SCOPE[rules]}): the kernel must be written")
    for m in LT_EPILOGUE.finditer(code):
        add(m.start(), "blas-fallback", f"`{m[0]}`: cuBLASLt epilogues and output reductions (bias, activation, "
            "amax) are compute outside the GEMM; write them as your own kernel")
    if torch_visible:
        compute = _torch_facts()[0] - _CPP_SAFE
        for m in _METHOD_CALL.finditer(code):
            if m[1] in compute:
                add(m.start(), "aten-compute-in-cpp", f"`.{m[1]}(...)` is a computing Tensor method: bindings "
                    "may only allocate, check and pass pointers to your kernels")
    if heavy:
        declared = set(_DECLARED.findall(code))
        adl = _torch_facts()[2] - _LIBM - declared
        for m in _PLAIN_CALL.finditer(code):
            if m[1] in adl:
                add(m.start(), "aten-compute-in-cpp", f"`{m[1]}(...)` resolves to at::{m[1]} by argument-"
                    "dependent lookup: ATen compute in a binding")
    return _dedupe(found)


def _qualified_ok(parts: list[str]) -> bool:
    head = parts[0]
    if head in ("ScalarType", "MemoryFormat", "DeviceType", "Layout", "indexing") or re.fullmatch(r"k[A-Z]\w*", head):
        return True
    if head == "Tensor":
        return len(parts) == 1 or parts[1] in _CPP_SAFE
    if head == "cuda":
        return len(parts) >= 2 and parts[1] in _AT_CUDA_OK
    return len(parts) == 1 and head in _AT_OK


# ---- the workspace ------------------------------------------------------------------------
def check_workspace(root: Path, backend: str, extension_name: str, *,
                    disabled_rules: frozenset[str] = frozenset(), preprocess: bool = True,
                    cache_dir: Path | None = None, dialect: Dialect = Dialect(),
                    rules: str = DEFAULT_RULES) -> list[Finding]:
    """All findings for model_new.py and kernels/ (as written and as preprocessed), minus the
    rules switched off. `cache_dir`: the build cache holding the bindings' precompiled header;
    `rules`: the rules profile (`paper` / `strict`, languages/vendor.py)."""
    check_rules(rules)
    unknown = set(disabled_rules) - RULES.keys()
    if unknown:
        raise ValueError(f"unknown static-check rules: {sorted(unknown)} (known: {sorted(RULES)})")
    root = Path(root)
    real_root = root.resolve()
    kdir = root / "kernels"
    files = sorted(p for p in kdir.rglob("*") if p.is_file() or p.is_symlink()) if kdir.is_dir() else []
    found: list[Finding] = []
    for p in [root / "model_new.py", *files]:
        if p.is_symlink() and not p.resolve().is_relative_to(real_root):
            found.append(Finding(file=p.relative_to(root).as_posix(), line=1, rule="file-outside-workspace",
                                 message=f"{p.name} links to {os.readlink(p)}, outside the workspace"))
    model_new = root / "model_new.py"
    if model_new.is_file():
        found += check_model_new(model_new.read_text(errors="replace"), extension_name)
    sources = {p: p.read_text(errors="replace") for p in files if p.suffix in _CPP_EXTS and p.is_file()}
    visible = {p for p in sources if p.name.endswith("_binding.cpp")}
    todo = list(visible)
    while todo:  # headers a binding includes see ATen too
        p = todo.pop()
        for m in _INCLUDE.finditer(_strip_cpp(sources[p])[0]):
            q = (p.parent / m[2]) if m[2] else None
            if q in sources and q not in visible:
                visible.add(q)
                todo.append(q)
    for p, text in sources.items():
        local = frozenset(os.path.relpath(q, p.parent) for q in files)
        found += check_kernel_source(text, p.relative_to(root).as_posix(), backend, local_files=local,
                                     torch_visible=p in visible, dialect=dialect, rules=rules)
    if preprocess and sources:
        found += check_preprocessed(root, backend, cache_dir=cache_dir, rules=rules)
    return sorted((f for f in _dedupe(found) if f.rule not in disabled_rules), key=lambda f: (f.file, f.line))


def check_checked_bytes(root: Path, backend: str, extension_name: str, templates: Path, *,
                        disabled_rules: frozenset[str] = frozenset(), cache_dir: Path | None = None,
                        preprocess: bool = True, dialect: Dialect = Dialect(),
                        rules: str = DEFAULT_RULES) -> list[Finding]:
    """`check_workspace` on a snapshot of the workspace (`snapshot.py`), recorded as what the
    next build of this workspace must compile: the build refuses any other bytes."""
    from ..isolation.paths import default_cache_dir
    from .snapshot import SnapshotError, record_checked, take_snapshot

    cache = (cache_dir or default_cache_dir()).resolve()
    try:
        snap = take_snapshot(root, cache, templates)
    except SnapshotError as exc:
        found = [Finding(file=exc.file, line=1, rule=exc.rule, message=exc.message)]
        return [f for f in found if f.rule not in disabled_rules]
    found = check_workspace(snap.root, backend, extension_name, disabled_rules=disabled_rules,
                            preprocess=preprocess, cache_dir=cache, dialect=dialect, rules=rules)
    record_checked(root, snap)
    return found


def _dedupe(found: list[Finding]) -> list[Finding]:
    """One finding per file, line and rule: the first says enough."""
    seen: set[tuple] = set()
    out = []
    for f in found:
        k = (f.file, f.line, f.rule)
        if k not in seen:
            seen.add(k)
            out.append(f)
    return out


# ---- kernels/ after the real preprocessor ---------------------------------------------------
# The raw-source rules above read what was written; these read what the compiler will see, so a
# macro, token paste or system-header helper (`__CONCAT`) cannot hide a call. Only lines the
# line markers attribute to files in kernels/ are scanned (macro expansions land on the line
# that uses the macro); the same flags as the build are used, nvcc's own host-side preprocessing
# command for .cu files (taken from `nvcc --dryrun`; device code cannot call the OS), and the
# build's precompiled header for bindings (`-fpch-preprocess`: 70 ms instead of 650 ms).
_PP_NOT_MEMBER = r"(?<![\w.])(?<!->)"
_PP_PATTERNS: list[tuple[str, re.Pattern[str], str]] = [(rule, re.compile(rx), msg) for rule, rx, msg in [
    ("dynamic-loading", r"\b(?:dlopen|dlmopen|dlsym|dlvsym|dlinfo|_dl_\w+|__libc_dl\w+|cuGetProcAddress\w*"
     r"|cudaGetDriverEntryPoint\w*|cu(?:da)?GetExportTable|cuModuleLoad\w*|cuLibraryLoad\w*|cudaLibraryLoad\w*"
     r"|nvrtc\w+|nvJitLink\w+)\b", "looks up or loads code by name at run time"),
    ("raw-syscall", r"\b(?:syscall|__syscall\w*|__libc_syscall)\b", "makes raw system calls"),
    ("process-creation", _PP_NOT_MEMBER + r"\b(?:fork|vfork|_Fork|execl|execle|execlp|execv|execve|execvp|execvpe"
     r"|execveat|fexecve|posix_spawnp?|popen|system|wordexp|daemon|ptrace)\b", "starts or controls processes"),
    ("thread-creation", r"\b(?:pthread_create|thrd_create|cudaLaunchHostFunc|cudaStreamAddCallback)\b"
     r"|\bstd\s*::\s*(?:j?thread|async)\b", "starts threads or host callbacks"),
    ("blas-fallback", r"\b(?:cblas_\w+|cublas\w*|cudnn\w*|cusparse\w*|cusolver\w*|cufft\w*|mkl_\w+|openblas_\w+"
     r"|[sdcz](?:gemm|gemv|axpy|dot|scal|syrk|trsm|trmm|symm|ger)_)\b",
     "is a vendor math library (BLAS / cuBLAS / cuDNN / ...): write the kernel"),
    ("aten-compute-in-cpp", r"\bat\s*::\s*(?:native|cpu|_ops|compositeexplicitautograd\w*|compositeimplicitautograd\w*)"
     r"\s*::\s*\w+|\b(?:Dispatcher|OperatorHandle|callBoxed|findSchema\w*)\b|\btorch\s*::\s*Library\s*::\s*IMPL\b"
     r"|\bc10\s*::\s*impl\s*::\s*tls_\w+", "is ATen compute or the dispatcher"),
    ("inline-asm", r"^\s*#\s*pragma\s+(?:redefine_extname|weak)\b|\.symver\b", "renames or aliases a symbol"),
]]
_PP_ALLOC_OPS = re.compile(r"at\s*::\s*_ops\s*::\s*(?:empty\w*|zeros\w*|ones\w*|full\w*|contiguous)\b")
_PP_MARKER = re.compile(r'^#\s*(\d+)\s+"((?:\\.|[^"\\])*)"')
_PP_ASM = re.compile(r'\b(?:asm|__asm__|__asm)\b\s*(?:(?:volatile|__volatile__|goto|inline)\s*)*\(\s*'
                     r'((?:"(?:\\.|[^"\\])*"\s*)+)')
_PP_SYSCALL_ASM = re.compile(r"\b(?:syscall|sysenter|svc)\b|\bint\s*\$?\s*0x80\b|\.byte\b|\.incbin\b|\.symver\b")


def _own_lines(text: str, kdir: Path) -> dict[str, dict[int, list[str]]]:
    """{file in kernels/: {line: [preprocessed text]}} from `-E` output with line markers."""
    out: dict[str, dict[int, list[str]]] = {}
    cur, line, own = "", 0, False
    cache: dict[str, bool] = {}
    for raw in text.splitlines():
        m = _PP_MARKER.match(raw)
        if m:
            cur, line = m[2], int(m[1])
            if cur not in cache:
                p = Path(cur)
                cache[cur] = not cur.startswith("<") and p.resolve().is_relative_to(kdir)
            own = cache[cur]
            continue
        if own and raw.strip():
            out.setdefault(cur, {}).setdefault(line, []).append(raw)
        line += 1
    return out


def check_preprocessed(root: Path, backend: str, *, cache_dir: Path | None = None,
                       rules: str = DEFAULT_RULES) -> list[Finding]:
    """Findings in the preprocessed text of every translation unit in kernels/: the snapshot the
    build compiles (`root` itself when it is one), each unit through `build.unit_command` run by
    `build.run_confined`: the build's own command, working directory, include paths and
    confinement, so `__has_include` and friends show the scan exactly what the build sees."""
    import tempfile
    import time
    from concurrent.futures import ThreadPoolExecutor

    from ..backends import get_backend
    from ..isolation.paths import default_cache_dir
    from .base import TEMPLATES_DIR
    from .build import BuildError, Layout, _plan_units, ensure_pch, run_confined, unit_command
    from .snapshot import SnapshotError, take_snapshot

    be = get_backend(backend)
    cache = (cache_dir or default_cache_dir()).resolve()
    try:
        snap = take_snapshot(root, cache, TEMPLATES_DIR)
    except SnapshotError:
        return []  # reported by the workspace check and refused by the build
    if not snap.kernels.is_dir():
        return []
    layout = Layout()
    try:
        units = [u for u in _plan_units(snap, be, layout, strict=False) if u.kind != "fixed"]
    except BuildError:
        return []  # the build refuses it, with the reason
    try:
        pch_dir: Path | None = ensure_pch(be, cache, time.monotonic() + 300)
    except (BuildError, OSError):
        pch_dir = None
    cmds = [(u, c) for u in units for c in unit_command(u, be, layout, pch_dir, snap, None)]
    (cache / "tmp").mkdir(parents=True, exist_ok=True)

    def run(item: tuple) -> tuple[Path, str]:
        unit, cmd = item
        with tempfile.TemporaryDirectory(dir=cache / "tmp") as tmp:
            out = Path(tmp) / "pp.ii"
            try:
                run_confined(cmd, time.monotonic() + 120, snap, Path(tmp), stdout_to=out,
                             reads=[*unit.reads, *([pch_dir] if pch_dir else [])])
            except BuildError:
                return unit.source, ""  # a failure fails the build too
            return unit.source, out.read_text(errors="replace")

    found: list[Finding] = []
    with ThreadPoolExecutor(min(4, max(1, len(cmds)))) as pool:
        outputs = list(pool.map(run, cmds))
    kdir = snap.kernels.resolve()
    for unit, text in outputs:
        host = not be.device_source(unit)
        for fname, lines in _own_lines(text, kdir).items():
            rel = Path(fname).resolve().relative_to(snap.root.resolve()).as_posix()
            for line, chunks in lines.items():
                found += _scan_pp_line("\n".join(chunks), rel, line, host, rules=rules, backend=backend)
    return _dedupe(found)


def _scan_pp_line(text: str, rel: str, line: int, host: bool, *, backend: str,
                  rules: str = DEFAULT_RULES) -> list[Finding]:
    out = []
    for m in _PP_ASM.finditer(text):
        template = "".join(bytes(s, "utf-8").decode("unicode_escape", "replace")
                           for s in re.findall(r'"((?:\\.|[^"\\])*)"', m[1]))
        if _PP_SYSCALL_ASM.search(template):
            out.append(Finding(file=rel, line=line, rule="raw-syscall",
                               message=f"inline asm `{template.strip()[:40]}` talks to the OS or emits raw bytes"))
        elif template.strip() and (host or re.fullmatch(r"\s*[A-Za-z_.$][\w.$@]*\s*", template)):
            out.append(Finding(file=rel, line=line, rule="inline-asm",
                               message=f"inline asm `{template.strip()[:40]}` in host code (or an asm label "
                               "renaming a symbol): only empty compiler barriers are allowed there"))
    _, code = _strip_cpp(text)
    for rule, rx, why in _PP_PATTERNS:
        for m in rx.finditer(text if rule == "inline-asm" else code):
            if rule == "aten-compute-in-cpp" and _PP_ALLOC_OPS.match(m[0]):
                continue
            if rule == "blas-fallback" and vendor_allowed(m[0], rules, backend):
                continue
            out.append(Finding(file=rel, line=line, rule=rule,
                               message=f"`{' '.join(m[0].split())}` (after preprocessing) {why}"))
    for m in LT_EPILOGUE.finditer(code):
        out.append(Finding(file=rel, line=line, rule="blas-fallback",
                           message=f"`{m[0]}` (after preprocessing): a cuBLASLt epilogue or output reduction is "
                                   "compute outside the GEMM"))
    return out
