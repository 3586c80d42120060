#!/usr/bin/env bash
# Layering is law (DESIGN.md): protocol/ is pure, actors/ never touches sockets or SQL, and CAF and
# Beast stay out of protocol/; the store adapters (io/sqlite_*, io/pg_*, io/run_store_*,
# io/response_store_*, io/workspace_store_*) build no event and choose no HTTP status. Fails listing every line that breaks it.
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
# A store adapter stores what it is given: it never builds a wire event (protocol/ renders those,
# protocol::closing_event for the events a store places itself) and never chooses an HTTP status.
grep_adapters() { # regex, why
  local hits
  hits=$(grep -nE "$1" "$root"/io/sqlite_* "$root"/io/pg_* "$root"/io/run_store_* "$root"/io/response_store_* "$root"/io/workspace_store_* 2>/dev/null)
  if [ -n "$hits" ]; then
    echo "store adapters (io/sqlite_*, io/pg_*, io/run_store_*, io/response_store_*, io/workspace_store_*) must not $2:"
    echo "$hits" | sed "s|$root/||"
    status=1
  fi
}
grep_adapters 'protocol/agent_event\.hpp|fastreact\.agent_event|agent_event_schema|\b(error_event|to_sse_frame|envelope_json|event_frame|command_result_json|rejection_detail)\(|protocol::to_json\(|(event_id|parent_event_id|error_type)\\?"' \
  "build an event's JSON (the event writers of protocol/ and their keys)"
grep_adapters '\bhttp_status\b|\bstatus[A-Za-z_]*\s*(==?|!=|\(|\{|,)\s*[45][0-9]{2}\b|\b[45][0-9]{2}\s*(==|!=)\s*[A-Za-z_.>-]*status' \
  "choose an HTTP status (the edge does)"
# No HTTP status is chosen below the edge: actors/ speaks in troupe::problem codes (protocol/errors).
status_hits=$(grep -nE '\b[A-Za-z_.>-]*status[A-Za-z_]*\s*(==|!=|<=|>=|<|>|=)\s*[45][0-9]{2}\b|\b[45][0-9]{2}\s*(==|!=|<=|>=|<|>)\s*[A-Za-z_.>-]*status|\bhttp_status\(' "$root"/actors/* 2>/dev/null)
if [ -n "$status_hits" ]; then
  echo "actors/ must not choose or compare HTTP statuses (return a problem; the edge renders it):"
  echo "$status_hits" | sed "s|$root/||"
  status=1
fi
[ $status -eq 0 ] && echo "layering ok: protocol/ pure, actors/ free of sockets, SQL and HTTP statuses, store adapters render nothing"
exit $status
