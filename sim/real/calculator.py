"""Safe arithmetic: the expression is parsed with `ast` and walked; nothing is ever evaluated as code."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from sim.real.registry import ToolError

MAX_EXPONENT = 1000
MAX_MAGNITUDE = 1e300

BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
UNARY: dict[type, Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt,
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "log": math.log,
    "log10": math.log10,
    "exp": math.exp,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "floor": math.floor,
    "ceil": math.ceil,
}
CONSTANTS = {"pi": math.pi, "e": math.e}


def evaluate(expression: str) -> float | int:
    """The value of an arithmetic expression; ToolError for anything else (names, calls, attributes...)."""
    text = expression.replace("^", "**").replace("×", "*").replace("÷", "/").strip()
    if len(text) > 500:
        raise ToolError("expression too long (500 characters at most)")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise ToolError(f"cannot parse expression {expression!r}") from None
    try:
        value = _walk(tree.body)
    except ZeroDivisionError:
        raise ToolError("division by zero") from None
    except (ValueError, OverflowError, TypeError) as exc:
        raise ToolError(f"cannot evaluate {expression!r}: {exc}") from None
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return int(value)
    return round(value, 10) if isinstance(value, float) else value


def _walk(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in BINARY:
        left, right = _walk(node.left), _walk(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ValueError(f"exponent larger than {MAX_EXPONENT}")
        return _bounded(BINARY[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in UNARY:
        return UNARY[type(node.op)](_walk(node.operand))
    if isinstance(node, ast.Name) and node.id in CONSTANTS:
        return CONSTANTS[node.id]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS:
        if node.keywords or len(node.args) > 4:
            raise ValueError(f"bad arguments to {node.func.id}")
        return _bounded(FUNCTIONS[node.func.id](*[_walk(a) for a in node.args]))
    raise ValueError(f"unsupported element {type(node).__name__}")


def _bounded(value: Any) -> Any:
    if isinstance(value, complex) or abs(value) > MAX_MAGNITUDE:
        raise ValueError("result out of range")
    return value
