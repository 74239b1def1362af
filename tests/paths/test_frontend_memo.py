"""The frontend memo gives each compile what torch would have built: the same CIA ops, decompositions,
ONNX registry and ONNX bytes, memo on and off; a custom op registered after the memo has seen the
registrations is still found; each export gets its own registry; a kept py_impl decorator registers
and refuses as a fresh one; uninstalling gives torch back every function it replaced.

Run in a fresh interpreter: the memo changes torch's module state, which the
other tests in this worker should not see.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import saved_build

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("onnxruntime")]

SCRIPT = r'''
import json, logging
import torch
from torch._export import utils
from torch.onnx._internal.exporter import _registration
from harness.paths import _frontend_memo as memo
logging.disable(logging.WARNING)

class Norm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.linspace(0.5, 1.5, 16, dtype=torch.float16))
    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.weight * h.to(x.dtype)

x = torch.randn(2, 16, dtype=torch.float16)
ep = torch.export.export(Norm(), (x,))

def built():
    """What a compile gets: the CIA ops, the decomposed program, the ONNX registry and model."""
    registry = _registration.ONNXRegistry.from_torchlib()
    onnx_bytes = torch.onnx.export(ep, (x,), dynamo=True, verbose=False).model_proto.SerializeToString()
    return {"cia": sorted(str(op) for op in utils._collect_all_valid_cia_ops()),
            "decomposed": ep.run_decompositions().graph_module.code,
            "registry": {str(k): [m.onnx_function.name if hasattr(m.onnx_function, "name") else str(m.onnx_function)
                                  for m in v] for k, v in registry.functions.items()},
            "onnx": onnx_bytes.hex()}

off = built()
memo.install()
assert memo.installed()
on_first, on_again = built(), built()

# A CompositeImplicitAutograd op registered after the memo has walked the registrations.
lib = torch.library.Library("normdiff_memo_test", "DEF")
lib.define("twice(Tensor x) -> Tensor")
lib.impl("twice", lambda t: t * 2, "CompositeImplicitAutograd")
found_new = any("normdiff_memo_test" in str(op) for op in utils._collect_all_valid_cia_ops())

one, two = _registration.ONNXRegistry.from_torchlib(), _registration.ONNXRegistry.from_torchlib()
one.register_op(torch.ops.aten.add.Tensor, lambda a, b: a)
own_copies = one is not two and len(two.get_decomps(torch.ops.aten.add.Tensor)) == len(
    _registration.ONNXRegistry.from_torchlib().get_decomps(torch.ops.aten.add.Tensor)) and (
    len(one.get_decomps(torch.ops.aten.add.Tensor)) == len(two.get_decomps(torch.ops.aten.add.Tensor)) + 1)
# py_impl: one decorator per op and key, registering (and refusing a second registration) as a fresh one
from torch._C import DispatchKey
from torch._ops import OperatorBase
op, key = torch.ops.aten.linear.default, DispatchKey.AutogradCPU
kept = op.py_impl(key) is op.py_impl(key) and op.py_impl(key) is not torch.ops.aten.addmm.default.py_impl(key)
mark = lambda *args: None
registered = op.py_impl(key)(mark) is mark and op.py_kernels[key] is mark
try:
    op.py_impl(key)(mark)
    refused = False
except RuntimeError:
    refused = True
del op.py_kernels[key]
op._dispatch_cache.clear()
memo.uninstall()
from torch.export import decomp_utils, exported_program
given_back = (not hasattr(OperatorBase.py_impl, "__wrapped__") and utils._materialize_cpp_cia_ops.__module__ ==
              "torch._export.utils" and all(m._collect_all_valid_cia_ops.__module__ == "torch._export.utils"
                                            for m in (utils, decomp_utils, exported_program)))
print(json.dumps({k: {"first": on_first[k] == off[k], "again": on_again[k] == off[k]} for k in off}
                 | {"found_new": found_new, "own_copies": own_copies, "n_cia": len(off["cia"]),
                    "n_registry": len(off["registry"]), "uninstalled": not memo.installed() and given_back,
                    "py_impl": {"kept": kept, "registered": registered, "refused": refused}}))
'''


def test_the_memo_changes_nothing_a_compile_gets():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    for table in ("cia", "decomposed", "registry", "onnx"):
        assert got[table] == {"first": True, "again": True}, (table, got)
    assert got["n_cia"] > 100 and got["n_registry"] > 100  # real tables, not two empty ones
    assert got["found_new"], "a CIA op registered later was missed"
    assert got["own_copies"], "registries share state between exports"
    assert got["uninstalled"]
    assert got["py_impl"] == {"kept": True, "registered": True, "refused": True}, got["py_impl"]


def test_the_memo_stays_off_when_asked(monkeypatch):
    from harness.paths import _frontend_memo as memo

    monkeypatch.setenv(memo.ENV, "0")
    assert not memo.enabled()
    memo.install()
    assert not memo.installed()


def test_compiling_paths_install_it_in_their_workers():
    from harness import paths
    from harness.engine.warm import warm_modules
    from harness.paths.base import FRONTEND_MEMO, ONNX_REGISTRY_MEMO

    for name in ("tvm", "tvm-decompose", "executorch", "executorch-xnnpack", "executorch-recompose",
                 "onnxruntime", "onnxruntime-fused"):
        assert FRONTEND_MEMO in paths.get(name).warm_imports, name
        assert (ONNX_REGISTRY_MEMO in paths.get(name).warm_imports) == name.startswith("onnxruntime"), name
    assert FRONTEND_MEMO in warm_modules(["tvm"], compiling=["tvm"])
    assert FRONTEND_MEMO not in warm_modules(["tvm"], compiling=[])  # a warm run compiles nothing


# -- shared_provenance: the ExecuTorch compiles' NodeSource histories -----------------------------------------

ET_COMPILING = ("executorch-xnnpack", "executorch", "executorch-recompose", "executorch-recompose-no-dim-order")


def _histories(graph_module) -> list:
    """Every node's provenance (its from_node NodeSources as dicts, graph ids, which are id()s of graphs, left
    out), the delegates' graphs' nodes included."""
    def plain(source: dict) -> dict:
        return {k: [plain(s) for s in v] if k == "from_node" else v for k, v in source.items() if k != "graph_id"}

    found = []
    for node in graph_module.graph.nodes:
        found.append((node.name, [plain(s.to_dict()) for s in node.meta.get("from_node", [])]))
        if node.op == "get_attr" and hasattr(getattr(graph_module, node.target, None), "original_module"):
            found.append(_histories(getattr(graph_module, node.target).original_module.graph_module))
    return found


@pytest.mark.parametrize("grad", [False, True], ids=["forward", "gradient"])
def test_shared_provenance_builds_what_copied_histories_build(monkeypatch, grad):
    """The ExecuTorch paths compile inside shared_provenance(): the same .pte, saved edge program and facts as
    with every history deep-copied (the memo off), and XNNPACK's lowered program carries the same histories
    node for node, its delegates' graphs included."""
    pytest.importorskip("executorch")
    from harness import paths
    from harness.engine.cases import Cases
    from harness.engine.exports import ExportMemo
    from harness.paths._executorch_common import pte_program
    from harness.paths._frontend_memo import ENV, shared_provenance
    from harness.paths.executorch_xnnpack import xnnpack_lowered
    from harness.spec import CaseSpec

    spec = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float16", "shape": [4, 64],
                               "params": {"kind": "normal"}, **({"grad": True} if grad else {})})
    module, example = Cases().setup(spec).build()
    ep = ExportMemo().get(spec, module, example)
    built = {}
    for memo in ("0", "1"):
        monkeypatch.setenv(ENV, memo)
        for name in ET_COMPILING:
            prepared = paths.get(name).prepare(spec, module, example, exported=ep)
            built[memo, name] = (prepared.facts, saved_build(prepared.built))
        with shared_provenance():
            edge = xnnpack_lowered(ep)
            built[memo, "histories"] = _histories(edge.exported_program().graph_module)
            built[memo, "pte"] = bytes(pte_program(edge).buffer)
    for name in ET_COMPILING + ("histories", "pte"):
        assert built["0", name] == built["1", name], name
    assert sum(1 for entry in built["1", "histories"] if isinstance(entry, tuple) and entry[1]) > 3  # real histories


def test_shared_provenance_hands_out_a_node_source_itself_only_inside(monkeypatch):
    import copy

    import torch
    from torch.fx.traceback import NodeSource, NodeSourceAction

    from harness.paths._frontend_memo import ENV, shared_provenance

    graph = torch.fx.Graph()
    node = graph.placeholder("x")
    node.meta["from_node"] = [NodeSource(None, "export", NodeSourceAction.CREATE)]
    made = NodeSource(node, "a_pass", NodeSourceAction.CREATE)
    with shared_provenance():
        with shared_provenance():  # nested: the inner one leaves it to the outer
            assert copy.deepcopy(made) is made
        assert copy.deepcopy(made) is made
        again = NodeSource(node, "a_pass", NodeSourceAction.CREATE)
        assert again == made and again.from_node[0] is node.meta["from_node"][0]
    assert "__deepcopy__" not in vars(NodeSource)
    copied = copy.deepcopy(made)
    assert copied is not made and copied == made and copied.from_node[0] is not made.from_node[0]
    monkeypatch.setenv(ENV, "0")
    with shared_provenance():
        assert copy.deepcopy(made) is not made
