"""Shell completion: man/completion/msrsync.bash (bash, with bash-completion) and
man/completion/_msrsync (zsh, with compinit), loaded as the shells load them once
installed, asked in a real interactive shell to complete partial command lines.

They offer every option msrsync --help lists and no other, the hosts of the user's ssh
configuration and known_hosts files for --hosts, rsync's own options inside
--rsync "...", and file names for the paths."""

import os
import re
import shutil

import pytest

from helpers import PROJECT_DIR, run_msrsync, text
import shells

pytestmark = pytest.mark.xdist_group("completion")

COMPLETION_DIR = os.path.join(PROJECT_DIR, "man", "completion")

SSH_CONFIG = """\
Host alpha beta.example
    User someone
Host *.wild
    Port 2222
Host gamma
"""
KNOWN_HOSTS = """\
known1.example,192.0.2.7 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleExampleExample
[port.example]:2222 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleExampleExample
|1|F1E1KeoE/eEWhi10WpGv4OdiO6Y=|3988QV0VE8wmZL7suNrYQLITLCg= ssh-ed25519 AAAAC3Nza
"""
# the hosts of the two files above, and the two special ones
OFFERED_HOSTS = {"alpha", "beta.example", "gamma", "known1.example", "port.example",
                 ":", "slurm"}


def help_options():
    """Every option msrsync --help lists: each option line's names, up to its help."""
    cp = run_msrsync("--help")
    assert cp.returncode == 0
    options = set()
    for line in text(cp.stdout).splitlines():
        if re.match(r"^  -", line):
            names = re.split(r"\s{2,}", line.strip())[0]
            options.update(part.split()[0] for part in names.split(", "))
    return options


@pytest.fixture(scope="module")
def user(tmp_path_factory):
    """A user's HOME with an ssh configuration and known hosts, a small tree of
    files, and the environment of a shell of theirs."""
    root = tmp_path_factory.mktemp("completion")
    home = root / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(SSH_CONFIG)
    (home / ".ssh" / "known_hosts").write_text(KNOWN_HOSTS)
    tree = root / "tree"
    (tree / "src-dir").mkdir(parents=True)
    (tree / "src-file").write_text("x")
    # bash-completion looks for a command's completion in completions/COMMAND of
    # the user's directory first, as it does in the system's
    user_dir = root / "bash-completion"
    (user_dir / "completions").mkdir(parents=True)
    os.symlink(os.path.join(COMPLETION_DIR, "msrsync.bash"),
               str(user_dir / "completions" / "msrsync"))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
           "TERM": "dumb", "LC_ALL": "C", "BASH_COMPLETION_USER_DIR": str(user_dir)}
    return {"root": root, "tree": str(tree), "env": env}


def start_bash(env):
    if not shutil.which("bash") or not os.path.exists(shells.BASH_COMPLETION):
        pytest.skip("needs bash and bash-completion (%s); .ci/deps installs them"
                    % shells.BASH_COMPLETION)
    return shells.Bash(env)


def start_zsh(env, fpath_dir, capture):
    if not shutil.which("zsh"):
        pytest.skip("needs zsh; .ci/deps installs it")
    return shells.Zsh(env, fpath_dir, capture)


@pytest.fixture(scope="module", params=["bash", "zsh"])
def shell(request, user):
    if request.param == "bash":
        started = start_bash(user["env"])
    else:
        started = start_zsh(user["env"], COMPLETION_DIR, str(user["root"] / "zsh-matches"))
    started.name = request.param
    yield started
    started.close()


def last_words(matches):
    """bash shows the whole text after an open quote, zsh the word: the last words."""
    return {m.split()[-1] for m in matches if m.split()}


def names(matches):
    """File names as the shells show them (bash marks directories with a slash)."""
    return {m.rstrip("/") for m in matches}


def test_a_dash_offers_every_option_of_help_and_no_other(shell):
    options = help_options()
    # (the reading of --help finds the first, the last and the odd ones)
    assert {"-p", "--processes", "-r", "--rsync", "--bench-entries"} <= options
    got = shell.complete("msrsync -")
    assert set(got.matches) == options, (
        "offered, not in --help: %s; in --help, not offered: %s"
        % (sorted(set(got.matches) - options), sorted(options - set(got.matches))))


def test_a_long_option_is_completed_from_its_start(shell):
    assert set(shell.complete("msrsync --ho").matches) == {"--hosts", "--hostfile",
                                                            "--host-shell"}
    got = shell.complete("msrsync -p 4 --hostf")
    assert got.line in ("msrsync -p 4 --hostfile ", "msrsync -p 4 --hostfile="), got
    # a number is asked for: nothing is offered
    assert shell.complete("msrsync -p ").matches == []


def test_hosts_come_from_the_ssh_configuration_and_known_hosts(shell):
    got = set(shell.complete("msrsync --hosts ").matches)
    assert OFFERED_HOSTS <= got, sorted(OFFERED_HOSTS - got)
    assert not [h for h in got if "*" in h or h.startswith("|")], sorted(got)
    # after a comma: the next host of the list; 'slurm' only stands alone
    got = shell.complete("msrsync -p 2 --hosts alpha,")
    assert {"gamma", "known1.example", ":"} <= {m.split(",")[-1] for m in got.matches}, got
    assert not [m for m in got.matches if m.endswith("slurm")], got
    assert shell.complete("msrsync --hosts alpha,gam").line == "msrsync --hosts alpha,gamma"
    assert shell.complete("msrsync --hosts u@gam").line == "msrsync --hosts u@gamma"
    assert shell.complete("msrsync --hosts=beta").line == "msrsync --hosts=beta.example"


def test_inside_the_rsync_string_come_rsyncs_options(shell):
    got = shell.complete('msrsync -p 2 --rsync "-a --del')
    assert {"--delete", "--delete-after", "--delete-excluded"} <= last_words(got.matches), got
    # the words typed before stay; bash closes the quote, zsh leaves it open
    got = shell.complete('msrsync --rsync "-a --delete-af')
    assert got.line in ('msrsync --rsync "-a --delete-after" ',
                        'msrsync --rsync "-a --delete-after'), got
    got = shell.complete("msrsync -r '-av --dry-r")
    assert got.line.startswith("msrsync -r '-av --dry-run"), got
    assert shell.complete("msrsync --rsync --dry-r").line.startswith("msrsync --rsync --dry-run")
    # msrsync's own options are not rsync's
    assert shell.complete('msrsync --rsync "--hos').matches == []


def test_paths_are_file_names_and_follow_the_rsync_string(shell, user):
    tree = user["tree"]
    got = shell.complete("msrsync -p 2 %s/src-" % tree)
    assert names(got.matches) == {"src-dir", "src-file"}, got
    assert shell.complete("msrsync %s/src-d" % tree).line == "msrsync %s/src-dir/" % tree
    # the rsync string is msrsync's last option: paths after it, and after --
    got = shell.complete('msrsync --rsync "-a" %s/src-d' % tree)
    assert got.line == 'msrsync --rsync "-a" %s/src-dir/' % tree, got
    assert shell.complete('msrsync --rsync "-a" --ho').matches == []
    assert shell.complete("msrsync -- --ho").matches == []
    # the bucket directory and --resume take a directory, --json a file
    assert names(shell.complete("msrsync -b %s/src-" % tree).matches) == {"src-dir"}
    assert names(shell.complete("msrsync --resume %s/src-" % tree).matches) == {"src-dir"}
    assert names(shell.complete("msrsync --json %s/src-" % tree).matches) == {"src-dir",
                                                                             "src-file"}
