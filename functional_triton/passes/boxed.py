"""Run a compiled graph in AOTAutograd's boxed calling convention, freeing inputs at last use.

Note [freeing graph inputs]
AOTAutograd calls a compiled graph with one list of arguments (``_boxed_call``) so that the
graph can drop each input as soon as it is dead: a backward graph's inputs are the tensors
saved in the forward, and eager autograd frees each node's saved tensors right after that
node's backward. ``make_boxed_func(gm.forward)`` unpacks the list into a call, so the list and
the call's arguments hold every input until the whole graph returns: a backward graph then
keeps every saved activation alive while it allocates every gradient, a higher peak than
eager's. FX's generated code already sets each value to ``None`` after its last use; here the
generated function takes the list itself and empties it before the body runs, so those
``None`` assignments release the inputs too. The code runs in a copy of the graph module,
so the caller's ``gm`` keeps its usual signature.

Note [direct operator calls]
FX writes an aten call as ``torch.ops.aten.mm.default(a, b)``: four attribute loads, then
``OpOverload.__call__``, a Python frame whose body is ``self._op(*args, **kwargs)``. In a replayed
graph that frame is most of the difference between a graph's op and the same op called eagerly
(on the CPU host, ~2.1 us against ~1.5 us for the C++ callable and ~1.2 us for ``torch.add``), and a
training step's graphs call hundreds of them. The code that runs here names the C++ callable
(``_compat.direct_operator_call``) as a global instead, for every ``OpOverload`` whose ``__call__``
does nothing else; the dispatcher, and with it every mode and subclass, sees the same call.
The views and matrix products that make up most of a training graph's calls (``view``, ``t``,
``transpose``, ``mm``; Liger's decoder block: 148 of 192) take their Python binding instead
(``Tensor.view``, ``torch.mm``; ``_compat.python_binding``; ``torch.empty_like`` too), which parses
its arguments in generated C++, ~0.4 us less per call (~0.9 us for ``empty_like``'s keywords):
the same overload reaches the dispatcher (only a ``__torch_function__`` mode or override is
handed the binding as ``func``, as for eager code). An op whose calls pass a keyword that the
binding does not share keeps its own callable.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from torch import fx

from .._compat import direct_operator_call, graph_uses_plain_codegen, python_binding

_OPERATOR_CALL = re.compile(r"\btorch\.ops\.(\w+\.\w+\.\w+)\(")


class _BoxedCodeGen(fx.CodeGen):
    """FX code whose ``forward(self, args_list)`` unpacks and clears its argument list."""

    def gen_fn_def(self, free_vars: list[str], maybe_return_annotation: str, *_: Any, **__: Any) -> str:
        names = [v.split(":")[0].split("=")[0].strip() for v in free_vars if v != "self"]
        lines = [f"def forward(self, args_list){maybe_return_annotation}:"]
        if names:
            lines.append(f"    {', '.join(names)}, = args_list")
        lines.append("    args_list.clear()")
        return "\n".join(lines)

    def _gen_python_code(self, nodes: Any, *args: Any, **kwargs: Any) -> Any:
        nodes = list(nodes)  # (an iterator on some torch versions)
        code = super()._gen_python_code(nodes, *args, **kwargs)
        direct: dict[str, str] = {}  # Note [direct operator calls]
        calls: dict[str, list[fx.Node]] = {}
        for node in nodes:
            if node.op == "call_function":
                calls.setdefault(str(node.target), []).append(node)
        for target, of_target in calls.items():
            op = of_target[0].target
            call = python_binding(op)
            if call is None or any(python_binding(op, n.kwargs) is None for n in of_target):
                call = direct_operator_call(op)
            if call is None:
                continue
            name = base = f"_op_{target.replace('.', '_')}"
            suffix = 0
            while name in code.globals or re.search(rf"\b{name}\b", code.src):  # a fresh name
                suffix += 1
                name = f"{base}_{suffix}"
            direct[target] = name
            code.globals[name] = call

        def named(match: re.Match[str]) -> str:
            name = direct.get(match.group(1))
            return match.group(0) if name is None else name + "("

        if direct:
            code.src = _OPERATOR_CALL.sub(named, code.src)
        return code


def boxed_freeing_inputs(
    gm: fx.GraphModule, rewrite: Callable[[fx.GraphModule], None] | None = None
) -> Callable[[list[Any]], Any]:
    """A ``_boxed_call`` function running ``gm`` that frees each input after its last use.

    ``rewrite`` changes the copy that runs (never ``gm``) before its code is generated.
    """
    if not graph_uses_plain_codegen(gm):
        from functorch.compile import make_boxed_func

        return make_boxed_func(gm.forward)  # type: ignore[no-any-return]
    graph = fx.Graph()
    graph.output(graph.graph_copy(gm.graph, {}))
    graph.set_codegen(_BoxedCodeGen())
    runs = fx.GraphModule(gm, graph)  # gm itself keeps its own calling convention
    if rewrite is not None:
        rewrite(runs)
    forward = runs.forward

    def run(args: list[Any]) -> Any:
        return forward(args)

    run._boxed_call = True  # type: ignore[attr-defined]
    return run
