#include "actors/response_rows.hpp"

#include <set>

namespace troupe {

namespace rs = protocol::responses;

namespace {

// What every stored row of a response holds from the start: who it is, its history and input.
response_row base_row(const response_job& job) {
  response_row row;
  row.id = job.id;
  row.created_at = job.created_at;
  row.background = job.req.background;
  row.model = job.req.model;
  for (auto& it : job.history)
    row.history_item_ids.push_back(it.id);
  for (auto& it : job.input)
    row.history_item_ids.push_back(it.id);
  row.input_count = static_cast<int64_t>(row.history_item_ids.size());
  row.previous_response_id = job.req.previous_response_id;
  row.conversation_id = job.req.conversation_id;
  row.owner = job.owner;
  row.node_id = job.node_id;
  return row;
}

} // namespace

response_row queued_row(const response_job& job) {
  auto row = base_row(job);
  row.status = rs::response_status::queued;
  rs::response_state s;
  s.id = job.id;
  s.created_at = job.created_at;
  s.status = rs::response_status::queued;
  row.snapshot = rs::response_json(job.req, s);
  return row;
}

response_row row_of(const response_job& job, const std::vector<rs::item>& window, std::size_t mark,
                    const rs::response_stream& stream, rs::response_status status, std::string snapshot) {
  auto row = base_row(job);
  row.status = status;
  row.snapshot = std::move(snapshot);
  row.history_item_ids.clear();
  for (auto& it : window)
    row.history_item_ids.push_back(it.id);
  if (mark > 0)
    row.input_count = static_cast<int64_t>(window.size());
  std::set<std::string> done;
  auto& output = stream.output();
  for (std::size_t i = 0; i < output.size(); ++i)
    if (stream.item_done(i))
      done.insert(output[i].id);
  auto produced = stream.model_items();
  for (auto i = mark; i < produced.size(); ++i)
    if (done.count(produced[i].id))
      row.history_item_ids.push_back(produced[i].id);
  return row;
}

response_commit final_commit(const response_job& job, const std::vector<rs::item>& minted, response_row row,
                             const rs::response_stream& stream, rs::response_status status) {
  response_commit c;
  c.response = std::move(row);
  for (auto& it : job.input)
    c.items.push_back({it.id, rs::to_json(it)});
  for (auto& it : minted)
    c.items.push_back({it.id, rs::to_json(it)});
  bool appends = (status == rs::response_status::completed || status == rs::response_status::incomplete)
                 && !job.req.conversation_id.empty();
  if (appends)
    for (auto& it : job.input)
      c.conversation_append.push_back(it.id);
  auto& output = stream.output();
  for (std::size_t i = 0; i < output.size(); ++i)
    if (stream.item_done(i)) {
      c.items.push_back({output[i].id, rs::to_json(output[i])});
      if (appends)
        c.conversation_append.push_back(output[i].id);
    }
  if (appends) {
    c.conversation_id = job.req.conversation_id;
    c.expected_revision = job.conversation_revision;
  }
  return c;
}

} // namespace troupe
