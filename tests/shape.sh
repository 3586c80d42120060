#!/usr/bin/env bash
# The code's shape (docs/architecture.md): no file in io/ or actors/ over 700 lines, and no function
# over 120 lines anywhere but in the codecs and schema definitions named below, which read as one
# table each. Functions are found by universal-ctags (Debian: universal-ctags). Fails listing each
# breach.
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root" || exit 1
status=0

max_file_lines=700
for f in io/*.cpp io/*.hpp actors/*.cpp actors/*.hpp; do
  n=$(wc -l <"$f")
  if [ "$n" -gt "$max_file_lines" ]; then
    echo "$f has $n lines (at most $max_file_lines): split it by concern"
    status=1
  fi
done

if ! command -v ctags >/dev/null 2>&1 || ! ctags --version 2>/dev/null | grep -q "Universal Ctags"; then
  echo "shape: universal-ctags is not installed (apt-get install universal-ctags); function lengths unchecked"
  exit 1
fi

max_function_lines=120
# file:function pairs allowed to be longer: codecs walking one wire shape, and schema tables.
exempt="protocol/chat_request.cpp:parse_chat_request
protocol/config.cpp:parse_config
protocol/responses_request.cpp:parse
protocol/responses_request.cpp:render_chat_request
protocol/model_round.cpp:render_chat_request
protocol/reflexr_schema.cpp:definitions"

long=$(ctags --fields=+ne --c++-kinds=f -o - protocol/*.cpp actors/*.cpp actors/*.hpp io/*.cpp io/*.hpp app/*.cpp 2>/dev/null |
  awk -F'\t' -v lim="$max_function_lines" '$1 !~ /^__anon/ {
    line = ""; end = ""
    for (i = 4; i <= NF; i++) {
      if ($i ~ /^line:/) line = substr($i, 6)
      if ($i ~ /^end:/) end = substr($i, 5)
    }
    if (line != "" && end != "" && end - line + 1 > lim) printf "%s:%s %d %s\n", $2, $1, end - line + 1, line
  }')
while read -r key lines at; do
  [ -z "$key" ] && continue
  if ! grep -qxF "$key" <<<"$exempt"; then
    echo "${key%%:*}:$at: ${key#*:} has $lines lines (at most $max_function_lines): give its parts names"
    status=1
  fi
done <<<"$long"

[ $status -eq 0 ] && echo "shape ok: io/ and actors/ files within $max_file_lines lines, functions within $max_function_lines"
exit $status
