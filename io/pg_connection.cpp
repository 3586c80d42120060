#include "io/pg_connection.hpp"

#include <pqxx/pqxx>

#include <cctype>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>

namespace troupe::io::pg {

std::string numbered_parameters(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool quoted = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\'')
      quoted = !quoted; // '' inside a string toggles twice
    if (!quoted && c == '?' && i + 1 < text.size() && std::isdigit(static_cast<unsigned char>(text[i + 1])))
      c = '$';
    out += c;
  }
  return out;
}

struct query::result {
  pqxx::result rows;
};

query::query(connection& c, const std::string& name, const std::string& text)
    : conn_(&c), name_(name), text_(text) {}

query::query(query&&) noexcept = default;
query::~query() = default;

query& query::bind(int i, const std::string& v) {
  if (params_.size() < static_cast<std::size_t>(i))
    params_.resize(static_cast<std::size_t>(i));
  params_[static_cast<std::size_t>(i - 1)] = v;
  return *this;
}

query& query::bind(int i, int64_t v) {
  return bind(i, std::to_string(v));
}

query& query::bind(int i, const std::optional<std::string>& v) {
  if (v)
    return bind(i, *v);
  if (params_.size() < static_cast<std::size_t>(i))
    params_.resize(static_cast<std::size_t>(i));
  params_[static_cast<std::size_t>(i - 1)].reset();
  return *this;
}

query& query::bind(int i, const std::optional<double>& v) {
  if (!v) {
    if (params_.size() < static_cast<std::size_t>(i))
      params_.resize(static_cast<std::size_t>(i));
    params_[static_cast<std::size_t>(i - 1)].reset();
    return *this;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", *v);
  return bind(i, std::string(buf));
}

void query::run() {
  std::vector<const char*> values;
  values.reserve(params_.size());
  for (auto& p : params_)
    values.push_back(p ? p->c_str() : nullptr);
  auto& tx = *conn_->tx_;
  auto params = pqxx::prepare::make_dynamic_params(values);
  result_ = std::make_unique<result>();
  auto started = std::chrono::steady_clock::now();
  if (name_.empty()) {
    result_->rows = tx.exec_params(text_, params);
  } else {
    tx.conn().prepare(name_, text_); // a no-op once defined; prepared on the server at first use
    result_->rows = tx.exec_prepared(name_, params);
  }
  if (conn_->observe_)
    conn_->observe_(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  conn_->changes_ = static_cast<int64_t>(result_->rows.affected_rows());
  next_ = 0;
}

bool query::row() {
  if (!result_)
    run();
  if (next_ >= result_->rows.size())
    return false;
  ++next_;
  return true;
}

bool query::done() {
  run();
  return true;
}

const char* query::cell(int i) const {
  auto field = result_->rows[static_cast<pqxx::result::size_type>(next_ - 1)][i];
  return field.is_null() ? nullptr : field.c_str();
}

std::string query::text(int i) const {
  auto c = cell(i);
  return c ? std::string(c) : std::string();
}

int64_t query::integer(int i) const {
  auto c = cell(i);
  return c ? std::strtoll(c, nullptr, 10) : 0;
}

std::optional<double> query::real(int i) const {
  auto c = cell(i);
  if (!c)
    return std::nullopt;
  return std::strtod(c, nullptr);
}

connection::connection(const statement_spelling* spelling) {
  for (auto s = spelling; s && s->statement; ++s)
    spelling_[s->statement] = s->postgres;
}

query connection::sql(const char* text) {
  auto [it, fresh] = prepared_.try_emplace(text);
  if (fresh) {
    auto own = spelling_.find(text);
    // Named by the text's address, so the stores sharing one server connection never reuse a name.
    char name[32];
    std::snprintf(name, sizeof name, "troupe_%" PRIxPTR, reinterpret_cast<std::uintptr_t>(text));
    it->second.name = name;
    it->second.text = numbered_parameters(own != spelling_.end() ? own->second : text);
  }
  return query(*this, it->second.name, it->second.text);
}

query connection::statement(const std::string& text) {
  return query(*this, {}, numbered_parameters(text));
}

std::vector<std::string> connection::ids(const char* text, const std::string& arg) {
  std::vector<std::string> out;
  auto q = sql(text);
  q.bind(1, arg);
  while (q.row())
    out.push_back(q.text(0));
  return out;
}

} // namespace troupe::io::pg
