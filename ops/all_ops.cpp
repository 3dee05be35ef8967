// The list of op families adjoint ships. Each family's header declares a function returning its
// OpDefinitions; adding a family is one line here.
#include "ops/grid_sampler.h"
#include "ops/grid_sampler_3d.h"
#include "ops/mhc.h"
#include "ops/mhc_post.h"
#include "ops/mhc_sinkhorn.h"
#include "ops/registry.h"
#include "ops/upsample_nearest.h"

namespace adjoint::ops {

const std::vector<OpDefinition>& all_ops() {
  static const std::vector<OpDefinition> ops = [] {
    std::vector<OpDefinition> all;
    for (auto family : {upsample_nearest_ops, grid_sampler_ops, grid_sampler_3d_ops, mhc_ops,
                        mhc_post_ops, mhc_sinkhorn_ops}) {
      for (OpDefinition& op : family()) all.push_back(std::move(op));
    }
    return all;
  }();
  return ops;
}

}  // namespace adjoint::ops
