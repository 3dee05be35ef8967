// OnceCache: an in-memory map whose values are created at most once per key (single flight).
// The first caller for a new key runs the factory; callers arriving meanwhile wait on that
// entry's shared_future, not on a global lock, so work for other keys (hits and other
// compiles) proceeds while a factory runs. A factory's exception is stored in the entry and
// rethrown to every later caller: a failed compile is reported, not retried in a loop.
#pragma once

#include <cstddef>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>

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
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto [entry, inserted] = entries_.try_emplace(key);
      if (inserted) {
        promise.emplace();
        entry->second = promise->get_future().share();
      }
      future = entry->second;
    }
    if (promise) {
      try {
        promise->set_value(std::forward<Factory>(factory)());
      } catch (...) {
        promise->set_exception(std::current_exception());
      }
    }
    return future.get();
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
    entries_.erase(key);
  }

  /// Forgets every entry.
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.clear();
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<Key, std::shared_future<Value>, Hash, Equal> entries_;
};

}  // namespace adjoint::runtime
