"""Repro-script code that reads a path's intermediates, for the script's stage table (README, "Attribution").

Standalone text (torch, numpy, ml_dtypes and the path's library only), as
each path's `script_code` is; it repeats what harness/attribution/relax.py
and fx.py do when normdiff attributes a failing execution, so the script's
table is the record's. A path's script defines
`intermediates(model, example, x)` -> ([(name, op, dtype, array)], index of
the one the graph returns, the re-run's output) from these.
"""
from __future__ import annotations

import inspect
from string import Template


# Real code: attribution (relax.py) calls it, and a repro script gets it pasted by its source.
def returned_var(func):
    """The tensor variable a Relax `func` returns (through the importer's one-element tuple), or None."""
    from tvm import relax

    bound = {b.var: b.value for block in func.body.blocks for b in block.bindings}
    expr = func.body.body
    for _ in range(len(bound) + 1):
        if isinstance(expr, relax.Tuple) and len(expr.fields) == 1:
            expr = expr.fields[0]
        elif isinstance(expr, relax.Var) and isinstance(bound.get(expr), (relax.Tuple, relax.Var)):
            expr = bound[expr]
        else:
            break
    return expr if isinstance(expr, relax.Var) else None


_RELAX = Template('''\
def intermediates(model, example, x):
    """Every binding of main returned as an extra output, recompiled as run_path compiles, run once."""
    ep = torch.export.export(model, example)
    mod = from_exported_program(ep, keep_params_as_input=False)
$decompose    flat = relax.transform.ToNonDataflow()(mod)
    func = flat["main"]
    found = []
    for block in func.body.blocks:
        for b in block.bindings:
            if (isinstance(b.value, relax.Call) and isinstance(b.value.op, tvm.ir.Op)
                    and isinstance(b.var.ty, relax.TensorType)):
                found.append((b.var, str(b.value.op.name)))
    returned = returned_var(func)
    body = relax.SeqExpr(func.body.blocks, relax.Tuple([func.body.body, *(v for v, _ in found)]))
    flat["main"] = relax.Function(func.params, relax.BlockBuilder().normalize(body), is_pure=True, attrs=func.attrs)
    exposed = relax.transform.ConvertToDataflow()(relax.transform.Normalize()(flat))
    with tvm.transform.PassContext(opt_level=3):
        executable = tvm.compile(exposed, target="llvm")
    vm = relax.VirtualMachine(executable, tvm.cpu())
    result = list(vm["main"](*(tvm.runtime.tensor(np.ascontiguousarray(a), tvm.cpu()) for a in x)))

    def array(t):
        a = t.numpy()
        if str(t.dtype) == "bfloat16" and a.dtype != np.dtype(ml_dtypes.bfloat16):
            a = a.view(np.uint16).view(ml_dtypes.bfloat16)
        return a

    rerun = result[0]
    while not isinstance(rerun, tvm.runtime.Tensor):
        (rerun,) = list(rerun)
    items = [(v.name, op, str(t.dtype), array(t)) for (v, op), t in zip(found, result[1:])]
    output = next((i for i, (v, _) in enumerate(found) if returned is not None and v.same_as(returned)), None)
    return items, output, array(rerun)
''')

FX_INTERMEDIATES = '''\
def fx_intermediates(graph_module, example):
    """Run an FX graph module node by node (torch.fx.Interpreter: the same ops), keeping every node's value.

    A whole norm node keeps its statistics inside its kernel: they are read
    from the kernel entry that also returns them (native_layer_norm,
    _fused_rms_norm, native_group_norm) when its output is the node's bit for
    bit; statistics it returns rounded to float16/bfloat16 are not kept.
    """
    aten = torch.ops.aten
    found, index = [], {}

    def short(op):
        parts = op.split(".")
        return parts[1] if len(parts) > 2 else parts[-1]

    def op_name(target):
        inner = getattr(target, "_op", target)
        return str(inner) if isinstance(inner, torch._ops.OpOverload) else getattr(target, "__name__", str(target))

    def add(name, op, t):
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            index.setdefault(name, len(found))
            found.append((name, op, str(t.dtype).replace("torch.", ""), to_numpy(t)))

    def items(name, op, kernel, values):
        labels = {"native_layer_norm": ("mean", "rsqrt"), "native_group_norm": ("mean", "rsqrt"),
                  "_fused_rms_norm": ("rsqrt",), "var_mean": ("mean",)}.get(kernel, ())
        for i, t in enumerate(values):
            if i and kernel != "var_mean" and labels and getattr(t, "dtype", None) in (torch.float16, torch.bfloat16):
                continue  # float32 statistics rounded for returning: not what the kernel used
            add(f"{name}[{i}]", op if i == 0 else (f"{op}#{labels[i - 1]}" if i - 1 < len(labels) else f"{op}#{i}"), t)

    def stats(op, args):
        s = short(op)
        if s == "layer_norm":
            xx, shape, w, b, eps = (list(args) + [None, None, 1e-5])[:5]
            return "native_layer_norm", aten.native_layer_norm.default(xx, shape, w, b, eps)
        if s == "rms_norm":
            xx, shape, w, eps = (list(args) + [None, None])[:4]
            return "_fused_rms_norm", aten._fused_rms_norm.default(xx, shape, w, eps)
        if s == "group_norm":
            xx, g, w, b, eps = (list(args) + [None, None, 1e-5])[:5]
            return "native_group_norm", aten.native_group_norm.default(xx, w, b, xx.shape[0], xx.shape[1],
                                                                       xx[0, 0].numel(), g, eps)
        return None

    class Recorder(torch.fx.Interpreter):
        def run_node(self, node):
            result = super().run_node(node)
            if node.op != "call_function":
                return result
            if getattr(node.target, "__name__", "") == "getitem":  # operator.getitem: a tuple item
                key = f"{node.args[0].name}[{node.args[1]}]"
                if key in index:
                    index[node.name] = index[key]
                return result
            op = op_name(node.target)
            if isinstance(result, (tuple, list)):
                items(node.name, op, short(op), list(result))
                return result
            add(node.name, op, result)
            args, kwargs = self.fetch_args_kwargs_from_env(node)
            full = None if kwargs else stats(op, args)
            if full is not None and torch.equal(full[1][0], result):
                items(node.name, f"aten.{full[0]}.default", full[0], [None, *full[1][1:]])
            return result

    with torch.no_grad():
        rerun = Recorder(graph_module).run(*example)
    rerun = single(rerun)
    out_node = next(n for n in graph_module.graph.nodes if n.op == "output").args[0]
    out_node = single(out_node)
    name = getattr(out_node, "name", None)
    output = index.get(name, index.get(f"{name}[0]"))
    return found, output, to_numpy(rerun)
'''


def relax_intermediates(decompose: str) -> str:
    """The TVM paths' `intermediates`: `decompose` is the relax.transform pass applied before compile ("" none)."""
    line = f"    mod = relax.transform.{decompose}()(mod)\n" if decompose else ""
    return inspect.getsource(returned_var) + "\n\n" + _RELAX.substitute(decompose=line)
