// WS-133's shared ring: the recent envelopes of one workspace log, written by its log actor and read
// by every connection, so an append costs the log the same whatever the number of subscribers.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace troupe {

class envelope_ring {
public:
  struct entry {
    int64_t seq;
    std::shared_ptr<const std::string> frame; // the `event` frame (WS-51)
    std::string type;
  };

  explicit envelope_ring(int64_t head, std::size_t capacity = 4096) : head_(head), capacity_(capacity) {}

  int64_t head() const {
    std::lock_guard<std::mutex> lock(mu_);
    return head_;
  }

  // Appends entries past the head, dropping the oldest beyond the capacity. The ring never holds a
  // gap: after one (another process appended) it restarts, and readers behind it read the store.
  void append(std::vector<entry> entries) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& e : entries) {
      if (e.seq <= head_)
        continue;
      if (e.seq != head_ + 1)
        entries_.clear();
      head_ = e.seq;
      entries_.push_back(std::move(e));
      if (entries_.size() > capacity_)
        entries_.pop_front();
    }
  }

  // Up to `max` entries after `seq`, to `upto`. False when the ring does not hold seq + 1: the reader
  // is behind it, or ahead of it (its head came from elsewhere), and reads the store.
  bool after(int64_t seq, int64_t upto, std::size_t max, std::vector<entry>& out) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (seq >= upto)
      return true;
    if (entries_.empty() || entries_.front().seq > seq + 1 || seq >= head_)
      return false;
    auto i = static_cast<std::size_t>(seq + 1 - entries_.front().seq);
    for (; i < entries_.size() && entries_[i].seq <= upto && out.size() < max; ++i)
      out.push_back(entries_[i]);
    return true;
  }

private:
  mutable std::mutex mu_;
  int64_t head_;
  std::size_t capacity_;
  std::deque<entry> entries_;
};

} // namespace troupe
