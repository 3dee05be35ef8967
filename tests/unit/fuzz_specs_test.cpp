// The spec fuzzer run by ctest: the regression corpus (tests/fuzz/corpus), a fixed-seed run and
// a time-seeded run that prints its seed (ADJOINT_FUZZ_SEED=N reruns it). Every case must lower
// or fail with a named adjoint::Error within ADJOINT_FUZZ_CASE_SECONDS (default 2 s of the
// thread's CPU time, so that a loaded CI machine does not fail it); a case that runs ten times
// over that bound in wall time is reported with its text and ends the process, so a hang is
// never silent. Budgets: ADJOINT_FUZZ_SECONDS (default 20 s per seeded run).
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

#include "fuzz/spec_fuzzer.h"

namespace adjoint::fuzz {
namespace {

double env_seconds(const char* name, double fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atof(v) : fallback;
}

double case_bound() { return env_seconds("ADJOINT_FUZZ_CASE_SECONDS", 2.0); }

/// Ends the process with the case's text when one case runs past ten times the bound.
class Watchdog {
 public:
  Watchdog() : thread_([this] { watch(); }) {}
  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  void begin(const std::string& text) {
    std::lock_guard lock(mutex_);
    text_ = text;
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(10 * case_bound()));
    running_ = true;
    wake_.notify_all();
  }
  void end() {
    std::lock_guard lock(mutex_);
    running_ = false;
  }

 private:
  void watch() {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      if (running_ && std::chrono::steady_clock::now() > deadline_) {
        std::fprintf(stderr, "fuzz: case hung (over %.0f s): %s\n", 10 * case_bound(),
                     text_.c_str());
        std::fflush(stderr);
        std::_Exit(3);
      }
      wake_.wait_for(lock, std::chrono::milliseconds(200));
    }
  }
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false, running_ = false;
  std::string text_;
  std::chrono::steady_clock::time_point deadline_;
  std::thread thread_;
};

CaseResult checked_case(Watchdog& watchdog, const std::string& text) {
  watchdog.begin(text);
  CaseResult r = run_spec_case(text);
  watchdog.end();
  EXPECT_TRUE(r.outcome == Outcome::kLowered || r.outcome == Outcome::kNamedError)
      << outcome_name(r.outcome) << " for: " << text << "\n  " << r.message;
  EXPECT_LE(r.seconds.count(), case_bound()) << "slow case: " << text;
  return r;
}

struct Tally {
  int cases = 0, lowered = 0, errors = 0;
  double slowest = 0;
  std::string slowest_text;
};

Tally fuzz(uint64_t seed, double budget_seconds, int max_cases) {
  Watchdog watchdog;
  std::mt19937_64 rng(seed);
  std::vector<std::string> seeds = seed_specs();
  Tally tally;
  auto start = std::chrono::steady_clock::now();
  while (tally.cases < max_cases &&
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
             budget_seconds) {
    std::string text =
        mutate_spec(seeds[std::uniform_int_distribution<size_t>(0, seeds.size() - 1)(rng)], rng);
    CaseResult r = checked_case(watchdog, text);
    ++tally.cases;
    (r.outcome == Outcome::kLowered ? tally.lowered : tally.errors)++;
    if (r.seconds.count() > tally.slowest) {
      tally.slowest = r.seconds.count();
      tally.slowest_text = text;
    }
    if (::testing::Test::HasFailure()) break;  // the first failing case is the one to report
  }
  std::printf("fuzz: seed %llu: %d cases (%d lowered, %d named errors), slowest %.3f s: %s\n",
              static_cast<unsigned long long>(seed), tally.cases, tally.lowered, tally.errors,
              tally.slowest, tally.slowest_text.c_str());
  return tally;
}

TEST(FuzzSpecs, RegressionCorpus) {
  std::ifstream in(std::string(ADJOINT_FUZZ_CORPUS_DIR) + "/issue13.txt");
  ASSERT_TRUE(in) << "missing corpus " << ADJOINT_FUZZ_CORPUS_DIR;
  Watchdog watchdog;
  int cases = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    size_t space = line.find(' ');
    std::string expected = line.substr(0, space), text = line.substr(space + 1);
    ASSERT_TRUE(expected == "error" || expected == "lowered") << line;
    CaseResult r = checked_case(watchdog, text);
    EXPECT_EQ(outcome_name(r.outcome),
              std::string(outcome_name(expected == "error" ? Outcome::kNamedError
                                                           : Outcome::kLowered)))
        << text << "\n  " << r.message;
    ++cases;
  }
  EXPECT_GE(cases, 11);
}

TEST(FuzzSpecs, FixedSeed) {
  Tally t = fuzz(13, env_seconds("ADJOINT_FUZZ_SECONDS", 20), 20000);
  // The mutations keep a share of valid specs, so both outcomes are exercised.
  EXPECT_GT(t.lowered, 0);
  EXPECT_GT(t.errors, 0);
}

TEST(FuzzSpecs, TimeSeeded) {
  const char* fixed = std::getenv("ADJOINT_FUZZ_SEED");
  uint64_t seed = fixed && *fixed
                      ? std::strtoull(fixed, nullptr, 10)
                      : static_cast<uint64_t>(
                            std::chrono::system_clock::now().time_since_epoch().count());
  std::printf("fuzz: time-seeded run, rerun with ADJOINT_FUZZ_SEED=%llu\n",
              static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  Tally t = fuzz(seed, env_seconds("ADJOINT_FUZZ_SECONDS", 15), 1000000);
  EXPECT_GT(t.cases, 0);
}

}  // namespace
}  // namespace adjoint::fuzz
