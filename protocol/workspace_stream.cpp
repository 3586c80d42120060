#include "protocol/workspace_stream.hpp"

#include "protocol/json.hpp"
#include "protocol/workspace_names.hpp"

namespace troupe::protocol {

namespace {

hello_rejection not_hello() {
  return {"the first frame must be hello"};
}

} // namespace

std::variant<hello_frame, hello_rejection> parse_hello(std::string_view text) {
  auto doc = json::parse(text);
  if (!doc || !doc->IsObject() || json::get_string(*doc, "type") != "hello")
    return not_hello();
  hello_frame h;
  for (auto& m : doc->GetObject()) {
    std::string_view key(m.name.GetString(), m.name.GetStringLength());
    auto& v = m.value;
    if (key == "type") {
      continue;
    } else if (key == "protocol") {
      if (!v.IsString())
        return not_hello();
      h.protocol.assign(v.GetString(), v.GetStringLength());
    } else if (key == "resume_after_seq") {
      if (!v.IsInt64() || v.GetInt64() < 0)
        return not_hello();
      h.resume_after_seq = v.GetInt64();
    } else if (key == "from_head") {
      if (!v.IsBool())
        return not_hello();
      h.from_head = v.GetBool();
    } else if (key == "types") {
      if (v.IsNull())
        continue;
      if (!v.IsArray())
        return not_hello();
      std::vector<std::string> types;
      for (auto& t : v.GetArray()) {
        if (!t.IsString() || !is_event_type(std::string_view(t.GetString(), t.GetStringLength())))
          return not_hello();
        types.emplace_back(t.GetString(), t.GetStringLength());
      }
      h.types = std::move(types);
    } else {
      return not_hello(); // an extra field
    }
  }
  if (!json::member(*doc, "protocol"))
    return not_hello();
  if (h.protocol != stream_protocol)
    return hello_rejection{"this server speaks reflexr.v1; the client asked for " + h.protocol};
  if (h.from_head && h.resume_after_seq != 0)
    return hello_rejection{"from_head replays nothing, so resume_after_seq must be 0"};
  return h;
}

std::variant<resume_decision, std::string> resume(const hello_frame& hello, int64_t head_seq) {
  if (hello.protocol != stream_protocol)
    return std::string("unsupported_protocol");
  if (hello.from_head && hello.resume_after_seq != 0)
    return std::string("validation_failed");
  if (hello.from_head)
    return resume_decision{head_seq, false};
  if (hello.resume_after_seq > head_seq)
    return resume_decision{0, true};
  return resume_decision{hello.resume_after_seq, false};
}

} // namespace troupe::protocol
