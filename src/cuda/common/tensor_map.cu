#include "cuda/common/tensor_map.h"

#include <cuda_runtime.h>

namespace winconv {
namespace {

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiled encode_tiled() {
  static const EncodeTiled fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      return EncodeTiled(nullptr);
    return reinterpret_cast<EncodeTiled>(p);
  }();
  return fn;
}

}  // namespace

bool encode_plane_box_map(CUtensorMap* map, const void* base, int esize, int64_t W, int64_t H, int64_t C,
                          int64_t B, int box_w, int box_h, int box_planes) {
  const EncodeTiled encode = encode_tiled();
  if (encode == nullptr || base == nullptr || (esize != 2 && esize != 4)) return false;
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0 || (W * esize) % 16 != 0 || (int64_t(box_w) * esize) % 16 != 0)
    return false;
  if (box_w < 1 || box_h < 1 || box_planes < 1 || box_w > 256 || box_h > 256 || box_planes > 256) return false;
  const int64_t limit = int64_t(1) << 32;
  if (W > limit || H > limit || C > limit || B > limit) return false;
  const cuuint64_t dims[4] = {cuuint64_t(W), cuuint64_t(H), cuuint64_t(C), cuuint64_t(B)};
  const cuuint64_t strides[3] = {cuuint64_t(W * esize), cuuint64_t(H * W * esize), cuuint64_t(C * H * W * esize)};
  const cuuint32_t box[4] = {cuuint32_t(box_w), cuuint32_t(box_h), 1u, cuuint32_t(box_planes)};
  const cuuint32_t unit[4] = {1u, 1u, 1u, 1u};
  // Raw elements: any 2- or 4-byte type copies bit for bit, and zero bits are +0 in each.
  const CUtensorMapDataType type = esize == 4 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32 : CU_TENSOR_MAP_DATA_TYPE_UINT16;
  return encode(map, type, 4, const_cast<void*>(base), dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace winconv
