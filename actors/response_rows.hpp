// What a response stores (RS-20, RS-51, RS-53, RS-55): its row as it stands and its one commit at
// the end, from its job and its stream. The Responses executor (actors/response_run.cpp) sends them
// to the Responses store.
#pragma once

#include "actors/response_run.hpp"
#include "actors/response_store.hpp"
#include "protocol/responses_stream.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace troupe {

// The row as it stands: `window` (history + input until a compaction replaced it, RS-51), then the
// items after `mark` of the stream's model items that the client saw end (RS-20).
response_row row_of(const response_job& job, const std::vector<protocol::responses::item>& window, std::size_t mark,
                    const protocol::responses::response_stream& stream,
                    protocol::responses::response_status status, std::string snapshot);

// RS-53: the commit that ends a response with `status`: its row, its input, the user messages a
// compaction re-minted, its finished output, and a conversation's append (guarded by its revision)
// when it completed or ended incomplete.
response_commit final_commit(const response_job& job, const std::vector<protocol::responses::item>& minted,
                             response_row row, const protocol::responses::response_stream& stream,
                             protocol::responses::response_status status);

} // namespace troupe
