#include "v41_backend.h"

#include "frank/core/error.h"
#include "frank/engine/dspark_drafter.h"
#include "frank/engine/v41_verify_target.h"

#ifdef FRANK_WITH_CUDA
#include "frank/cuda/cuda_dspark_drafter.h"
#include "frank/cuda/cuda_v41_model.h"
#include "frank/cuda/cuda_v41_verify_target.h"
#endif

namespace frank::cli {

#ifdef FRANK_WITH_CUDA
struct V41Backend::Gpu {
  cuda::CudaV41Model model;
};
#else
struct V41Backend::Gpu {};
#endif

V41Backend::V41Backend(const engine::V41Model& model, const ModelSource& source) : model_(model) {
  source.check_backend();
#ifdef FRANK_WITH_CUDA
  if (source.backend == "cuda") {
    gpu_.reset(new Gpu{{model, cuda::parse_weight_type(source.weights_dtype)}});  // built in place: not movable
    gpu_->model.set_mhc_overlap(source.mhc_overlap);
  }
#endif
  if (source.mhc_overlap && !gpu_) throw Error("--mhc-overlap: needs --backend cuda");
}

V41Backend::~V41Backend() = default;

std::unique_ptr<engine::SessionRunner> V41Backend::new_runner() {
#ifdef FRANK_WITH_CUDA
  if (gpu_) return std::make_unique<cuda::CudaV41Runner>(gpu_->model);
#endif
  return std::make_unique<engine::V41Runner>(model_);
}

V41Speculation V41Backend::new_speculation() {
  if (!model_.weights().dspark)
    throw Error("--draft-tokens: the checkpoint has no DSpark drafter (no mtp.* tensors)");
#ifdef FRANK_WITH_CUDA
  if (gpu_) {  // the target owns its device session; the drafter reads its features on the device
    auto target = std::make_unique<cuda::CudaV41VerifyTarget>(gpu_->model, /*with_features=*/true);
    auto drafter = std::make_unique<cuda::CudaDSparkDrafter>(gpu_->model, *target);
    return {nullptr, {std::move(target), std::move(drafter)}};
  }
#endif
  auto session = std::make_shared<engine::V41Session>(model_.new_session());
  auto target = std::make_unique<engine::CpuV41VerifyTarget>(model_, *session, /*with_features=*/true);
  auto drafter = std::make_unique<engine::DSparkDrafter>(model_, *target);
  return {std::move(session), {std::move(target), std::move(drafter)}};
}

}  // namespace frank::cli
