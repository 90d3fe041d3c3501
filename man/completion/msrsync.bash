# bash completion for msrsync                              -*- shell-script -*-
#
# Installed as bash-completion's completions/msrsync (make install, the .deb
# and the .rpm), which loads it the first time msrsync's arguments are
# completed.  The options are those msrsync --help lists (a test keeps the
# two in step); the value of --rsync "OPTS" is completed by rsync's own
# completion, word by word inside the quotes.

# Every option msrsync --help lists.
_msrsync_options='-p --processes -f --files -s --size --readahead --scan-threads
    --catalog --catalog-sample --changes --resume --retries -b --buckets -k --keep -j --show -P --progress --stats
    --json --status-file --verify --metrics --survey --html --check --stop-at
    --preflight --log --max-duration --window-grace -d --dry-run -v --version -h --help --hosts
    --hostfile --host-shell -r --rsync -t --selftest -e --bench -g --benchshm
    --bench-entries --bench-reps'

# --hosts LIST: comma-separated [user@]host[:N], hosts from the ssh
# configuration and known_hosts files; ':' is this machine, 'slurm' the
# nodes of the Slurm job (alone).
_msrsync_hosts()
{
    local word=$cur before= special=': slurm'
    [[ $word == *,* ]] && before=${word%,*}, && word=${word##*,} && special=:
    _known_hosts_real -a -p "$before" -- "$word"
    COMPREPLY+=($(compgen -P "$before" -W "$special" -- "$word"))
    __ltrim_colon_completions "$before$word"
    # a host may be followed by :N or by the next host
    compopt -o nospace
}

# --rsync "OPTS": rsync's completion, given the words typed inside the
# quotes as an rsync command line.  Readline completes the text after an
# open quote as one word, so each match is that text with its last word
# completed.
_msrsync_rsync()
{
    local text=$cur quote=
    [[ $text == [\"\']* ]] && quote=${text:0:1} && text=${text:1}
    local spec
    spec=$(complete -p rsync 2>/dev/null) ||
        { _completion_loader rsync >/dev/null 2>&1; spec=$(complete -p rsync 2>/dev/null); }
    if [[ ! $spec =~ -F\ ([^ ]+) ]]; then
        [[ -z $quote && $text != -* ]] && _filedir
        return
    fi
    local func=${BASH_REMATCH[1]} head=${text%%*([^[:space:]])}
    local -a rsync_words
    read -ra rsync_words <<<"$head"
    local COMP_WORDS=(rsync "${rsync_words[@]}" "${text:${#head}}")
    local COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    local COMP_LINE="rsync $text"
    local COMP_POINT=${#COMP_LINE}
    COMPREPLY=()
    "$func" rsync "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
    # only the words typed inside quotes are given back whole
    [[ $quote ]] && COMPREPLY=("${COMPREPLY[@]/#/$head}")
    return 0
}

_msrsync()
{
    local cur prev words cword split
    _init_completion -s -n : || return

    # after "--", or after --rsync and its value, come the paths alone
    local i
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in
            --) _filedir; return ;;
            -r | --rsync) ((i + 1 < cword)) && { _filedir; return; } ;;
            --rsync=*) _filedir; return ;;
        esac
    done

    case $prev in
        -p | --processes | -f | --files | -s | --size | --readahead | \
            --scan-threads | --catalog-sample | --retries | --bench-entries | --bench-reps | --stop-at | --max-duration | \
            --window-grace)
            return ;;     # a number, a size, a time or a duration
        -b | --buckets | --resume)
            _filedir -d
            return ;;
        --json | --status-file | --metrics | --html | --hostfile | --catalog | --changes | --log)
            _filedir
            return ;;
        --preflight)
            COMPREPLY=($(compgen -W "refuse warn off" -- "$cur"))
            return ;;
        --hosts)
            _msrsync_hosts
            return ;;
        --host-shell)
            COMPREPLY=($(compgen -c -- "$cur"))
            return ;;
        -r | --rsync)
            _msrsync_rsync
            return ;;
    esac
    $split && return

    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$_msrsync_options" -- "$cur"))
        return
    fi
    _filedir
} &&
    complete -F _msrsync msrsync

# ex: filetype=sh
