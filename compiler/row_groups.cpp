// fuse_row_groups (row_groups.h): finds runs of consecutive kernels whose cross-kernel reads
// stay inside a row and makes each run one row-group kernel.
#include "compiler/row_groups.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "compiler/program_utils.h"
#include "ir/error.h"
#include "ir/visitor.h"

namespace adjoint::compiler {
namespace {

/// The reduction iterations one evaluation of `e` runs (nested reductions multiply, sibling
/// ones add); -1 when some extent is not a constant. Memoized by node, so linear on DAGs;
/// `longest` receives the largest trip count of one reduce.
int64_t point_work(const ir::Expr& e, std::unordered_map<const ir::ExprNode*, int64_t>& memo,
                   int64_t& longest) {
  if (auto it = memo.find(e.get()); it != memo.end()) return it->second;
  int64_t work = 0;
  auto add = [&](int64_t w) {
    work = (w < 0 || work < 0) ? -1 : std::min<int64_t>(work + w, int64_t{1} << 40);
  };
  if (auto* r = e.as<ir::ReduceNode>()) {
    int64_t trips = 1;
    for (const ir::Axis& axis : r->axes) {
      auto* extent = axis.extent.as<ir::IntConstNode>();
      if (!extent) trips = -1;
      if (trips >= 0) trips = std::min<int64_t>(trips * std::max<int64_t>(extent->value, 0), int64_t{1} << 40);
    }
    longest = trips < 0 ? int64_t{1} << 40 : std::max(longest, trips);
    const int64_t body = point_work(r->body, memo, longest);
    add(trips < 0 || body < 0 ? -1 : std::min<int64_t>(trips * (1 + body), int64_t{1} << 40));
  } else {
    ir::for_each_child(e, [&](const ir::Expr& child) { add(point_work(child, memo, longest)); });
  }
  memo[e.get()] = work;
  return work;
}

/// Why `kernel` cannot join a row group, or empty when it can.
std::string ineligible(const ir::Kernel& kernel, const RowGroupOptions& options) {
  if (kernel.stages.empty()) return "it has no stages";
  if (options.excluded_kernels.count(kernel.name)) return "it keeps its own launch";
  if (kernel.row_axes > 0) return "it is a row-group kernel already";
  if (kernel.grid.is_set) return "its grid is explicit";
  if (kernel.grid.reduction_lanes > 1) return "its reductions are warp-cooperative";
  if (kernel.grid.tile_points > 1) return "it has a thread tile";
  if (kernel.grid.block_tokens > 0) return "it is a block reduction";
  for (const ir::Stage& stage : kernel.stages) {
    if (stage.kind != ir::StageKind::kCompute) return "it has a scatter_add stage";
    if (stage.domain.empty()) return "its domain has no axis";
  }
  for (int64_t e : domain_extents(kernel)) {
    if (e <= 0) return "its domain is empty";
  }
  std::unordered_map<const ir::ExprNode*, int64_t> memo;
  for (const ir::Stage& stage : kernel.stages) {
    int64_t longest = 0;
    const int64_t work = point_work(stage.value, memo, longest);
    if (longest > options.max_reduction_trips)
      return "a point of " + stage.target->name + " runs a reduction of " +
             std::to_string(longest) + " iterations (at most " +
             std::to_string(options.max_reduction_trips) + ")";
    if (work < 0 || work > options.max_point_work)
      return "a point of " + stage.target->name + " runs " +
             (work < 0 ? std::string("a reduction of variable length")
                       : std::to_string(work) + " reduction iterations") +
             " (at most " + std::to_string(options.max_point_work) + ")";
  }
  return "";
}

int64_t product(const std::vector<int64_t>& extents, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= extents[i];
  return p;
}

/// A run of kernels being grown: the row axes its reads allow so far and what it writes.
class GroupBuilder {
 public:
  GroupBuilder(const ir::Kernel& first, int64_t max_row_points, int64_t max_params)
      : max_row_points_(max_row_points), max_params_(max_params),
        extents_(domain_extents(first)) {
    rows_ = extents_.size();
    std::string why;
    if (admit(first, why)) commit(first);
    else rows_ = 0;
  }

  /// Adds `kernel` if the run stays legal with some row axes; otherwise leaves the run as it
  /// was and says why.
  bool try_add(const ir::Kernel& kernel, std::string& why) {
    const size_t saved_rows = rows_;
    if (!admit(kernel, why)) {
      rows_ = saved_rows;
      return false;
    }
    commit(kernel);
    return true;
  }

  size_t row_axes() const { return rows_; }
  const std::vector<const ir::Kernel*>& kernels() const { return kernels_; }
  int64_t rows() const { return product(extents_, 0, rows_); }
  /// The most points a stage of the run has per row.
  int64_t max_points() const {
    int64_t most = 1;
    for (const ir::Kernel* k : kernels_) {
      std::vector<int64_t> e = domain_extents(*k);
      most = std::max(most, product(e, rows_, e.size()));
    }
    return most;
  }

 private:
  /// Narrows rows_ to what `kernel`'s domain and reads allow; false (with the reason) when no
  /// row axis is left or a row gets too many points.
  bool admit(const ir::Kernel& kernel, std::string& why) {
    const std::vector<int64_t> e = domain_extents(kernel);
    size_t common = 0;
    while (common < std::min({rows_, e.size(), extents_.size()}) && e[common] == extents_[common])
      ++common;
    rows_ = common;
    if (rows_ == 0) {
      why = "its domain shares no leading extent with the kernels before it";
      return false;
    }
    bool crosses = false;  // some read of the run's output at another point of the row
    for (const ir::Stage& stage : kernel.stages) {
      for (const ir::Expr& root : stage_expressions(stage)) {
        for_each_node(root, [&](const ir::Expr& node) {
          auto* load = node.as<ir::LoadNode>();
          if (!load) return;
          upcoming_.insert(load->tensor.get());  // read by this kernel
          if (!written_.count(load->tensor.get())) return;
          size_t same = 0;
          while (same < std::min(load->indices.size(), stage.domain.size()) &&
                 load->indices[same].as<ir::VarNode>() == stage.domain[same].var.get())
            ++same;
          rows_ = std::min(rows_, same);
          crosses |= same < load->indices.size() || load->indices.size() != stage.domain.size();
        });
      }
    }
    if (!kernels_.empty() && !crosses) {
      why = "it reads nothing the kernels before it wrote at another point than its own";
      upcoming_.clear();
      return false;
    }
    std::set<const ir::TensorNode*> params = written_;
    params.insert(read_.begin(), read_.end());
    params.insert(upcoming_.begin(), upcoming_.end());
    for (const ir::Tensor& t : tensors_written(kernel)) params.insert(t.get());
    if (static_cast<int64_t>(params.size()) > max_params_) {
      why = "the fused kernel would take " + std::to_string(params.size()) +
            " tensors (at most " + std::to_string(max_params_) + ")";
      upcoming_.clear();
      return false;
    }
    for (const ir::Tensor& t : tensors_written(kernel)) {
      if (read_.count(t.get())) {
        why = "it writes '" + t->name + "', which a kernel before it in the group reads";
        upcoming_.clear();
        return false;
      }
    }
    if (rows_ == 0) {
      why = "it reads what a kernel before it wrote outside its own row";
      upcoming_.clear();
      return false;
    }
    kernels_.push_back(&kernel);
    const int64_t points = max_points();
    kernels_.pop_back();
    if (points > max_row_points_) {
      why = "a row would have " + std::to_string(points) + " points in one stage (at most " +
            std::to_string(max_row_points_) + ")";
      upcoming_.clear();
      return false;
    }
    return true;
  }

  void commit(const ir::Kernel& kernel) {
    kernels_.push_back(&kernel);
    read_.insert(upcoming_.begin(), upcoming_.end());
    upcoming_.clear();
    for (const ir::Tensor& t : tensors_written(kernel)) written_.insert(t.get());
  }

  const int64_t max_row_points_, max_params_;
  const std::vector<int64_t> extents_;  ///< the first kernel's
  size_t rows_ = 0;
  std::vector<const ir::Kernel*> kernels_;
  /// Tensors the run writes, reads, and the kernel being admitted reads.
  std::set<const ir::TensorNode*> written_, read_, upcoming_;
};

/// The tensors that kernels other than `members` read or write.
std::set<const ir::TensorNode*> touched_outside(const std::vector<const ir::Kernel*>& members,
                                                const ir::Program& program) {
  std::set<const ir::TensorNode*> outside;
  for (const ir::Kernel& k : program.kernels) {
    if (std::find(members.begin(), members.end(), &k) != members.end()) continue;
    for (const auto& tensors : {tensors_read(k), tensors_written(k)}) {
      for (const ir::Tensor& t : tensors) outside.insert(t.get());
    }
  }
  return outside;
}

std::string axis_names(const ir::Kernel& kernel, size_t rows) {
  std::string s;
  for (size_t i = 0; i < rows; ++i)
    s += (s.empty() ? "" : ", ") + kernel.stages.front().domain[i].var.name_hint();
  return "(" + s + ")";
}

}  // namespace

RowLocals choose_row_locals(const std::vector<const ir::Stage*>& stages,
                            const std::set<const ir::TensorNode*>& outside, size_t row_axes,
                            int64_t max_live_bytes) {
  struct Candidate {
    const ir::TensorNode* tensor;
    size_t first, last;
    int64_t bytes;
    bool read;
  };
  std::vector<Candidate> candidates;
  std::unordered_map<const ir::TensorNode*, size_t> index;
  for (size_t s = 0; s < stages.size(); ++s) {
    const ir::Tensor& t = stages[s]->target;
    if (t->role == ir::TensorRole::kTemporary && !t->is_dynamic() && !outside.count(t.get()) &&
        !index.count(t.get())) {
      int64_t elements = 1;
      bool broadcast = false;
      for (size_t d = row_axes; d < t->shape.size(); ++d) {
        elements *= t->shape[d];
        broadcast |= t->strides[d] == 0;
      }
      if (!broadcast && elements <= kRowLocalMaxElements) {
        index[t.get()] = candidates.size();
        candidates.push_back({t.get(), s, s, elements * ir::dtype_bytes(t->dtype), false});
      }
    }
    for (const ir::Expr& root : stage_expressions(*stages[s])) {
      for_each_node(root, [&](const ir::Expr& node) {
        auto* load = node.as<ir::LoadNode>();
        if (!load) return;
        if (auto it = index.find(load->tensor.get()); it != index.end()) {
          candidates[it->second].last = s;
          candidates[it->second].read = true;
        }
      });
    }
  }
  RowLocals result;
  std::vector<int64_t> all(stages.size(), 0), chosen(stages.size(), 0);
  for (const Candidate& c : candidates) {
    if (!c.read) result.unread.insert(c.tensor);
    for (size_t s = c.first; s <= c.last && c.read; ++s) all[s] += c.bytes;
  }
  for (int64_t bytes : all) result.all_bytes = std::max(result.all_bytes, bytes);
  // The shortest-lived first (the stable order keeps ties in stage order), each while the
  // bytes live at once stay within the budget.
  std::vector<Candidate> order = candidates;
  std::stable_sort(order.begin(), order.end(), [](const Candidate& a, const Candidate& b) {
    return a.last - a.first < b.last - b.first;
  });
  for (const Candidate& c : order) {
    if (!c.read) continue;
    bool fits = true;
    for (size_t s = c.first; s <= c.last && fits; ++s) fits = chosen[s] + c.bytes <= max_live_bytes;
    if (!fits) continue;
    for (size_t s = c.first; s <= c.last; ++s) chosen[s] += c.bytes;
    result.tensors.insert(c.tensor);
  }
  for (int64_t bytes : chosen) result.live_bytes = std::max(result.live_bytes, bytes);
  return result;
}

RowLocals choose_row_locals(const ir::Kernel& kernel, const ir::Program& program) {
  std::vector<const ir::Stage*> stages;
  for (const ir::Stage& s : kernel.stages) stages.push_back(&s);
  std::set<const ir::TensorNode*> outside;
  for (const ir::Kernel& k : program.kernels) {
    if (k.name == kernel.name) continue;
    for (const auto& tensors : {tensors_read(k), tensors_written(k)}) {
      for (const ir::Tensor& t : tensors) outside.insert(t.get());
    }
  }
  return choose_row_locals(stages, outside, static_cast<size_t>(kernel.row_axes));
}

RowSchedule parse_row_schedule(const std::string& text, const std::string& what) {
  if (text == "auto") return RowSchedule::kAuto;
  if (text == "block") return RowSchedule::kBlock;
  if (text == "thread") return RowSchedule::kThread;
  throw Error(what + ": expected auto, block or thread, got '" + text + "'",
              ErrorCode::kInvalidArgument);
}

void check_row_group_options(const RowGroupOptions& options) {
  const int64_t r = options.forced_rows_per_block;
  if (r < -1 || r > 1024) {
    throw Error("row groups: expected -1 (derive), 0 (never fuse) or rows per block in [1, "
                "1024], got " + std::to_string(r),
                ErrorCode::kInvalidArgument);
  }
}

ir::Program fuse_row_groups(const ir::Program& program, const RowGroupOptions& options,
                            ScheduleNotes* notes) {
  check_row_group_options(options);
  if (!program.sizes.empty()) return program;  // generic programs keep their kernels
  ir::Program out = program;
  out.kernels.clear();
  bool changed = false;
  const std::vector<ir::Kernel>& kernels = program.kernels;
  size_t i = 0;
  while (i < kernels.size()) {
    if (!ineligible(kernels[i], options).empty()) {
      out.kernels.push_back(kernels[i++]);
      continue;
    }
    GroupBuilder group(kernels[i], options.max_row_points, options.max_params);
    std::string why;
    if (group.row_axes() > 0) {
      for (size_t j = i + 1; j < kernels.size(); ++j) {
        std::string not_eligible = ineligible(kernels[j], options);
        if (!not_eligible.empty()) {
          why = "the next kernel '" + kernels[j].name + "' cannot join: " + not_eligible;
          break;
        }
        if (!group.try_add(kernels[j], why)) {
          why = "the next kernel '" + kernels[j].name + "' cannot join: " + why;
          break;
        }
      }
    }
    const std::vector<const ir::Kernel*>& members = group.kernels();
    const size_t fewest = options.forced_rows_per_block > 0
                              ? 2
                              : static_cast<size_t>(std::max<int64_t>(options.min_kernels, 2));
    if (members.size() < fewest) {
      out.kernels.push_back(kernels[i++]);
      continue;
    }
    if (options.forced_rows_per_block == 0) {
      if (notes) {
        add_schedule_note(*notes, kernels[i].name,
                          "no row group with the " + std::to_string(members.size() - 1) +
                              " kernels after it (row groups switched off by "
                              "ADJOINT_TUNE_ROW_GROUPS=0)");
      }
      for (const ir::Kernel* k : members) out.kernels.push_back(*k);
      i += members.size();
      continue;
    }
    const size_t row_axes = group.row_axes();
    const int64_t rows = group.rows();
    // The rows R is derived for (RowGroupOptions::schedule_rows).
    const int64_t schedule_rows =
        options.schedule_rows > 0 ? std::min(rows, options.schedule_rows) : rows;
    const int64_t points = group.max_points();
    std::vector<const ir::Stage*> all_stages;
    for (const ir::Kernel* k : members) {
      for (const ir::Stage& st : k->stages) all_stages.push_back(&st);
    }
    const int64_t live_bytes =
        choose_row_locals(all_stages, touched_outside(members, program), row_axes).all_bytes;
    const bool per_thread =
        options.schedule == RowSchedule::kThread ||
        (options.schedule == RowSchedule::kAuto && points <= options.thread_max_points &&
         live_bytes <= kRowLocalMaxLiveBytes);
    int64_t per_block;
    std::string reason;
    if (per_thread && options.forced_rows_per_block <= 0) {
      const int64_t spread = (schedule_rows + options.target_blocks - 1) / options.target_blocks;
      per_block = std::clamp<int64_t>((spread + 31) / 32 * 32, 32,
                                      std::max<int64_t>(32, options.thread_block_max));
      reason = "a row per thread (" + std::to_string(live_bytes) +
               " bytes of row-local temporaries live at most), " +
               std::to_string(options.target_blocks) + " blocks or more of whole warps up to " +
               std::to_string(options.thread_block_max) + " threads";
    } else if (options.forced_rows_per_block > 0) {
      per_block = options.forced_rows_per_block;
      reason = "forced by ADJOINT_TUNE_ROW_GROUPS";
    } else {
      const int64_t fit = std::max<int64_t>(1, options.block_size / points);
      const int64_t spread =
          std::max<int64_t>(1, (schedule_rows + options.target_blocks - 1) / options.target_blocks);
      per_block = std::min(fit, spread);
      reason = per_block == fit ? "as many as fill " + std::to_string(options.block_size) +
                                      " threads"
                                : "leaving " + std::to_string(options.target_blocks) +
                                      " blocks or more";
      if (options.schedule == RowSchedule::kAuto)
        reason += points > options.thread_max_points
                      ? "; not a row per thread: more than " +
                            std::to_string(options.thread_max_points) + " points per row"
                      : "; not a row per thread: " + std::to_string(live_bytes) +
                            " bytes of row-local temporaries live at once (at most " +
                            std::to_string(kRowLocalMaxLiveBytes) + ")";
    }
    per_block = std::min(per_block, rows);
    const int64_t threads =
        per_thread ? per_block : std::min<int64_t>(1024, (per_block * points + 31) / 32 * 32);
    ir::Kernel fused;
    fused.name = members.front()->name + "_to_" + members.back()->name;
    fused.row_axes = static_cast<int>(row_axes);
    fused.grid.is_set = true;
    fused.grid.block_size = static_cast<int>(threads);
    fused.grid.rows_per_block = per_block;
    fused.grid.row_per_thread = per_thread;
    std::string names;
    for (const ir::Kernel* k : members) {
      names += (names.empty() ? "" : ", ") + k->name;
      fused.stages.insert(fused.stages.end(), k->stages.begin(), k->stages.end());
    }
    if (notes) {
      ScheduleNotes kept;
      for (const ir::Kernel* k : members) {
        auto note = notes->find(k->name);
        if (note == notes->end()) continue;
        kept[k->name] = note->second;
        notes->erase(note);
      }
      add_schedule_note(
          *notes, fused.name,
          "row group: " + std::to_string(members.size()) + " kernels (" + names +
              ") fused over rows " + axis_names(*members.front(), row_axes) + ": " +
              std::to_string(rows) + " rows, " + std::to_string(per_block) +
              " per block (" + reason + "), at most " + std::to_string(points) +
              " points per row and stage, " + std::to_string(threads) +
              " threads; every read of an earlier stage stays in its row, " +
              (per_thread ? std::string("each thread runs its row's stages in order, no barrier")
                          : std::string("__syncthreads() between stages")) +
              (why.empty() ? "" : "; ends because " + why));
      for (const ir::Kernel* k : members) {
        auto note = kept.find(k->name);
        if (note == kept.end()) continue;
        size_t start = 0;
        const std::string& text = note->second;
        while (start <= text.size()) {
          size_t end = text.find('\n', start);
          if (end == std::string::npos) end = text.size();
          add_schedule_note(*notes, fused.name, k->name + ": " + text.substr(start, end - start));
          start = end + 1;
        }
      }
    }
    out.kernels.push_back(std::move(fused));
    changed = true;
    i += members.size();
  }
  return changed ? out : program;
}

}  // namespace adjoint::compiler
