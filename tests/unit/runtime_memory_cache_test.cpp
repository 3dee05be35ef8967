// OnceCache: one factory call per key under contention, remembered failures, no global lock
// held while a factory runs.
#include "runtime/memory_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <latch>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace adjoint::runtime {
namespace {

using namespace std::chrono_literals;

TEST(RuntimeOnceCache, SixteenThreadsAskingOneNewKeyRunTheFactoryOnce) {
  OnceCache<std::string, std::shared_ptr<int>> cache;
  std::atomic<int> calls{0};
  constexpr int kThreads = 16;
  std::latch start(kThreads);
  std::vector<std::shared_ptr<int>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      seen[t] = cache.get_or_create("kernel", [&] {
        ++calls;
        std::this_thread::sleep_for(20ms);  // keep the entry in flight while others arrive
        return std::make_shared<int>(42);
      });
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(calls.load(), 1);
  for (const auto& value : seen) {
    ASSERT_NE(value, nullptr);
    EXPECT_EQ(value.get(), seen.front().get());  // the very same object
  }
  EXPECT_EQ(cache.size(), 1u);
}

TEST(RuntimeOnceCache, DistinctKeysEachRunTheirFactory) {
  OnceCache<int, int> cache;
  int calls = 0;
  for (int round = 0; round < 2; ++round) {
    for (int key = 0; key < 5; ++key) {
      EXPECT_EQ(cache.get_or_create(key,
                                    [&] {
                                      ++calls;
                                      return key * 10;
                                    }),
                key * 10);
    }
  }
  EXPECT_EQ(calls, 5);
  EXPECT_TRUE(cache.contains(3));
  EXPECT_FALSE(cache.contains(7));
}

TEST(RuntimeOnceCache, FailureIsRememberedAndRethrownWithoutRetry) {
  OnceCache<std::string, int> cache;
  int calls = 0;
  auto failing = [&]() -> int {
    ++calls;
    throw std::runtime_error("nvrtc said no");
  };
  for (int attempt = 0; attempt < 3; ++attempt) {
    try {
      cache.get_or_create("bad", failing);
      FAIL() << "expected the factory's exception";
    } catch (const std::runtime_error& error) {
      EXPECT_STREQ(error.what(), "nvrtc said no");
    }
  }
  EXPECT_EQ(calls, 1);

  // Only an explicit erase allows a new attempt.
  cache.erase("bad");
  EXPECT_EQ(cache.get_or_create("bad",
                                [&] {
                                  ++calls;
                                  return 7;
                                }),
            7);
  EXPECT_EQ(calls, 2);
}

TEST(RuntimeOnceCache, ConcurrentWaitersAllSeeTheFailure) {
  OnceCache<int, int> cache;
  std::atomic<int> calls{0};
  std::atomic<int> failures{0};
  constexpr int kThreads = 8;
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      start.arrive_and_wait();
      try {
        cache.get_or_create(1, [&]() -> int {
          ++calls;
          std::this_thread::sleep_for(20ms);
          throw std::runtime_error("broken kernel");
        });
      } catch (const std::runtime_error&) {
        ++failures;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(failures.load(), kThreads);
}

TEST(RuntimeOnceCache, NoLockIsHeldWhileAFactoryRuns) {
  OnceCache<int, int> cache;
  std::promise<void> other_key_done;
  std::shared_future<void> other_key_done_future = other_key_done.get_future().share();
  std::promise<void> slow_started;

  // The factory for key 1 does not finish until key 2 has been created from another thread; a
  // cache that held one lock around the factory would make that wait time out.
  std::future<int> slow = std::async(std::launch::async, [&] {
    return cache.get_or_create(1, [&] {
      slow_started.set_value();
      bool ok = other_key_done_future.wait_for(5s) == std::future_status::ready;
      return ok ? 1 : -1;
    });
  });
  slow_started.get_future().wait();
  EXPECT_TRUE(cache.contains(1));  // in flight
  EXPECT_EQ(cache.get_or_create(2, [] { return 2; }), 2);
  other_key_done.set_value();
  EXPECT_EQ(slow.get(), 1);
}

TEST(RuntimeOnceCache, CapacityDropsTheLeastRecentlyUsed) {
  OnceCache<int, std::shared_ptr<int>> cache;
  cache.set_capacity(3);
  int factories = 0;
  auto get = [&](int key) {
    return cache.get_or_create(key, [&] {
      ++factories;
      return std::make_shared<int>(key);
    });
  };
  get(1);
  get(2);
  get(3);
  get(1);  // 1 is now the most recent; 2 the least
  get(4);
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_TRUE(cache.contains(1));
  EXPECT_FALSE(cache.contains(2));
  EXPECT_TRUE(cache.contains(3));
  EXPECT_TRUE(cache.contains(4));
  EXPECT_EQ(factories, 4);
  get(2);  // recreated
  EXPECT_EQ(factories, 5);
  EXPECT_FALSE(cache.contains(3));
  cache.set_capacity(1);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_TRUE(cache.contains(2));
}

TEST(RuntimeOnceCache, DroppedValuesLiveWhileACallerHoldsThem) {
  OnceCache<int, std::shared_ptr<int>> cache;
  cache.set_capacity(1);
  std::shared_ptr<int> held = cache.get_or_create(1, [] { return std::make_shared<int>(7); });
  std::weak_ptr<int> dropped_later = cache.get_or_create(2, [] { return std::make_shared<int>(8); });
  EXPECT_FALSE(cache.contains(1));
  EXPECT_EQ(*held, 7);  // still alive: the caller holds it
  cache.get_or_create(3, [] { return std::make_shared<int>(9); });
  EXPECT_TRUE(dropped_later.expired());  // nobody held 2: released when dropped
}

TEST(RuntimeOnceCache, AnEntryBeingCreatedIsNeverDropped) {
  OnceCache<int, int> cache;
  cache.set_capacity(1);
  std::promise<void> release;
  std::shared_future<void> go = release.get_future().share();
  std::latch started(1);
  std::thread slow([&] {
    cache.get_or_create(1, [&] {
      started.count_down();
      go.wait();
      return 1;
    });
  });
  started.wait();
  for (int k = 2; k < 10; ++k) cache.get_or_create(k, [k] { return k; });
  EXPECT_TRUE(cache.contains(1));  // in flight: kept although over capacity
  release.set_value();
  slow.join();
  cache.get_or_create(10, [] { return 10; });
  EXPECT_EQ(cache.size(), 1u);
}

TEST(RuntimeOnceCache, SixteenThreadsUnderATightCapacityAgreeOnValues) {
  OnceCache<int, std::shared_ptr<int>> cache;
  cache.set_capacity(8);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        int key = (i * 7 + t) % 40;
        if (*cache.get_or_create(key, [key] { return std::make_shared<int>(key * 3); }) !=
            key * 3)
          ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_LE(cache.size(), 8u);
}

}  // namespace
}  // namespace adjoint::runtime
