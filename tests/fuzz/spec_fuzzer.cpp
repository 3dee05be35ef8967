// Spec mutator and case runner of the fuzzer (see spec_fuzzer.h).
#include "fuzz/spec_fuzzer.h"

#include <time.h>

#include <exception>
#include <new>
#include <sstream>

#include "compiler/lower.h"
#include "ir/error.h"
#include "ir/verifier.h"
#include "ops/registry.h"

namespace adjoint::fuzz {
namespace {

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, separator)) parts.push_back(part);
  return parts;
}

std::string join(const std::vector<std::string>& parts, char separator) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += separator;
    out += parts[i];
  }
  return out;
}

template <typename T>
const T& pick(const std::vector<T>& values, std::mt19937_64& rng) {
  return values[std::uniform_int_distribution<size_t>(0, values.size() - 1)(rng)];
}

/// Integers at the edges of every range the ops and the compiler care about.
std::string edge_integer(std::mt19937_64& rng) {
  static const std::vector<std::string> edges = {
      "0",          "1",          "-1",         "2",          "3",
      "7",          "31",         "33",         "255",        "1024",
      "65535",      "65536",      "1048576",    "1048577",    "2147483647",
      "2147483648", "4294967295", "4294967296", "-2147483648", "4611686018427387904",
      "9223372036854775807",      "-9223372036854775808",     "9223372036854775808",
      "99999999999999999999",     "0x10",       "1e3",        "",           "+5"};
  if (std::bernoulli_distribution(0.3)(rng)) {
    int bits = std::uniform_int_distribution<int>(0, 62)(rng);
    int64_t base = int64_t{1} << bits;
    int64_t delta = std::uniform_int_distribution<int64_t>(-2, 2)(rng);
    return std::to_string(base + delta);
  }
  return pick(edges, rng);
}

std::string edge_float(std::mt19937_64& rng) {
  static const std::vector<std::string> edges = {
      "0",   "-0",  "1",      "-1",      "0.5",    "1.7",     "1e-300", "1e300",
      "nan", "inf", "-inf",   "1e-45",   "3.4e38", "0.3",     "none",   "2",
      "1e-9", "abc", "1,2",   "0.0000001"};
  return pick(edges, rng);
}

std::string random_word(std::mt19937_64& rng) {
  static const std::vector<std::string> words = {
      "f16",  "bf16",     "f32",       "f64",   "i32",         "bool",     "float16",
      "true", "false",    "zeros",     "border", "reflection", "bilinear", "nearest",
      "bicubic", "channels_last", "contiguous", "allow_atomics", "default", "=", "==", ",",
      "x=",   "=1",       "determinism=allow_atomics", "layout=channels_last", "scales=2",
      "output_mask=0,0",  "with_grad_x_post=true", "n=0", "dim=0", "batch=0"};
  return pick(words, rng);
}

std::string mutate_value(const std::string& value, std::mt19937_64& rng) {
  std::vector<std::string> items = split(value, ',');
  if (items.empty()) items.push_back("");
  switch (std::uniform_int_distribution<int>(0, 6)(rng)) {
    case 0:
    case 1: {  // one element replaced by an edge integer
      items[std::uniform_int_distribution<size_t>(0, items.size() - 1)(rng)] = edge_integer(rng);
      return join(items, ',');
    }
    case 2:  // an element added
      items.insert(items.begin() + std::uniform_int_distribution<size_t>(0, items.size())(rng),
                   edge_integer(rng));
      return join(items, ',');
    case 3:  // an element dropped
      items.erase(items.begin() + std::uniform_int_distribution<size_t>(0, items.size() - 1)(rng));
      return join(items, ',');
    case 4: return edge_float(rng);
    case 5: return random_word(rng);
    default: {  // every element scaled up
      for (std::string& item : items) {
        if (!item.empty() && std::isdigit(static_cast<unsigned char>(item[0])))
          item += std::to_string(std::uniform_int_distribution<int>(0, 999)(rng));
      }
      return join(items, ',');
    }
  }
}

std::string mutate_once(const std::string& spec, std::mt19937_64& rng) {
  std::vector<std::string> words = split(spec, ' ');
  if (words.empty()) words.push_back("");
  static const std::vector<std::string> op_names = [] {
    std::vector<std::string> names;
    for (const ops::OpDefinition& op : ops::all_ops()) names.push_back(op.name);
    names.push_back("upsample_nearest4d_backward");
    names.push_back("");
    return names;
  }();
  size_t w = std::uniform_int_distribution<size_t>(0, words.size() - 1)(rng);
  switch (std::uniform_int_distribution<int>(0, 9)(rng)) {
    case 0:
    case 1:
    case 2:
    case 3: {  // an attribute's value mutated
      if (words.size() < 2) break;
      w = std::uniform_int_distribution<size_t>(1, words.size() - 1)(rng);
      size_t eq = words[w].find('=');
      if (eq == std::string::npos) break;
      words[w] = words[w].substr(0, eq + 1) + mutate_value(words[w].substr(eq + 1), rng);
      break;
    }
    case 4: words[0] = pick(op_names, rng); break;  // another op's attributes
    case 5:
      if (words.size() > 1) words.erase(words.begin() + std::max<size_t>(w, 1));
      break;
    case 6: words.push_back(words[w]); break;  // a duplicate
    case 7: words.push_back(random_word(rng)); break;
    case 8: {  // an attribute name misspelt
      std::string& word = words[w];
      if (!word.empty()) word[std::uniform_int_distribution<size_t>(0, word.size() - 1)(rng)] ^= 0x20;
      break;
    }
    default: {  // a byte of the text flipped
      std::string text = join(words, ' ');
      if (text.empty()) return text;
      size_t at = std::uniform_int_distribution<size_t>(0, text.size() - 1)(rng);
      text[at] = static_cast<char>(std::uniform_int_distribution<int>(1, 255)(rng));
      return text;
    }
  }
  return join(words, ' ');
}

double thread_cpu_seconds() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

}  // namespace

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::kLowered: return "lowered";
    case Outcome::kNamedError: return "named error";
    case Outcome::kUnnamedError: return "error without a message";
    case Outcome::kForeignException: return "non-adjoint exception";
  }
  return "?";
}

std::vector<std::string> seed_specs() {
  std::vector<std::string> seeds;
  for (const ops::OpDefinition& op : ops::all_ops()) {
    for (const std::string& example : op.examples) seeds.push_back(example);
  }
  return seeds;
}

std::string mutate_spec(const std::string& seed, std::mt19937_64& rng) {
  std::string text = seed;
  int rounds = std::uniform_int_distribution<int>(1, 3)(rng);
  for (int i = 0; i < rounds; ++i) text = mutate_once(text, rng);
  return text;
}

CaseResult run_spec_case(const std::string& text) {
  CaseResult result;
  const double start = thread_cpu_seconds();
  try {
    ops::Specialization spec = ops::parse_specialization(text);
    ir::Program program = spec.build_program();
    ir::verify(program);
    for (compiler::Determinism d :
         {compiler::Determinism::kDefault, compiler::Determinism::kAllowAtomics}) {
      compiler::LowerOptions options;
      options.determinism = d;
      compiler::lower(program, options);
    }
    result.outcome = Outcome::kLowered;
  } catch (const Error& e) {
    result.message = e.what();
    result.outcome = result.message.empty() ? Outcome::kUnnamedError : Outcome::kNamedError;
  } catch (const std::exception& e) {
    result.message = e.what();
    result.outcome = Outcome::kForeignException;
  } catch (...) {
    result.message = "an exception of unknown type";
    result.outcome = Outcome::kForeignException;
  }
  result.seconds = std::chrono::duration<double>(thread_cpu_seconds() - start);
  return result;
}

}  // namespace adjoint::fuzz
