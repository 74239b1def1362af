"""The catalog's styles, each defined once, as its program (docs/contracts.md §7: "the catalog's styles are programs too").

Each text is its model's code line for line: `qwen` transformers'
Qwen2RMSNorm, `llama` Meta's reference RMSNorm, `t5` T5LayerNorm, `gemma`
Gemma's RMSNorm, `upcast` open_clip's LayerNormFp32, `manual` mean and
variance written out (as ConvNeXt's channels-first LayerNorm), `module`
F.layer_norm / F.rms_norm as torch's nn.LayerNorm / nn.RMSNorm call them.
The classes' Python branches (affine, T5's weight-dtype test, the cast
style) are resolved when the text is generated, since programs have no `if`.
Everything else is rendered from these texts: the case's torch module
(harness.oracle.modules), its program twin, its attribution stages and its
repro script's model; tests/oracle/test_modules.py checks each style bit for
bit against a verbatim copy of its upstream class.
"""
from __future__ import annotations

STYLE_CASTS = {"upcast": "float", "manual": None, "qwen": "to", "llama": "type_as", "t5": "to",
               "gemma": "type_as", "module": None}
STYLE_PATTERNS = {"upcast": "layer_norm", "manual": "layer_norm", "qwen": "rms_norm", "llama": "rms_norm",
                  "t5": "rms_norm", "gemma": "rms_norm"}
CASTS = ("to", "float", "type_as", "to_contiguous")
# The model each style is, in a few words (repro scripts say it).
STYLE_MODELS = {"qwen": "transformers' Qwen2RMSNorm", "llama": "Meta's reference Llama RMSNorm",
                "t5": "transformers' T5LayerNorm", "gemma": "transformers' GemmaRMSNorm",
                "upcast": "open_clip's LayerNormFp32", "manual": "mean and variance written out in the input dtype",
                "module": "torch's nn.LayerNorm / nn.RMSNorm"}
# What the model calls its input, where not `x` (torch.export keeps the name as the graph's input).
STYLE_INPUTS = {("layer_norm", "module"): "input", ("rms_norm", "t5"): "hidden_states"}
_METHOD = {"float16": "half", "bfloat16": "bfloat16", "float32": "float"}
_CONTIGUOUS = ", memory_format=torch.contiguous_format"


def upcast(expr: str, how: str) -> str:
    """`expr` to float32, spelled the cast style's way (`to_contiguous`: also to the contiguous format)."""
    if how == "to":
        return f"{expr}.to(torch.float32)"
    if how == "to_contiguous":
        return f"{expr}.to(torch.float32{_CONTIGUOUS})"
    return f"{expr}.float()"


def cast_back(expr: str, like: str, dtype: str, how: str) -> str:
    """`expr` back to `dtype` (the dtype of tensor `like`), spelled the cast style's way."""
    if how == "type_as":
        return f"{expr}.type_as({like})"
    if how == "to_contiguous":
        return f"{expr}.to({like}.dtype{_CONTIGUOUS})"
    if how == "float":
        return f"{expr}.{_METHOD[dtype]}()"
    return f"{expr}.to({like}.dtype)"


def _paren(expr: str) -> str:
    return expr if expr.isidentifier() else f"({expr})"


def style_program(pattern: str, style: str, cast: str | None = None, affine: str | None = None,
                  x_dtype: str = "float32", weight_dtype: str | None = None) -> str:
    """The program text of a catalog style (cast None: the style's own; affine None: the pattern's default)."""
    weight_dtype = weight_dtype or x_dtype
    if style != "module" and STYLE_PATTERNS.get(style) != pattern:
        raise ValueError(f"style {style!r} is not a {pattern} style")
    if style == "module" and pattern not in ("layer_norm", "rms_norm"):
        raise ValueError(f"no program for the {pattern} module (it needs the case's groups or running stats)")
    affine = affine or ("weight" if pattern == "rms_norm" else "weight_bias")
    if pattern == "rms_norm" and affine == "weight_bias":
        raise ValueError("rms_norm has no bias; use 'none' or 'weight'")
    cast = cast or STYLE_CASTS[style]
    if cast is not None and cast not in CASTS:
        raise ValueError(f"cast {cast!r} is not one of {CASTS}")
    has_w, has_b = affine != "none", affine == "weight_bias"
    up = lambda e: upcast(e, cast)
    back = lambda e, like, dt: cast_back(_paren(e), like, dt, cast)
    if style == "module":
        w, b = ("w" if has_w else "None"), ("b" if has_b else "None")
        if pattern == "layer_norm":
            return f"return F.layer_norm(x, (x.shape[-1],), {w}, {b}, eps)"
        return f"return F.rms_norm(x, (x.shape[-1],), {w}, eps)"
    if style == "upcast":  # the parameters are upcast first, as the model code does
        lines = ([f"weight = {up('w')}"] if has_w else []) + ([f"bias = {up('b')}"] if has_b else [])
        w, b = ("weight" if has_w else "None"), ("bias" if has_b else "None")
        return "\n".join(lines + [f"h = F.layer_norm({up('x')}, (x.shape[-1],), {w}, {b}, eps)",
                                   f"return {back('h', 'x', x_dtype)}"])
    if style == "manual":
        lines = ["mean = x.mean(-1, keepdim=True)",
                 "var = ((x - mean) ** 2).mean(-1, keepdim=True)",
                 "h = (x - mean) / torch.sqrt(var + eps)"]
        out = "h" + (" * w" if has_w else "") + (" + b" if has_b else "")
        return "\n".join(lines + [f"return {out}"])
    if style == "qwen":
        lines = [f"h = {up('x')}",
                 "v = h.pow(2).mean(-1, keepdim=True)",
                 "h = h * torch.rsqrt(v + eps)"]
        out = back("h", "x", x_dtype)
        return "\n".join(lines + [f"return w * {out}" if has_w else f"return {out}"])
    if style == "llama":
        lines = [f"h = {up('x')}",
                 "h = h * torch.rsqrt((h * h).mean(-1, keepdim=True) + eps)",
                 f"out = {back('h', 'x', x_dtype)}"]
        return "\n".join(lines + ["return out * w" if has_w else "return out"])
    if style == "t5":
        lines = [f"v = {up('x')}.pow(2).mean(-1, keepdim=True)",
                 "h = x * torch.rsqrt(v + eps)"]
        if not has_w:
            return "\n".join(lines + ["return h"])
        if weight_dtype in ("float16", "bfloat16"):
            lines.append(f"h = {back('h', 'w', weight_dtype)}")
        return "\n".join(lines + ["return w * h"])
    # gemma
    lines = [f"h = {up('x')}",
             "h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)"]
    if has_w:
        lines.append(f"h = h * (1.0 + {up('w')})")
    return "\n".join(lines + [f"return {back('h', 'x', x_dtype)}"])
