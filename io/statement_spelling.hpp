// A statement as PostgreSQL spells it where its SQL differs from what SQLite reads. A store's
// statements are written once (io/*_statements.hpp); its table of spellings lists the exceptions, and
// the PostgreSQL connection runs the spelling in place of the statement it names.
#pragma once

namespace troupe::io {

struct statement_spelling {
  const char* statement; // the address of the statement it replaces; nullptr ends a table
  const char* postgres;
};

} // namespace troupe::io
