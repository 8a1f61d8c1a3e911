// The convolution pieces of the image feature network (image_features.h): a 3x3 convolution with padding 1
// (torch.nn.Conv2d(cin, cout, 3, padding=1): weight [cout, cin, 3, 3], bias [cout]) as im2col + kernels::gemm, and
// 2x2 average pooling, with their backwards. Images here are NHWC rows (a pixel's channels contiguous: [B*H*W, C]);
// chw_to_nhwc converts the data's [B, C, H, W]. Leaves out: strides, dilation, other kernel sizes, max pooling.
#pragma once

#include <cstdint>
#include <vector>

namespace temper::flow {

void chw_to_nhwc(const float* x, int64_t B, int64_t C, int64_t H, int64_t W, float* out);

struct Conv3x3 {
  int64_t cin = 0, cout = 0;
  int64_t param_count() const { return cout * cin * 9 + cout; }  // weight then bias
  // y [B*H*W, cout] = conv(x [B*H*W, cin]); cols: scratch im2col rows [B*H*W, cin*9] (kept for the backward).
  void forward(const float* p, const float* x, int64_t B, int64_t H, int64_t W, std::vector<float>& cols,
               float* y) const;
  // grad (weight, bias) += from dy [B*H*W, cout]; dx [B*H*W, cin] = d/dx when not null.
  void backward(const float* p, const std::vector<float>& cols, const float* dy, int64_t B, int64_t H, int64_t W,
                float* grad, float* dx) const;
};

// y [B*(H/2)*(W/2), C] = means of 2x2 blocks of x [B*H*W, C] (H, W even); the backward spreads dy / 4.
void avgpool2_fwd(const float* x, int64_t B, int64_t H, int64_t W, int64_t C, float* y);
void avgpool2_bwd(const float* dy, int64_t B, int64_t H, int64_t W, int64_t C, float* dx);

}  // namespace temper::flow
