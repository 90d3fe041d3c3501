"""How the run's parts share state, counted in msrsync's source with ast:
reads through a back-pointer to the run (self.run.X) outside Run, writes
into another object's attributes (self.a.b = ...), the largest class,
WorkerPool's lines, the longest parameter list, and comments that name a
Class.member that does not exist (tests/test_docs.py's check).

    python3 bench/parts.py [MSRSYNC]        # ./msrsync by default
    git show 16e84c6:msrsync > /tmp/m.before; python3 bench/parts.py /tmp/m.before

(Python 3.8 or later: it reads ast end line numbers.)
"""
import ast
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
from test_docs import stale_member_references  # noqa: E402

src = open(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "msrsync")).read()
t = ast.parse(src)
classes = {n.name: n for n in ast.walk(t) if isinstance(n, ast.ClassDef)}
def is_self_run(n):
    return isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == 'self' and n.attr == 'run'
reads = 0
for c in classes.values():
    if c.name == 'Run': continue
    for n in ast.walk(c):
        if isinstance(n, ast.Attribute) and is_self_run(n.value):
            reads += 1
writes = 0
for n in ast.walk(t):
    targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AugAssign) else []
    for tg in targets:
        for x in ast.walk(tg):
            if isinstance(x, ast.Attribute) and isinstance(x.value, ast.Attribute) and \
                    isinstance(x.value.value, ast.Name) and x.value.value.id == 'self' and isinstance(x.ctx, ast.Store):
                writes += 1
big = max((c.end_lineno - c.lineno + 1, c.name) for c in classes.values())
wp = classes['WorkerPool']; 
params = []
for n in ast.walk(t):
    if isinstance(n, ast.FunctionDef):
        a = n.args
        k = len(a.args) + len(a.kwonlyargs) - (1 if a.args and a.args[0].arg in ('self', 'cls') else 0)
        params.append((k, n.name, n.lineno))
print("self.run.X reads outside Run:", reads)
print("writes into another object's attributes (self.a.b = ...):", writes)
print("largest class:", big)
print("WorkerPool lines:", wp.end_lineno - wp.lineno + 1)
print("longest parameter list:", max(params))
print("stale Class.member in comments:", len(stale_member_references(src)))
print("lines:", len(src.splitlines()))
