// A fake of the store's approval messages for actor tests: approvals and run statuses in memory,
// saves that can be made to fail.
#pragma once

#include "actors/errors.hpp"
#include "actors/store.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace troupe::testing {

// What the fake store holds: approvals by id, run statuses by id, and whether saves fail.
struct store_contents {
  std::mutex mu;
  std::map<std::string, protocol::approval_record> approvals;
  std::map<std::string, std::string> run_status; // a run missing here is not found
  int reads = 0; // approvals read one by one
  int saves = 0;
  int failed_saves = 0;
  bool fail_saves = false;
  std::condition_variable saved; // each save, stored or failed

  // Waits (10 s at most) until `n` saves have failed.
  bool wait_failed_saves(int n) {
    std::unique_lock<std::mutex> lock(mu);
    return saved.wait_for(lock, std::chrono::seconds(10), [&] { return failed_saves >= n; });
  }

  protocol::approval_record get(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu);
    return approvals.at(id);
  }
  int save_count() {
    std::lock_guard<std::mutex> lock(mu);
    return saves;
  }
  void put(const protocol::approval_record& r) {
    std::lock_guard<std::mutex> lock(mu);
    approvals[r.request_id] = r;
  }
  void failing(bool fail) {
    std::lock_guard<std::mutex> lock(mu);
    fail_saves = fail;
  }
};

// The store messages the registry sends, answered from `db`.
inline caf::behavior fake_approval_store(caf::event_based_actor*, std::shared_ptr<store_contents> db) {
  return {
    [=](save_approval_atom, const protocol::approval_record& r) -> caf::result<protocol::approval_record> {
      std::lock_guard<std::mutex> lock(db->mu);
      db->saved.notify_all();
      if (db->fail_saves) {
        ++db->failed_saves;
        return make_error(errc::internal, "disk I/O error");
      }
      ++db->saves;
      db->approvals[r.request_id] = r;
      return r;
    },
    [=](settle_approval_atom, const protocol::approval_record& r) -> caf::result<protocol::approval_record> {
      std::lock_guard<std::mutex> lock(db->mu);
      db->saved.notify_all();
      if (db->fail_saves) {
        ++db->failed_saves;
        return make_error(errc::internal, "disk I/O error");
      }
      auto it = db->approvals.find(r.request_id);
      if (it == db->approvals.end() || it->second.status != "pending")
        return make_error(errc::not_found, "Approval request not found or already resolved");
      ++db->saves;
      auto& stored = it->second;
      stored.status = r.status;
      stored.approved = r.approved;
      stored.resolved_at = r.resolved_at;
      stored.resolution_reason = r.resolution_reason;
      return stored;
    },
    [=](get_approval_atom, const std::string& id) -> caf::result<protocol::approval_record> {
      std::lock_guard<std::mutex> lock(db->mu);
      ++db->reads;
      auto it = db->approvals.find(id);
      if (it == db->approvals.end())
        return make_error(errc::not_found, "Approval request not found");
      return it->second;
    },
    [=](list_approvals_atom, const protocol::approval_query& q) -> approval_list {
      std::lock_guard<std::mutex> lock(db->mu);
      approval_list out;
      for (auto& [id, r] : db->approvals) {
        bool match = true;
        for (auto& [field, value] : q.filters)
          match = match && ((field == "status" && r.status == value) || (field == "run_id" && r.run_id == value));
        if (match)
          out.page.push_back(r);
      }
      return out;
    },
    [=](get_run_atom, const std::string& run_id) -> caf::result<run_record> {
      std::lock_guard<std::mutex> lock(db->mu);
      auto it = db->run_status.find(run_id);
      if (it == db->run_status.end())
        return make_error(errc::not_found, "Run not found");
      run_record r;
      r.run_id = run_id;
      r.status = it->second;
      return r;
    },
  };
}

} // namespace troupe::testing
