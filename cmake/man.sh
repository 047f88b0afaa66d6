#!/bin/sh
# man.sh — writes the man pages from one source, the command's own help: autotune(1) (the
# overview, every command's help, README.md's environment table) and autotune-CMD(1) for each
# command of `autotune --help` that has a help of its own. Run by the build (target man).
#   man.sh AUTOTUNE README.md OUTDIR VERSION
set -eu
cli=$1 readme=$2 out=$3 version=$4
mkdir -p "$out"
rm -f "$out"/*.1

# roff-safe text: backslashes, leading dots and quotes, hyphens as minus signs (options)
esc() { sed -e 's/\\/\\e/g' -e 's/-/\\-/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"; }
# the commands and their one-line summaries: "  NAME  summary" (continuation lines joined)
"$cli" --help | awk '
  /^  [a-z]+ +[^ ]/ { if (n) print n "\t" d; n = $1; sub(/^  [a-z]+ +/, ""); d = $0; next }
  /^            +[^ ]/ && n { sub(/^ +/, ""); d = d " " $0; next }
  { if (n) print n "\t" d; n = "" }
  END { if (n) print n "\t" d }' >"$out/commands.tsv"

page() { # NAME SECTION-TITLE SUMMARY
  printf '.TH %s 1 "" "autotune %s" "User Commands"\n.SH NAME\n' "$2" "$version"
  printf '%s \\- %s\n' "$(echo "$1" | esc)" "$(echo "$3" | esc)"
}
help_block() { # CMD: its help after the usage lines, preformatted
  printf '.nf\n'
  "$cli" "$1" --help | awk 'f; /^$/ { f = 1 }' | esc
  printf '.fi\n'
}
usage_block() { # CMD: its usage lines without "usage: "
  printf '.SH SYNOPSIS\n.nf\n'
  "$cli" "$1" --help | awk '/^$/ { exit } { sub(/^usage: /, ""); sub(/^       /, ""); print }' | esc
  printf '.fi\n'
}

see_also=""
while IFS="$(printf '\t')" read -r cmd summary; do
  "$cli" "$cmd" --help 2>/dev/null | head -1 | grep -q '^usage:' || continue
  upper=$(echo "autotune-$cmd" | tr '[:lower:]' '[:upper:]')
  {
    page "autotune-$cmd" "$upper" "$summary"
    usage_block "$cmd"
    printf '.SH DESCRIPTION\n'
    help_block "$cmd"
    printf '.SH SEE ALSO\n.BR autotune (1)\n'
  } >"$out/autotune-$cmd.1"
  see_also="$see_also autotune-$cmd"
done <"$out/commands.tsv"

{
  page autotune AUTOTUNE "$("$cli" --help | sed -n 3p | sed -e 's/\.$//' -e 's/^Tunes/tunes/')"
  printf '.SH SYNOPSIS\n.B autotune\n.I COMMAND\n[options]\n.br\n.B autotune\n.I COMMAND\n\\-\\-help\n'
  printf '.SH DESCRIPTION\n'
  help_block --help
  printf '.SH COMMANDS\n'
  for p in $see_also; do
    cmd=${p#autotune-}
    printf '.SS autotune %s\n' "$cmd"
    "$cli" "$cmd" --help | printf '.nf\n%s\n.fi\n' "$(esc)"
  done
  printf '.SH ENVIRONMENT\n'
  # README.md's table between <!-- environment --> and <!-- /environment -->, one .TP a row
  awk '/^<!-- environment/ { f = 1; next } /^<!-- \/environment/ { f = 0 }
       f && /^\| `/ { print }' "$readme" | sed -e 's/`//g' -e 's/\[\([^]]*\)\]([^)]*)/\1/g' |
    esc | awk -F ' \\| ' '{ sub(/^\| /, "", $1); sub(/ \|$/, "", $2); print ".TP\n.B " $1 "\n" $2 }'
  printf '.SH SEE ALSO\n'
  first=1
  for p in $see_also; do
    [ $first -eq 1 ] || printf ',\n'
    printf '.BR %s (1)' "$p"
    first=0
  done
  printf '\n'
} >"$out/autotune.1"
rm -f "$out/commands.tsv"
