// Emission and compilation without a GPU: every registered op (each example specialization and
// its f16/bf16/f32/f64 variants where the op allows them) is lowered and every kernel compiled
// by NVRTC for sm_80 and sm_90, plus programs that use every expression node, dtype, grid
// binding and scatter strategy, plus the benchmark's upsample shapes with vector groups (whose
// PTX must hold vector stores and no local memory). Identical sources are compiled once per
// architecture, on as many threads as the machine has; the total time is printed. NVRTC must
// accept every unit without a warning. Skipped when NVRTC is missing.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "compiler/lower.h"
#include "ir/builder.h"
#include "ir/error.h"
#include "ops/registry.h"
#include "runtime/nvrtc.h"

namespace adjoint {
namespace {

using ir::DType;
using ir::Expr;
using ir::Var;

constexpr int kArchs[] = {80, 90};
constexpr DType kFloatDtypes[] = {DType::kF16, DType::kBF16, DType::kF32, DType::kF64};

/// One translation unit to compile, with where it came from.
struct Unit {
  std::string origin;
  std::string entry;
  std::string source;
};

/// Collects the kernels of lowered programs, each distinct source once.
class Units {
 public:
  void add(const std::string& origin, const ir::Program& program,
           const compiler::LowerOptions& options = {}) {
    compiler::CompiledProgram compiled = compiler::lower(program, options);
    ++programs_;
    for (const compiler::CompiledKernel& k : compiled.kernels) {
      if (!sources_.insert(k.source).second) continue;
      units_.push_back(Unit{origin, k.entry, k.source});
      if (std::getenv("ADJOINT_JIT_TEST_PRINT"))
        std::printf("// from %s\n%s", origin.c_str(), k.source.c_str());
    }
  }
  const std::vector<Unit>& units() const { return units_; }
  int programs() const { return programs_; }

 private:
  std::vector<Unit> units_;
  std::set<std::string> sources_;
  int programs_ = 0;
};

/// The example itself and a copy per float dtype its schema allows.
std::vector<std::string> variants(const ops::OpDefinition& op, const std::string& example) {
  std::vector<std::string> texts = {example};
  for (const ops::AttrSpec& attr : op.attributes) {
    if (attr.kind != ops::AttrKind::kDType) continue;
    ops::Specialization spec = ops::parse_specialization(example);
    for (DType t : kFloatDtypes) {
      std::string name(ir::dtype_name(t));
      bool allowed = attr.choices.empty() || std::find(attr.choices.begin(), attr.choices.end(),
                                                       name) != attr.choices.end();
      if (!allowed || spec.raw(attr.name) == name) continue;
      std::istringstream words(spec.to_string());
      std::string word, text;
      while (words >> word)
        text += (word.rfind(attr.name + "=", 0) == 0 ? attr.name + "=" + name : word) + " ";
      texts.push_back(text);
    }
  }
  return texts;
}

/// Compiles every unit for every architecture on all hardware threads; returns the failures.
std::vector<std::string> compile_all(const std::vector<Unit>& units, double* seconds) {
  struct Job {
    const Unit* unit;
    int arch;
  };
  std::vector<Job> jobs;
  for (const Unit& u : units) {
    for (int arch : kArchs) jobs.push_back(Job{&u, arch});
  }
  std::atomic<size_t> next{0};
  std::mutex mutex;
  std::vector<std::string> failures;
  auto worker = [&] {
    for (size_t i = next++; i < jobs.size(); i = next++) {
      runtime::CompileRequest request;
      request.source = jobs[i].unit->source;
      request.name = jobs[i].unit->entry + ".cu";
      request.arch = jobs[i].arch;
      try {
        runtime::CompileResult result = runtime::Nvrtc::instance().compile(request);
        if (result.cubin.empty()) throw Error("no cubin for sm_" + std::to_string(request.arch));
        if (result.log.find("warning") != std::string::npos) {
          throw Error("generated code should compile without warnings:\n" + result.log);
        }
      } catch (const Error& e) {
        std::lock_guard<std::mutex> lock(mutex);
        failures.push_back(jobs[i].unit->origin + " (" + jobs[i].unit->entry + ", sm_" +
                           std::to_string(jobs[i].arch) + "): " + e.what() + "\n" +
                           jobs[i].unit->source);
      }
    }
  };
  auto start = std::chrono::steady_clock::now();
  unsigned threads = std::max(2u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (std::thread& t : pool) t.join();
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return failures;
}

void expect_all_compile(const Units& units, const std::string& what) {
  double seconds = 0;
  std::vector<std::string> failures = compile_all(units.units(), &seconds);
  std::printf("[ jit      ] %s: %d programs, %zu distinct kernels, %zu NVRTC compiles in %.2f s\n",
              what.c_str(), units.programs(), units.units().size(),
              units.units().size() * std::size(kArchs), seconds);
  for (const std::string& f : failures) ADD_FAILURE() << f;
}

class JitCompile : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      runtime::Nvrtc::instance();
    } catch (const Error& e) {
      GTEST_SKIP() << "NVRTC is not available: " << e.what();
    }
  }
};

TEST_F(JitCompile, EveryRegisteredOpExampleAndDtypeVariant) {
  Units units;
  int specializations = 0;
  for (const ops::OpDefinition& op : ops::all_ops()) {
    for (const std::string& example : op.examples) {
      for (const std::string& text : variants(op, example)) {
        ops::Specialization spec = ops::parse_specialization(text);
        ir::Program program;
        try {
          program = spec.build_program();
        } catch (const Error& e) {
          if (text == example) throw;  // a variant the op rejects is fine; its own example is not
          continue;
        }
        units.add(spec.to_string(), program);
        ++specializations;
      }
    }
  }
  EXPECT_GT(specializations, 0) << "no op is registered";
  expect_all_compile(units, "registered ops");
}

/// The upsample shapes of the benchmark (issue 5) in every float dtype, channels-last, 1d, 3d
/// and nearest-exact, at sizes that get vector groups: they compile like every other kernel, and
/// their PTX holds the group's vector store and no local memory (every per-element array, span
/// and table stays in registers or folds away once the element loops are unrolled).
TEST_F(JitCompile, VectorGroupsOfTheBenchmarkShapes) {
  std::vector<std::string> specs;
  for (const char* shape : {"input_size=8,64,128,128 output_size=256,256",
                            "input_size=16,256,64,64 output_size=128,128",
                            "input_size=32,3,224,224 output_size=448,448",
                            "input_size=4,32,256,256 output_size=384,192",
                            "input_size=8,64,256,256 output_size=128,128"}) {
    for (DType t : kFloatDtypes) {
      specs.push_back(std::string("upsample_nearest2d_backward dtype=") +
                      std::string(ir::dtype_name(t)) + " " + shape);
    }
  }
  for (const char* spec :
       {"upsample_nearest2d_backward dtype=bf16 input_size=8,64,128,128 output_size=256,256 "
        "layout=channels_last",
        "upsample_nearest2d_backward dtype=f32 input_size=4,32,256,256 output_size=384,192 "
        "layout=channels_last",
        "_upsample_nearest_exact2d_backward dtype=f16 input_size=4,32,256,256 output_size=384,192",
        "_upsample_nearest_exact3d_backward dtype=bf16 input_size=2,16,32,64,64 "
        "output_size=48,96,32",
        "upsample_nearest1d_backward dtype=f32 input_size=64,64,1024 output_size=1536"}) {
    specs.push_back(spec);
  }
  Units units;
  for (const std::string& spec : specs)
    units.add(spec, ops::parse_specialization(spec).build_program());
  expect_all_compile(units, "vector groups");
  for (const Unit& unit : units.units()) {
    ASSERT_NE(unit.source.find("adjoint::store_elements"), std::string::npos) << unit.origin;
    runtime::CompileRequest request;
    request.source = unit.source;
    request.name = unit.entry + ".cu";
    request.want_cubin = false;
    std::string ptx = runtime::Nvrtc::instance().compile(request).ptx;
    EXPECT_EQ(ptx.find(".local"), std::string::npos) << unit.origin << "\n" << ptx;
    EXPECT_NE(ptx.find("st.global.cs.v"), std::string::npos) << unit.origin << "\n" << ptx;
  }
}

/// The tuning knobs of LowerOptions (block size, vector bytes, streaming hints) on benchmark
/// shapes: every variant compiles without a warning, keeps its arrays in registers, and the
/// streaming variants' PTX moves their aligned words with ld.global.cs / st.global.cs.
TEST_F(JitCompile, TuningVariantsOfTheBenchmarkShapes) {
  struct Knobs {
    int block_size, vector_bytes;
    bool streaming;
  };
  const Knobs knobs[] = {{128, 0, false}, {512, 0, false}, {0, 8, false},
                         {0, 32, false},  {0, 0, true},    {512, 32, true}};
  Units units;
  for (const char* spec :
       {"upsample_nearest2d_backward dtype=bf16 input_size=32,3,224,224 output_size=448,448",
        "upsample_nearest2d_backward dtype=f32 input_size=32,3,224,224 output_size=448,448",
        "upsample_nearest2d_backward dtype=bf16 input_size=8,64,256,256 output_size=128,128",
        "upsample_nearest2d_backward dtype=f16 input_size=4,32,256,256 output_size=384,192"}) {
    for (const Knobs& k : knobs) {
      compiler::LowerOptions options;
      options.block_size = k.block_size;
      options.vector_bytes = k.vector_bytes;
      options.streaming_loads = options.streaming_stores = k.streaming;
      units.add(std::string(spec) + " block_size=" + std::to_string(k.block_size) +
                    " vector_bytes=" + std::to_string(k.vector_bytes) +
                    " streaming=" + std::to_string(k.streaming),
                ops::parse_specialization(spec).build_program(), options);
    }
  }
  expect_all_compile(units, "tuning variants");
  for (const Unit& unit : units.units()) {
    runtime::CompileRequest request;
    request.source = unit.source;
    request.name = unit.entry + ".cu";
    request.want_cubin = false;
    std::string ptx = runtime::Nvrtc::instance().compile(request).ptx;
    EXPECT_EQ(ptx.find(".local"), std::string::npos) << unit.origin << "\n" << ptx;
    const bool streaming = unit.source.find("_streaming<") != std::string::npos;
    EXPECT_EQ(streaming, unit.origin.find("streaming=1") != std::string::npos) << unit.origin;
    EXPECT_EQ(ptx.find("ld.global.cs.") != std::string::npos, streaming) << unit.origin;
    EXPECT_EQ(ptx.find("st.global.cs.") != std::string::npos, streaming) << unit.origin;
  }
}

/// Every unary, binary, comparison, select, cast and reduction at every dtype, in one kernel per
/// dtype, with loads under lazily evaluated branches.
ir::Program every_node(DType t) {
  ir::ProgramBuilder b(std::string("every_node_") + std::string(ir::dtype_name(t)));
  ir::Tensor x = b.input("x", t, {4, 8});
  ir::Tensor idx = b.input("index", DType::kI32, {4});
  ir::Tensor out = b.output("out", t, {4, 8});
  ir::Tensor counts = b.output("counts", DType::kI64, {4});
  Var i("i"), j("j"), k("k"), l("l"), m("m"), p("p");
  Expr v = ir::load(x, {i, j});
  Expr acc = ir::cast(ir::default_accumulation(t), v);
  Expr e = acc + ir::cast(ir::default_accumulation(t),
                          v * v - ir::sqrt(ir::abs(v)) / (v + ir::constant(t, 1.0)) +
                              (v % ir::constant(t, 0.75)) + ir::pow(v, ir::exp(v)));
  for (auto f : {ir::abs, ir::floor, ir::ceil, ir::round_even, ir::exp, ir::log, ir::sqrt,
                 ir::rsqrt, ir::sigmoid, ir::tanh, ir::sin, ir::cos}) {
    e = e + f(acc);
  }
  e = e + ir::UnaryNode::make(ir::UnaryOp::kLog1p, acc) +
      ir::UnaryNode::make(ir::UnaryOp::kExpm1, -acc);
  e = ir::pow(ir::max(ir::min(e, acc * acc), acc / (acc + 1.0)), acc) - (e % acc);
  Expr data_index = ir::cast(DType::kI64, ir::load(idx, {i}));
  Expr in_bounds = data_index >= 0 && data_index < 8;
  Expr gathered = ir::select(in_bounds,
                             ir::cast(ir::default_accumulation(t),
                                      ir::load(x, {i, ir::select(in_bounds, data_index, Expr(0))})),
                             acc);
  Expr reduced =
      ir::sum({ir::range(k, Expr(8))}, ir::cast(ir::default_accumulation(t), ir::load(x, {i, k})),
              ir::default_accumulation(t)) +
      ir::maximum({ir::range(l, j, Expr(8) - j)},
                  ir::cast(ir::default_accumulation(t), ir::load(x, {i, l})),
                  ir::default_accumulation(t));
  Expr value = ir::cast(
      t, e + gathered * reduced + ir::cast(ir::default_accumulation(t), (i * 8 - j) / 3 % 5));
  Var n("n");
  Expr count = ir::sum({ir::range(m, Expr(8))},
                       ir::cast(DType::kI64, ir::load(x, {n, m}) > ir::constant(t, 0.0)) *
                           (ir::cast(DType::kI64, ir::load(idx, {n})) / 2),
                       DType::kI64) +
               ir::minimum({ir::range(p, Expr(8))}, ir::cast(DType::kI64, ir::load(idx, {n})) - p,
                           DType::kI64);
  b.kernel("values", {ir::compute(out, ir::over(out, {i, j}), value)});
  b.kernel("counts", {ir::compute(counts, ir::over(counts, {n}),
                                  ir::select(n > 1, count, Expr(int64_t{0})))});
  return std::move(b).build();
}

/// Casts between every pair of dtypes.
ir::Program every_cast() {
  ir::ProgramBuilder b("every_cast");
  std::vector<DType> all = {DType::kF16, DType::kBF16, DType::kF32, DType::kF64,
                            DType::kI32, DType::kI64,  DType::kBool};
  std::vector<ir::Tensor> inputs, outputs;
  for (DType from : all)
    inputs.push_back(b.input(std::string("in_") + std::string(ir::dtype_name(from)), from, {16}));
  std::vector<ir::Stage> stages;
  for (DType to : all) {
    ir::Tensor out = b.output(std::string("out_") + std::string(ir::dtype_name(to)), to, {16});
    Var i("i");
    Expr e = ir::CastNode::make(to, ir::load(inputs[0], {i}));
    for (size_t f = 1; f < all.size(); ++f) {
      Expr c = ir::CastNode::make(to, ir::load(inputs[f], {i}));
      e = to == DType::kBool ? ir::BinaryNode::make(ir::BinaryOp::kOr, e, c)
                             : ir::BinaryNode::make(ir::BinaryOp::kMax, e, c);
    }
    stages.push_back(ir::compute(out, ir::over(out, {i}), e));
  }
  b.kernel("casts", stages);
  return std::move(b).build();
}

/// Data-dependent scatters into each float dtype (atomics), accumulated in f32/f64 and, for the
/// 16-bit formats, in their own dtype too (native f16/bf16 atomics).
ir::Program every_atomic(DType t, bool own_accumulation) {
  ir::ProgramBuilder b(std::string("atomics_") + std::string(ir::dtype_name(t)) +
                       (own_accumulation ? "_own" : ""));
  DType acc = own_accumulation ? t : ir::default_accumulation(t);
  ir::Tensor x = b.input("x", t, {32});
  ir::Tensor index = b.input("index", DType::kI64, {32});
  ir::Tensor out = b.output("out", t, {7});
  Var i("i");
  Expr where = ir::load(index, {i});
  b.kernel("scatter",
           {ir::scatter_add(out, {ir::min(ir::max(where, 0), 6)}, ir::cast(acc, ir::load(x, {i})),
                            ir::over(x, {i}), acc, where >= 0)});
  return std::move(b).build();
}

/// Explicit grids with block, thread, serial and vectorized linear axes.
ir::Program every_binding() {
  ir::ProgramBuilder b("bindings");
  ir::Tensor x = b.input("x", DType::kF32, {3, 4, 64});
  ir::Tensor y = b.output("y", DType::kF32, {3, 4, 64});
  ir::Tensor z = b.output("z", DType::kF32, {3, 4, 64});
  auto grid = [](std::vector<ir::AxisBinding> bindings, int block, int vector_width) {
    ir::GridConfig g;
    g.is_set = true;
    g.bindings = std::move(bindings);
    g.block_size = block;
    g.vector_width = vector_width;
    return g;
  };
  using ir::AxisBinding;
  Var a("a"), c("c"), d("d"), e("e"), f("f"), g("g");
  b.kernel("block_thread_serial",
           {ir::compute(y, ir::over(y, {a, c, d}),
                        ir::load(x, {a, c, d}) * ir::constant(DType::kF32, 2.0))},
           grid({AxisBinding::kBlock, AxisBinding::kSerial, AxisBinding::kThread}, 64, 1));
  b.kernel(
      "linear_vector_thread",
      {ir::compute(z, ir::over(z, {e, f, g}), ir::load(x, {e, f, g}) + ir::load(y, {e, f, g}))},
      grid({AxisBinding::kThread, AxisBinding::kLinear, AxisBinding::kLinear}, 96, 4));
  return std::move(b).build();
}

TEST_F(JitCompile, EveryNodeDtypeBindingAndScatterStrategy) {
  Units units;
  for (DType t : kFloatDtypes) {
    units.add("every_node", every_node(t));
    units.add("atomics", every_atomic(t, false));
    if (t != DType::kF32 && t != DType::kF64) units.add("atomics", every_atomic(t, true));
  }
  units.add("casts", every_cast());
  units.add("bindings", every_binding());
  expect_all_compile(units, "node coverage");
}

}  // namespace
}  // namespace adjoint
