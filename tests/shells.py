"""Interactive bash and zsh on a pseudo-terminal, asked to complete command lines.

A line is typed as a user types it, then the completion keys are pressed: bash lists
readline's matches (possible-completions) and then completes (TAB); zsh completes
(TAB) while every match the completion system adds is also written to a file (compadd
wrapped, as zsh-capture-completion does). Then a key bound to a small function reports
the line as the completion left it, the line is discarded, and an echo of a marker
says that the shell is waiting for the next line.
"""

import fcntl
import os
import pty
import re
import select
import signal
import struct
import termios
import time

PROMPT = "@PS1@ "
END = "@@END@@"
# typed as echo @@E''ND@@: the marker is in the output only once the echo ran
TYPED_END = "\x15echo @@E''ND@@\r"
SHOW_LINE = "\x18\x0c"              # C-x C-l, bound to print the line
LIST = "\x18\x0f"                   # C-x C-o, bound to possible-completions (bash)
LINE = re.compile(r"@LINE@(.*?)@\r?\n", re.S)

BASH_COMPLETION = "/usr/share/bash-completion/bash_completion"

BASH_SETUP = r"""
bind 'set completion-display-width 0'
bind 'set completion-query-items 0'
bind 'set page-completions off'
bind 'set enable-bracketed-paste off'
bind 'set bell-style none'
bind '"\C-x\C-o": possible-completions'
complete -W done reset_completion
bind -x '"\C-x\C-l": printf "\n@LINE@%%s@\n" "$READLINE_LINE"'
source %s
"""

ZSH_SETUP = r"""
PS1='@PS1@ '; LISTMAX=1000000; unset zle_bracketed_paste; unsetopt beep
%s
autoload -Uz compinit; compinit -u -D
compadd() {
  if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "$@"; return; fi
  local -a __hits
  builtin compadd -O __hits "$@"
  (( $#__hits )) && print -rl -- $__hits >> $CAPTURE
  builtin compadd "$@"
}
show-line() { print -r -- "@LINE@$BUFFER@" >> $CAPTURE }
zle -N show-line; bindkey '^X^L' show-line
"""


class Completion(object):
    """What a shell offered for a line: the matches, and the line after TAB."""

    def __init__(self, matches, line):
        self.matches = matches      # the matches, in the order shown (bash) or added (zsh)
        self.line = line            # the command line once TAB was pressed

    def __repr__(self):
        return "Completion(%r, %r)" % (self.matches, self.line)


class Shell(object):
    """One interactive shell on a pseudo-terminal of 200 columns."""

    def __init__(self, argv, env, setup, timeout=20):
        self.timeout = timeout      # seconds to wait for any one answer
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            try:
                os.execvpe(argv[0], argv, env)
            finally:
                os._exit(127)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 60, 200, 0, 0))
        self.output = b""           # all it wrote, for the messages of failed tests
        for line in setup.strip().splitlines():
            self._type(line + "\r")
        self._settle()

    def _type(self, keys):
        os.write(self.fd, keys.encode())

    def _read_until(self, pattern):
        """Read until PATTERN (regex, bytes) matches what was read; return that."""
        got = b""
        deadline = time.monotonic() + self.timeout
        while not re.search(pattern, got, re.S):
            left = deadline - time.monotonic()
            ready = select.select([self.fd], [], [], max(0.0, left))[0]
            if not ready:
                raise AssertionError("the shell did not answer in %d s; it wrote:\n%s"
                                     % (self.timeout, (self.output + got)[-3000:]))
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                data = b""
            if not data:
                raise AssertionError("the shell exited; it wrote:\n%s"
                                     % (self.output + got)[-3000:])
            got += data
        self.output += got
        return got.decode("utf-8", "replace")

    def _settle(self):
        """Wait until the shell reads a new line: the marker echoed, then a prompt.
        Keys typed before that would go through the terminal's own line editing."""
        self._type(TYPED_END)
        return self._read_until(re.escape((END + "\r\n").encode()) + b".*"
                                + re.escape(PROMPT.encode()))

    def close(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(self.pid, 0)
        os.close(self.fd)


class Bash(Shell):
    """bash -i with bash-completion, which finds msrsync's completion in
    $BASH_COMPLETION_USER_DIR/completions (or where the system keeps them)."""

    def __init__(self, env):
        env = dict(env, PS1=PROMPT, INPUTRC="/dev/null")
        super(Bash, self).__init__(["bash", "--norc", "--noprofile", "-i"], env,
                                   BASH_SETUP % BASH_COMPLETION)

    def complete(self, line):
        # after a completion that found nothing, readline's next one inserts
        # where it was asked to list: one that succeeds ends every line
        self._type(line + LIST + "\t" + SHOW_LINE + "\x15reset_completion \t")
        out = self._settle()
        # the line as typed, the listing, a prompt drawn again (or the line
        # printed, when there was no listing)
        start = out.index(line) + len(line)
        listing = out[start:out.index(PROMPT, start)].split("\r\n")
        matches = [m for m in listing if m and "@LINE@" not in m]
        return Completion(matches, LINE.search(out).group(1))


class Zsh(Shell):
    """zsh -f -i with compinit, msrsync's completion first in $fpath."""

    def __init__(self, env, fpath_dir, capture):
        self.capture = capture      # the file compadd's wrapper writes matches to
        env = dict(env, CAPTURE=capture)
        fpath = "fpath=(%s $fpath)" % fpath_dir if fpath_dir else ""
        super(Zsh, self).__init__(["zsh", "-f", "-i"], env, ZSH_SETUP % fpath)

    def complete(self, line):
        open(self.capture, "w").close()
        self._type(line + "\t" + SHOW_LINE)
        self._settle()
        with open(self.capture, encoding="utf-8", errors="replace") as handle:
            written = handle.read()
        found = LINE.search(written)
        assert found, "zsh did not report its line; it wrote:\n%s" % self.output[-3000:]
        return Completion(written[:found.start()].splitlines(), found.group(1))
