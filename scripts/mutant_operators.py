"""The mutation operators: every single-point mutant of a solution, made with Python's ast.

scripts/mutants.py grades what `mutants_of` makes (its docstring says how and why).

The file is parsed, one node changed, and written back with ast.unparse (so
comments and layout do not matter), by one of these operators:

- `binop`: an arithmetic operator swapped: + and -, * and /, // for /,
  % for //, ** for *, @ for * (and the same in `x op= y`);
- `operands`: the two sides of a non-commutative operator swapped
  (`a - b`, `a / b`, `a // b`, `a % b`, `a ** b`, `a @ b`);
- `compare`: < and <=, > and >=, < and >, == and !=, is and is not,
  in and not in;
- `boolop`: `and` and `or`; `unary`: a `-`, `+`, `~` or `not` dropped;
- `augassign`: `x op= y` made `x = y`;
- `number`: a numeric constant nudged: doubled, halved (// for an int),
  plus 1, minus 1, 0, its sign flipped;
- `flag`: True and False flipped;
- `activation`: an activation string ("relu", "gelu", "silu", "tanh",
  "linear") or an activation function of keras.activations, keras.ops,
  numpy or tf.nn (`relu`, `gelu`, `silu`, `tanh`) swapped for each of the
  others (GELU is within 0.2 of ReLU and of SiLU everywhere: the hard ones);
- `initializer`, `dtype`: the strings "zeros", "ones", "glorot_uniform",
  and "float32", "float64", "float16", swapped for each other;
- `statement`: a statement dropped (made `pass` where nothing is left),
  simple or compound, at any depth, and a module's assignment (`ANSWERS`);
  not an import, nor a whole `def` or `class` (that only removes a name the
  file must have; the statements of its body are dropped one by one), nor
  a docstring or the `EXERCISE = N` line the grader reads;
- `keyword`: a keyword argument dropped; `keywords`: the values of two
  keyword arguments of one call swapped;
- `arguments`: two positional arguments of one call swapped;
  `argument`: one positional argument dropped;
- `attribute`: `self.a` read as `self.b`, where the class made `a` and `b`
  alike (both by calling the same class, `self.a = Dense(...)`, or both from
  a constructor argument, `self.a = a`): one norm for the other, the MLP's
  first Dense for its last;
- `name`: a variable read as another one the same function passes in the
  same place (the same argument of calls to the same function):
  `jacobian(f2, y1)` read as `jacobian(f2, x)`.

Mutants that compile to the same program as another (or as the solution:
`x[--1]` is `x[1]`) are made once; a mutant that does not compile is left
out (the grader would refuse it before running it). A mutant is keyed by
its file, the function it is in and its line before and after, as
ast.unparse writes them (no line number: a key holds when the solution is
edited elsewhere), with `#2`, `#3` for a second identical change in the
same function.
"""

import ast
import copy
import dataclasses
import difflib
import pathlib
import types

BINOPS = {ast.Add: [ast.Sub], ast.Sub: [ast.Add], ast.Mult: [ast.Div], ast.Div: [ast.Mult],
          ast.FloorDiv: [ast.Div], ast.Mod: [ast.FloorDiv], ast.Pow: [ast.Mult], ast.MatMult: [ast.Mult]}
NON_COMMUTATIVE = (ast.Sub, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.MatMult)
COMPARES = {ast.Lt: [ast.LtE, ast.Gt], ast.LtE: [ast.Lt, ast.GtE], ast.Gt: [ast.GtE, ast.Lt],
            ast.GtE: [ast.Gt, ast.LtE], ast.Eq: [ast.NotEq], ast.NotEq: [ast.Eq], ast.Is: [ast.IsNot],
            ast.IsNot: [ast.Is], ast.In: [ast.NotIn], ast.NotIn: [ast.In]}
BOOLOPS = {ast.And: ast.Or, ast.Or: ast.And}
STRINGS = {"activation": ("relu", "gelu", "silu", "tanh", "linear"),
           "initializer": ("zeros", "ones", "glorot_uniform"),
           "dtype": ("float32", "float64", "float16")}
ACTIVATION_FUNCTIONS = ("relu", "gelu", "silu", "tanh")
ACTIVATION_MODULES = {"activations", "ops", "np", "numpy", "nn", "keras", "tf"}


@dataclasses.dataclass(frozen=True)
class Mutant:
    """One mutant of one solution: its stable key, what changed, and its source."""

    key: str  # "FILE SCOPE: BEFORE -> AFTER" (+ " #n"): no line number
    file: str  # the solution's file name
    exercise: int
    operator: str
    line: int  # in the solution as written (for the reader; not part of the key)
    before: str
    after: str
    source: str

    @property
    def diff(self):
        return f"{self.file}:{self.line}: {self.before}  ->  {self.after}"


# Where a mutation may go ------------------------------------------------------------------------------


def _children(node, path):
    for field, value in ast.iter_fields(node):
        if isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, ast.AST):
                    yield path + ((field, i),), item
        elif isinstance(value, ast.AST):
            yield path + ((field, None),), value


def _walk(node, path=(), skip=frozenset()):
    """(path, node) for every node below `node`, leaving out the nodes in `skip` (by id) and what is below."""
    if id(node) in skip:
        return
    yield path, node
    for child_path, child in _children(node, path):
        yield from _walk(child, child_path, skip)


def _at(tree, path):
    node = tree
    for field, index in path:
        node = getattr(node, field) if index is None else getattr(node, field)[index]
    return node


def _replaced(tree, path, new):
    """A copy of `tree` with the node at `path` replaced by `new` (a node, or a list for a statement list)."""
    tree = copy.deepcopy(tree)
    parent, (field, index) = _at(tree, path[:-1]), path[-1]
    if index is None:
        setattr(parent, field, new)
    else:
        getattr(parent, field)[index] = new
    return tree


def _is_docstring(statement, body, index):
    return (index == 0 and isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
            and isinstance(statement.value.value, str))


def _is_exercise_line(statement):
    return (isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name) and statement.targets[0].id == "EXERCISE")


def _left_alone(tree):
    """The ids of the nodes no operator touches: docstrings and the `EXERCISE = N` line."""
    skip = set()
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if isinstance(body, list):
                for i, statement in enumerate(body):
                    if _is_docstring(statement, body, i) or _is_exercise_line(statement):
                        skip.add(id(statement))
    return frozenset(skip)


# The operators: each yields (operator, new node) for one node ---------------------------------------------


def _number_nudges(value):
    halved = value // 2 if isinstance(value, int) else value / 2
    found = []
    for new in (value * 2, halved, value + 1, value - 1, 0 * value, -value):
        new = new if isinstance(new, int) else float(f"{new:.12g}")  # 0.8 - 1 is -0.2, not -0.19999999999999996
        if new != value and new not in found:
            found.append(new)
    return found


def _number(value):
    """A constant node for `value`; a negative one as `-(value)`, so that `(-2) ** L` stays what it says."""
    return ast.UnaryOp(ast.USub(), ast.Constant(-value)) if value < 0 else ast.Constant(value)


def _constant(node):
    value = node.value
    if isinstance(value, bool):
        yield "flag", ast.Constant(not value)
    elif isinstance(value, (int, float)):
        for new in _number_nudges(value):
            yield "number", _number(new)
    elif isinstance(value, str):
        for operator, choices in STRINGS.items():
            if value in choices:
                for other in choices:
                    if other != value:
                        yield operator, ast.Constant(other)


def _expression(node):
    if isinstance(node, ast.BinOp):
        for op in BINOPS.get(type(node.op), ()):
            yield "binop", ast.BinOp(node.left, op(), node.right)
        if isinstance(node.op, NON_COMMUTATIVE):
            yield "operands", ast.BinOp(node.right, node.op, node.left)
    elif isinstance(node, ast.UnaryOp):
        yield "unary", node.operand
    elif isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            for new in COMPARES.get(type(op), ()):
                yield "compare", ast.Compare(node.left, [*node.ops[:i], new(), *node.ops[i + 1:]], node.comparators)
    elif isinstance(node, ast.BoolOp):
        yield "boolop", ast.BoolOp(BOOLOPS[type(node.op)](), node.values)
    elif isinstance(node, ast.Constant):
        yield from _constant(node)
    elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
        base = node.value
        base_name = base.attr if isinstance(base, ast.Attribute) else base.id if isinstance(base, ast.Name) else ""
        if node.attr in ACTIVATION_FUNCTIONS and base_name in ACTIVATION_MODULES:
            for other in ACTIVATION_FUNCTIONS:
                if other != node.attr:
                    yield "activation", ast.Attribute(base, other, ast.Load())
    elif isinstance(node, ast.Call):
        yield from _call(node)
    elif isinstance(node, ast.AugAssign):
        for op in BINOPS.get(type(node.op), ()):
            yield "binop", ast.AugAssign(node.target, op(), node.value)
        yield "augassign", ast.Assign([node.target], node.value)


def _call(node):
    for i in range(len(node.keywords)):
        yield "keyword", ast.Call(node.func, node.args, node.keywords[:i] + node.keywords[i + 1:])
    named = [i for i, keyword in enumerate(node.keywords) if keyword.arg is not None]
    for a, b in ((a, b) for a in named for b in named if a < b):
        keywords = list(node.keywords)
        keywords[a] = ast.keyword(keywords[a].arg, node.keywords[b].value)
        keywords[b] = ast.keyword(keywords[b].arg, node.keywords[a].value)
        yield "keywords", ast.Call(node.func, node.args, keywords)
    plain = [i for i, arg in enumerate(node.args) if not isinstance(arg, ast.Starred)]
    for a, b in ((a, b) for a in plain for b in plain if a < b):
        args = list(node.args)
        args[a], args[b] = args[b], args[a]
        yield "arguments", ast.Call(node.func, args, node.keywords)
    if len(plain) >= 2 and plain[-1] == len(node.args) - 1:  # the last one, where a default may take its place
        yield "argument", ast.Call(node.func, node.args[:-1], node.keywords)


# `attribute` and `name`: a value read as a sibling of its kind --------------------------------------------


def _callee(node):
    return ast.unparse(node.func) if isinstance(node, ast.Call) else None


def _attribute_kinds(cls, parameters):
    """{attribute: its kind} for the `self.a = ...` of a class: the class called, or "argument"."""
    kinds = {}
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                        and target.value.id == "self"):
                    if isinstance(node.value, ast.Call):
                        kinds.setdefault(target.attr, ("call", _callee(node.value)))
                    elif isinstance(node.value, ast.Name) and node.value.id in parameters:
                        kinds.setdefault(target.attr, ("argument",))
    return kinds


def _places(function):
    """{(callee, argument position): {the local names passed there}} for the calls in a function."""
    places = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            for i, arg in enumerate(node.args):
                if isinstance(arg, ast.Name):
                    places.setdefault((_callee(node), i), set()).add(arg.id)
    return places


def _siblings(tree):
    """{id(node): [new nodes]} for the `attribute` and `name` operators."""
    found = {}
    for cls in (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)):
        parameters = {arg.arg for node in cls.body if isinstance(node, ast.FunctionDef) and node.name == "__init__"
                      for arg in node.args.args + node.args.kwonlyargs}
        kinds = _attribute_kinds(cls, parameters)
        for node in ast.walk(cls):
            if (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Name)
                    and node.value.id == "self" and node.attr in kinds):
                found[id(node)] = [ast.Attribute(node.value, other, ast.Load()) for other in sorted(kinds)
                                   if other != node.attr and kinds[other] == kinds[node.attr]]
    for function in (node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.Lambda))):
        for (callee, position), names in _places(function).items():
            for node in ast.walk(function):
                if isinstance(node, ast.Call) and _callee(node) == callee and position < len(node.args):
                    arg = node.args[position]
                    if isinstance(arg, ast.Name) and len(names) > 1:
                        found.setdefault(id(arg), [])
                        found[id(arg)] += [ast.Name(other, ast.Load()) for other in sorted(names - {arg.id})
                                           if all(other != n.id for n in found[id(arg)]
                                                  if isinstance(n, ast.Name))]
    return found


# Making the mutants ------------------------------------------------------------------------------------


def _scopes(tree):
    """{id(node): the qualified name of the function or class it is in ("<module>" at the top)}."""
    scopes = {}

    def visit(node, scope):
        for child in ast.iter_child_nodes(node):
            inner = scope
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                inner = child.name if scope == "<module>" else f"{scope}.{child.name}"
            scopes[id(child)] = inner if not isinstance(child, (ast.FunctionDef, ast.ClassDef)) else scope
            visit(child, inner)

    visit(tree, "<module>")
    return scopes


def _line_change(original, mutated):
    """(before, after) of the first line the mutant changes, as ast.unparse writes them (stripped; a statement
    of several lines dropped is its first line and how many)."""
    old = [line.strip() for line in original.splitlines() if line.strip()]
    new = [line.strip() for line in mutated.splitlines() if line.strip()]
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag != "equal":
            before = old[i1] if i1 < i2 else ""
            if i2 - i1 > 1:
                before += f" ({i2 - i1} lines)"
            return before, new[j1] if j1 < j2 else "(dropped)"
    return "", ""


def _fingerprint(code):
    """What a compiled module does, without its line numbers: two mutants with one fingerprint are one program
    (`x[--1]` and `x[1]` compile alike)."""
    constants = tuple(_fingerprint(c) if isinstance(c, types.CodeType) else (type(c).__name__, repr(c))
                      for c in code.co_consts)
    return (code.co_code, constants, code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
            code.co_name)


def _only_a_name(parent, statement):
    """An import, or a def or class of the module or of a class: dropping it only removes a name the file must
    have (its body's statements are dropped one by one instead)."""
    return isinstance(statement, (ast.Import, ast.ImportFrom)) or (
        isinstance(parent, (ast.Module, ast.ClassDef)) and isinstance(statement, (ast.FunctionDef, ast.ClassDef)))


def mutants_of(path, exercise):
    """Every mutant of the solution at `path`: one operator at one node, each source once, each compiled."""
    path = pathlib.Path(path)
    tree = ast.parse(path.read_text(), filename=str(path))
    original = ast.unparse(tree)
    skip, scopes, siblings = _left_alone(tree), _scopes(tree), _siblings(tree)
    candidates = []  # (operator, node's line, scope, new tree)
    for node_path, node in _walk(tree, skip=skip):
        line, scope = getattr(node, "lineno", 0), scopes.get(id(node), "<module>")
        for operator, new in _expression(node):
            candidates.append((operator, line, scope, _replaced(tree, node_path, new)))
        for new in siblings.get(id(node), ()):
            operator = "attribute" if isinstance(node, ast.Attribute) else "name"
            candidates.append((operator, line, scope, _replaced(tree, node_path, new)))
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if not isinstance(body, list):
                continue
            for i, statement in enumerate(body):
                if id(statement) in skip or isinstance(statement, ast.Pass) or _only_a_name(node, statement):
                    continue
                new_body = body[:i] + body[i + 1:]
                if all(_is_docstring(s, new_body, j) for j, s in enumerate(new_body)):
                    new_body.append(ast.Pass())  # a body left empty, or with its docstring alone
                candidates.append(("statement", statement.lineno, scopes.get(id(statement), "<module>"),
                                   _replaced(tree, node_path + ((field, None),), new_body)))
    found, seen, counts = [], {_fingerprint(compile(original, path.name, "exec"))}, {}
    for operator, line, scope, new_tree in candidates:
        source = ast.unparse(ast.fix_missing_locations(new_tree))
        try:
            code = compile(source, path.name, "exec")
        except (SyntaxError, ValueError):
            continue
        if _fingerprint(code) in seen:  # the same program as the solution or as a mutant before it
            continue
        seen.add(_fingerprint(code))
        before, after = _line_change(original, source)
        key = f"{path.name} {scope}: {before} -> {after}"
        counts[key] = counts.get(key, 0) + 1
        if counts[key] > 1:
            key += f" #{counts[key]}"
        found.append(Mutant(key, path.name, exercise, operator, line, before, after, source + "\n"))
    return found


__all__ = ["Mutant", "mutants_of"]
