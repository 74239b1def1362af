"""A norm's backward as a module: torch autograd's vector-Jacobian products, named d_x, d_weight, …, and torch's
joint graph of it, which torch.export takes."""
import torch

from harness.oracle.backward import Backward, floating_parameters, gradient_names, joint_graph


def _layer_norm():
    torch.manual_seed(0)
    module = torch.nn.LayerNorm(16)
    with torch.no_grad():
        module.weight.normal_()
        module.bias.normal_()
    return module


def test_backward_gives_each_inputs_then_each_parameters_gradient():
    module = _layer_norm()
    x, dy = torch.randn(4, 16), torch.randn(4, 16)
    d_x, d_weight, d_bias = Backward(module, 1)(x, dy)
    leaf = x.clone().requires_grad_(True)
    expected = torch.autograd.grad(module(leaf), (leaf, module.weight, module.bias), dy)
    assert all(torch.equal(a, b) for a, b in zip((d_x, d_weight, d_bias), expected))
    assert gradient_names(("x",), module) == ("d_x", "d_weight", "d_bias")
    assert [n for n, _ in floating_parameters(module)] == ["weight", "bias"]


def test_an_input_the_output_does_not_read_has_a_zero_gradient():
    class First(torch.nn.Module):
        def forward(self, x, r):
            return torch.nn.functional.layer_norm(x, (16,))

    x, r, dy = torch.randn(2, 16), torch.randn(2, 16), torch.randn(2, 16)
    d_x, d_r = Backward(First(), 2)(x, r, dy)
    assert torch.count_nonzero(d_r) == 0 and torch.count_nonzero(d_x) > 0


def test_the_joint_graph_holds_torchs_backward_kernel_and_exports():
    module = _layer_norm().half()
    example = (torch.randn(4, 16).half(), torch.randn(4, 16).half())
    graph = joint_graph(Backward(module, 1), example)
    targets = {str(n.target) for n in graph.graph.nodes if n.op == "call_function"}
    assert "aten.native_layer_norm_backward.default" in targets
    exported = torch.export.export(graph, example)
    assert all(torch.equal(a, b) for a, b in zip(exported.module()(*example), Backward(module, 1)(*example)))
