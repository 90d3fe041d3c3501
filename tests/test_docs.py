"""The docs stay in step with the code: every --long-option of --help is documented, and
the exit-code table is the same in the code, --help, README.md and man/msrsync.1."""

import ast
import io
import os
import re
import tokenize

import pytest

from helpers import MANPAGE, PROJECT_DIR, README, load_msrsync, run_msrsync, text

# The table of SPEC.md (authoritative interface): code -> meaning; 255 (the remote
# shell failed, as rsync passes ssh's code on) came with remote ends, 45 (another
# user's file or directory refused) with the security checks.
SPEC_EXIT_CODES = {0, 1, 2, 3, 4, 5, 6, 10, 11, 12, 13, 14, 20, 21, 22, 23, 24, 25, 30, 35,
                   40, 41, 42, 43, 44, 45, 46, 47, 48, 255}


def code_table():
    """{code: meaning} from the script's ExitCode IntEnum."""
    mod = load_msrsync()
    meanings = getattr(mod, "EXIT_MEANINGS", None)
    table = {}
    for member in mod.ExitCode:
        if meanings is not None:
            table[int(member)] = meanings[member]
        else:
            table[int(member)] = member.meaning
    return table


def read(path):
    if not os.path.exists(path):
        pytest.fail("%s does not exist" % path)
    with open(path, encoding="utf-8") as f:
        return f.read()


def unroff(s):
    s = re.sub(r"\\f[BIRP]|\\f\[[A-Z]*\]", "", s)
    s = s.replace("\\-", "-").replace("\\(aq", "'").replace("\\e", "\\").replace("\\&", "")
    return s


def help_long_options():
    cp = run_msrsync("--help")
    assert cp.returncode == 0
    return sorted(set(re.findall(r"--[a-z][a-z0-9-]+", text(cp.stdout))))


def readme_exit_table():
    rows, inside = {}, False
    for line in read(README).splitlines():
        if re.match(r"^\|\s*Code\s*\|\s*Meaning\s*\|", line):
            inside = True
            continue
        if inside:
            if not line.startswith("|"):
                break
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            m = re.match(r"^`?(\d+)`?$", cells[0])
            if m:
                rows[int(m.group(1))] = cells[1].replace("`", "")
    return rows


def man_exit_table():
    man = read(MANPAGE)
    m = re.search(r'^\.SH\s+"?EXIT STATUS"?\s*$(.*?)(?=^\.SH\s)', man, re.M | re.S)
    assert m, "no EXIT STATUS section in man/msrsync.1"
    rows, pending = {}, None
    for line in m.group(1).splitlines():
        line = unroff(line).strip()
        code = re.match(r'^(?:\.(?:B|IP|TP|I|BR)\s+)?"?(\d+)"?(?:\s+\d+)?$', line)
        if code:
            pending = int(code.group(1))
            continue
        if pending is not None and line and not line.startswith("."):
            rows[pending] = line
            pending = None
    return rows


def norm(s):
    return " ".join(s.split()).rstrip(".").lower()


@pytest.mark.parametrize("doc", ["README.md", "man/msrsync.1"])
def test_every_long_option_of_help_is_documented(doc):
    path = README if doc == "README.md" else MANPAGE
    body = read(path)
    if path == MANPAGE:
        body = unroff(body)
    missing = [o for o in help_long_options() if o not in body]
    assert not missing, "in --help but not in %s: %s" % (doc, ", ".join(missing))


def test_exit_codes_in_code_are_the_spec_table():
    assert set(code_table()) == SPEC_EXIT_CODES


def test_exit_code_values_are_unique_and_have_meanings():
    mod = load_msrsync()
    values = [int(m) for m in mod.ExitCode]
    assert len(values) == len(set(values))
    for code, meaning in code_table().items():
        assert meaning and meaning.strip(), code


def test_readme_exit_table_matches_code():
    code = code_table()
    readme = readme_exit_table()
    assert readme, "no '| Code | Meaning |' table in README.md"
    assert set(readme) == set(code), ("only in code: %s; only in README: %s"
                                      % (sorted(set(code) - set(readme)),
                                         sorted(set(readme) - set(code))))
    wrong = dict((c, (code[c], readme[c])) for c in code if norm(code[c]) != norm(readme[c]))
    assert not wrong, "meanings differ (code, README): %r" % wrong


def test_man_exit_status_matches_code():
    code = code_table()
    man = man_exit_table()
    assert set(man) == set(code), ("only in code: %s; only in man page: %s"
                                   % (sorted(set(code) - set(man)),
                                      sorted(set(man) - set(code))))
    wrong = dict((c, (code[c], man[c])) for c in code if norm(code[c]) != norm(man[c]))
    assert not wrong, "meanings differ (code, man page): %r" % wrong


def test_help_exit_table_matches_code():
    out = text(run_msrsync("--help").stdout)
    rows = dict((int(c), m.strip()) for c, m in re.findall(r"^\s*(\d+)\s{2,}(\S.*)$", out,
                                                             re.M))
    code = code_table()
    assert set(rows) == set(code)
    assert all(norm(rows[c]) == norm(code[c]) for c in code), rows


def test_man_page_documents_every_short_option_of_help():
    out = text(run_msrsync("--help").stdout)
    shorts = sorted(set(re.findall(r"^\s+(-[a-zA-Z])[ ,]", out, re.M)))
    man = unroff(read(MANPAGE))
    missing = [s for s in shorts if not re.search(r"(^|[\s,])%s\b" % re.escape(s), man, re.M)]
    assert not missing, missing


def stale_member_references(source):
    """(line, "Class.member") of each comment or docstring of SOURCE (Python text)
    naming a member that class of SOURCE does not have: no method, class attribute or
    self.attribute of that name anywhere in its body."""
    tree = ast.parse(source)
    members = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            names = members.setdefault(node.name, set())
            for sub in ast.walk(node):
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(sub.name)
                elif isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) \
                        and sub.value.id in ("self", "cls"):
                    names.add(sub.attr)
                elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                    names.add(sub.id)
    texts = [(tok.start[0], tok.string)
             for tok in tokenize.generate_tokens(io.StringIO(source).readline)
             if tok.type == tokenize.COMMENT]
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and \
                ast.get_docstring(node, clean=False):
            texts.append((node.body[0].lineno, ast.get_docstring(node, clean=False)))
    return sorted((line, "%s.%s" % m.groups()) for line, words in texts
                  for m in re.finditer(r"\b([A-Z]\w*)\.([A-Za-z_]\w*)", words)
                  if m.group(1) in members and m.group(2) not in members[m.group(1)])


def test_comments_name_only_members_that_exist():
    """A comment or docstring that names Class.member points at something there: when
    code moves, the comments that name it move too."""
    with open(os.path.join(PROJECT_DIR, "msrsync"), encoding="utf-8") as handle:
        source = handle.read()
    assert stale_member_references(source) == []
    # the check finds what it looks for
    sample = ("class Run(object):\n    def go(self):\n        self.done = 1\n"
              "# see Run.go and Run.done, not Run._gone\n")
    assert stale_member_references(sample) == [(4, "Run._gone")]
