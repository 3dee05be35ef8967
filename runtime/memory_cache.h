// OnceCache: an in-memory map whose values are created at most once per key (single flight).
// The first caller for a new key runs the factory; callers arriving meanwhile wait on that
// entry's shared_future, not on a global lock, so work for other keys (hits and other
// compiles) proceeds while a factory runs. A factory's exception is stored in the entry and
// rethrown to every later caller: a failed compile is reported, not retried in a loop.
//
// An optional capacity bounds it: past that many entries, the least recently used finished
// entries (successes and remembered failures alike, never one still being created) are
// dropped. Values are shared_ptrs, so dropping an entry releases only the cache's reference:
// a caller still holding the value keeps it alive until it lets go.
#pragma once

#include <cstddef>
#include <chrono>
#include <functional>
#include <list>
#include <future>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

namespace adjoint::runtime {

/// A thread-safe cache of `Value`s created once per `Key`. `Value` should be cheap to copy
/// (e.g. a shared_ptr), since every call returns a copy.
template <class Key, class Value, class Hash = std::hash<Key>, class Equal = std::equal_to<Key>>
class OnceCache {
 public:
  /// The value for `key`, calling `factory()` (returning something convertible to Value) if
  /// and only if no caller has asked for `key` before. Concurrent callers for the same key
  /// wait for the one running factory. Rethrows the factory's exception, now and for every
  /// later call with `key`. The factory must not ask this cache for the same key (it would
  /// wait on itself).
  template <class Factory>
  Value get_or_create(const Key& key, Factory&& factory) {
    std::optional<std::promise<Value>> promise;
    std::shared_future<Value> future;
    std::vector<std::shared_future<Value>> dropped;  // released after the lock
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto [entry, inserted] = entries_.try_emplace(key);
      if (inserted) {
        promise.emplace();
        entry->second.future = promise->get_future().share();
        recency_.push_front(key);
        entry->second.position = recency_.begin();
        drop_least_recently_used(dropped);
      } else {
        recency_.splice(recency_.begin(), recency_, entry->second.position);
      }
      future = entry->second.future;
    }
    dropped.clear();
    if (promise) {
      try {
        promise->set_value(std::forward<Factory>(factory)());
      } catch (...) {
        promise->set_exception(std::current_exception());
      }
    }
    return future.get();
  }

  /// Keeps at most `capacity` entries (0: unbounded, the default), dropping the least
  /// recently used finished ones now and after every insertion.
  void set_capacity(size_t capacity) {
    std::vector<std::shared_future<Value>> dropped;
    std::lock_guard<std::mutex> lock(mutex_);
    capacity_ = capacity;
    drop_least_recently_used(dropped);
  }
  size_t capacity() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return capacity_;
  }

  /// Whether `key` has an entry (finished, failed or being created).
  bool contains(const Key& key) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return entries_.count(key) != 0;
  }

  /// Number of entries, including failed and in-flight ones.
  size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return entries_.size();
  }

  /// Forgets `key` (e.g. to retry after the cause of a failure was fixed). Callers already
  /// waiting on the entry still receive its result.
  void erase(const Key& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(key);
    if (it == entries_.end()) return;
    recency_.erase(it->second.position);
    entries_.erase(it);
  }

  /// Forgets every entry.
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.clear();
    recency_.clear();
  }

 private:
  struct Entry {
    std::shared_future<Value> future;
    typename std::list<Key>::iterator position;  ///< in recency_, most recent first
  };

  /// With the lock held: moves the least recently used finished entries into `dropped` until
  /// the capacity holds (or only entries being created are left over it).
  void drop_least_recently_used(std::vector<std::shared_future<Value>>& dropped) {
    if (capacity_ == 0) return;
    auto it = recency_.end();
    while (entries_.size() > capacity_ && it != recency_.begin()) {
      --it;
      auto entry = entries_.find(*it);
      if (entry->second.future.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
        continue;  // being created: its waiters need it
      }
      dropped.push_back(std::move(entry->second.future));
      entries_.erase(entry);
      it = recency_.erase(it);
    }
  }

  mutable std::mutex mutex_;
  std::unordered_map<Key, Entry, Hash, Equal> entries_;
  std::list<Key> recency_;
  size_t capacity_ = 0;
};

}  // namespace adjoint::runtime
