"""The vocabulary of the program language (docs/contracts.md §7): every name, call and keyword it allows.

A whitelist: parse.py accepts exactly what these tables list and names
anything else in its error (the label tables give the construct's name).
The ops themselves (their spellings) come from the op table, ops.py.
"""
import ast

from harness.program import ops
from harness.program.ir import RESERVED_NAMES

MAX_SOURCE = 20_000  # characters
MAX_DEPTH = 100  # nesting of expressions: every walker recurses on it
MAX_OUTPUTS = 8  # the values one `return` may give (each output gets its own reference, bound and score)
RESERVED = RESERVED_NAMES
DTYPE_ATTRS = {"torch.float32": "float32", "torch.float16": "float16", "torch.bfloat16": "bfloat16"}
CONTIGUOUS = "torch.contiguous_format"
UNARY = ops.UNARY
REDUCE = ops.REDUCE
SHAPE = tuple(n for n in ops.SHAPE if n != "index")
CALL = ops.CALL
CASTS = {"float": "float32", "half": "float16", "bfloat16": "bfloat16"}
# t.NAME(...) methods and torch.NAME(...) functions, by the op each spells
METHODS = frozenset(tuple(o.name for o in ops.TABLE if o.method) + tuple(CASTS) + ("to", "type_as", "pow"))
FUNCTIONS = {f: o.name for o in ops.TABLE for f in o.functions if not f.startswith("nn.functional.")}
FUNCTIONS["pow"] = "pow"
# torch.nn.functional.NAME (also F.NAME) calls, by the op each spells
FUNCTIONAL = {f.removeprefix("nn.functional."): o.name for o in ops.TABLE for f in o.functions
              if f.startswith("nn.functional.")}
NORM_SIGNATURES = {o.name: o.signature for o in ops.TABLE if o.kind == "norm"}
BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.Pow: "pow"}
# operators of the "call" ops (a @ b is torch.matmul), and `//`, between ints only (sizes: x.shape[-1] // 2)
CALL_OPERATORS = {ast.MatMult: "matmul"}
INT_OPERATORS = {ast.FloorDiv: "floordiv"}
OPERATOR_TEXT = {ast.FloorDiv: "//", ast.Mod: "%", ast.MatMult: "@", ast.LShift: "<<", ast.RShift: ">>",
                 ast.BitOr: "|", ast.BitXor: "^", ast.BitAnd: "&", ast.Not: "not", ast.Invert: "~"}
STATEMENTS = {
    "Import": "import", "ImportFrom": "import", "For": "for loop", "AsyncFor": "for loop",
    "While": "while loop", "If": "if statement", "With": "with statement", "AsyncWith": "with statement",
    "FunctionDef": "def", "AsyncFunctionDef": "def", "ClassDef": "class", "AugAssign": "augmented assignment",
    "AnnAssign": "annotated assignment", "Expr": "expression statement", "Delete": "del", "Try": "try",
    "TryStar": "try", "Raise": "raise", "Assert": "assert", "Global": "global", "Nonlocal": "nonlocal",
    "Pass": "pass", "Break": "break", "Continue": "continue", "Match": "match", "TypeAlias": "type alias",
}
EXPRESSIONS = {
    "Lambda": "lambda", "ListComp": "comprehension", "SetComp": "comprehension", "DictComp": "comprehension",
    "GeneratorExp": "comprehension", "JoinedStr": "f-string", "FormattedValue": "f-string",
    "NamedExpr": "walrus (:=)", "Starred": "starred expression", "IfExp": "conditional expression",
    "Compare": "comparison", "BoolOp": "'and'/'or'", "Dict": "dict", "Set": "set", "Await": "await",
    "Yield": "yield", "YieldFrom": "yield", "Slice": "slice", "Tuple": "tuple", "List": "list",
    "Subscript": "subscript",
}
