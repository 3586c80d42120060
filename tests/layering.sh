#!/usr/bin/env bash
# Layering is law (DESIGN.md): protocol/ is pure, actors/ never touches sockets or SQL, and CAF and
# Beast stay out of protocol/. Fails listing every include that breaks it.
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
status=0
check() { # folder, forbidden-include regex, why
  local hits
  hits=$(grep -rnE "#include *[<\"]($2)" "$root/$1" 2>/dev/null)
  if [ -n "$hits" ]; then
    echo "$1/ must not include $3:"
    echo "$hits" | sed "s|$root/||"
    status=1
  fi
}
check protocol 'caf/|boost/|sqlite3|pqxx|libpq|spdlog|actors/|io/' "CAF, Boost, SQL, spdlog, actors/ or io/ (it is pure)"
check actors 'boost/|sqlite3|pqxx|libpq|io/|sys/socket|netinet' "Beast, Asio, sockets, SQL or io/ (io/ is the only door to the world)"
[ $status -eq 0 ] && echo "layering ok: protocol/ pure, actors/ free of sockets and SQL"
exit $status
