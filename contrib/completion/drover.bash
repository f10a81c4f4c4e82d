# bash completion for drover: commands, each command's options, experiment and token
# subcommands and task ids. Everything comes from drover itself (`drover --help`, `drover CMD
# --help`, and `drover ls --json` for ids), so it never falls out of step with the binary; ids
# are asked of a daemon that already runs (DROVER_NO_AUTOSTART=1: completing never starts one).
# Installed as share/bash-completion/completions/drover.

_drover_commands() {
    drover --help 2>/dev/null | awk '/^commands:/ {on = 1; next} on && /^  [a-z]/ {print $1}'
}

# The options of a command (or of "exp SUB"), from its --help.
_drover_options() {
    drover "$@" --help 2>/dev/null | grep -oE -- '(^| )--[a-z][a-z0-9-]*' | tr -d ' ' | sort -u
}

_drover_task_ids() {
    DROVER_NO_AUTOSTART=1 drover ls --json 2>/dev/null | grep -oE '"id": *[0-9]+' | grep -oE '[0-9]+$'
}

_drover() {
    local cur=${COMP_WORDS[COMP_CWORD]} cmd= sub= i
    COMPREPLY=()
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
            --) return 0 ;;   # the task's own command: leave it to the default completion
            -*) ;;
            *) if [ -z "$cmd" ]; then cmd=${COMP_WORDS[i]}
               elif { [ "$cmd" = exp ] || [ "$cmd" = token ]; } && [ -z "$sub" ]; then
                   sub=${COMP_WORDS[i]}; fi ;;
        esac
    done
    if [ -z "$cmd" ]; then
        COMPREPLY=($(compgen -W "$(_drover_commands) --help --version" -- "$cur"))
        return 0
    fi
    if [ "$cmd" = exp ] && [ -z "$sub" ] && [[ $cur != -* ]]; then
        COMPREPLY=($(compgen -W "run ls show export stop resume" -- "$cur"))
        return 0
    fi
    if [ "$cmd" = token ] && [ -z "$sub" ] && [[ $cur != -* ]]; then
        COMPREPLY=($(compgen -W "create ls revoke" -- "$cur"))
        return 0
    fi
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(_drover_options $cmd $sub) --help" -- "$cur"))
        return 0
    fi
    case $cmd in
        show|logs|cancel|retry|hold|release|priority|wait)
            COMPREPLY=($(compgen -W "$(_drover_task_ids)" -- "$cur")) ;;
        exp) [ "$sub" = run ] && COMPREPLY=($(compgen -f -- "$cur")) ;;
        simulate) COMPREPLY=($(compgen -f -- "$cur")) ;;
    esac
    return 0
}
complete -F _drover drover
