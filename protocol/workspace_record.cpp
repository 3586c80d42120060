#include "protocol/workspace_record.hpp"

#include <utility>

namespace troupe::protocol::reflexr {

command_record record_of(const command_request& request, effect e) {
  command_record out;
  out.ok = !e.rejected;
  out.max_seq = e.max_seq;
  if (e.rejected)
    out.code = e.rejected->what.code;
  if (!request.command_id.empty())
    out.body = command_result_json(request.command_id, e);
  else if (e.rejected)
    out.body = rejection_detail(*e.rejected);
  else {
    out.body = "[";
    for (std::size_t i = 0; i < e.outcomes.size(); ++i)
      out.body += (i ? "," : "") + e.outcomes[i];
    out.body += "]";
  }
  for (auto& envelope : e.appended)
    out.appended_json.push_back(envelope_json(envelope));
  out.appended = std::move(e.appended);
  return out;
}

} // namespace troupe::protocol::reflexr
