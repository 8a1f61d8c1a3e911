#include "temper/io/gguf_quant.h"

#include <cmath>
#include <cstring>

#include "temper/core/dtype.h"
#include "temper/core/error.h"

namespace temper::io {
namespace {

struct TypeRow {
  uint32_t code;
  GgmlTypeInfo info;
};

// ggml.c type_traits: blck_size and type_size of every type a GGUF file may hold.
// clang-format off
constexpr TypeRow kTypes[] = {
    {0, {"F32", 1, 4}},          {1, {"F16", 1, 2}},          {2, {"Q4_0", 32, 18}},      {3, {"Q4_1", 32, 20}},
    {6, {"Q5_0", 32, 22}},       {7, {"Q5_1", 32, 24}},       {8, {"Q8_0", 32, 34}},      {9, {"Q8_1", 32, 36}},
    {10, {"Q2_K", 256, 84}},     {11, {"Q3_K", 256, 110}},    {12, {"Q4_K", 256, 144}},   {13, {"Q5_K", 256, 176}},
    {14, {"Q6_K", 256, 210}},    {15, {"Q8_K", 256, 292}},    {16, {"IQ2_XXS", 256, 66}}, {17, {"IQ2_XS", 256, 74}},
    {18, {"IQ3_XXS", 256, 98}},  {19, {"IQ1_S", 256, 50}},    {20, {"IQ4_NL", 32, 18}},   {21, {"IQ3_S", 256, 110}},
    {22, {"IQ2_S", 256, 82}},    {23, {"IQ4_XS", 256, 136}},  {24, {"I8", 1, 1}},         {25, {"I16", 1, 2}},
    {26, {"I32", 1, 4}},         {27, {"I64", 1, 8}},         {28, {"F64", 1, 8}},        {29, {"IQ1_M", 256, 56}},
    {30, {"BF16", 1, 2}},        {34, {"TQ1_0", 256, 54}},    {35, {"TQ2_0", 256, 66}},
};
// clang-format on

// f32 stored products as numpy computes them (d * q, then + m): two roundings, no FMA (the io
// library is built for baseline x86-64 with -std=c++20, so the compiler does not contract).
void dequant_q8_0(const BlockQ8_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(b[i].d);
    for (int j = 0; j < kQK; ++j) y[i * kQK + j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

void dequant_q4_0(const BlockQ4_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(b[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[i * kQK + j] = static_cast<float>((b[i].qs[j] & 0x0f) - 8) * d;
      y[i * kQK + j + kQK / 2] = static_cast<float>((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequant_q4_1(const BlockQ4_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(b[i].d), m = f16_to_f32(b[i].m);
    for (int j = 0; j < kQK / 2; ++j) {
      y[i * kQK + j] = static_cast<float>(b[i].qs[j] & 0x0f) * d + m;
      y[i * kQK + j + kQK / 2] = static_cast<float>(b[i].qs[j] >> 4) * d + m;
    }
  }
}

void quant_q8_0(const float* x, BlockQ8_0* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) {
      const float a = std::fabs(x[i * kQK + j]);
      TEMPER_CHECK(std::isfinite(a)) << "Q8_0: cannot encode the non-finite value " << x[i * kQK + j] << " (element "
                                     << i * kQK + j << " of the row)";
      amax = std::fmax(amax, a);
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = f32_to_f16(d);
    for (int j = 0; j < kQK; ++j) b[i].qs[j] = static_cast<int8_t>(std::round(x[i * kQK + j] * id));
  }
}

}  // namespace

const GgmlTypeInfo* ggml_type_info(uint32_t code) {
  for (const TypeRow& r : kTypes)
    if (r.code == code) return &r.info;
  return nullptr;
}

const GgmlTypeInfo& ggml_type_info(GgmlType t) {
  const GgmlTypeInfo* i = ggml_type_info(static_cast<uint32_t>(t));
  TEMPER_CHECK(i != nullptr) << "unknown ggml type code " << static_cast<uint32_t>(t);
  return *i;
}

std::string_view ggml_type_name(GgmlType t) {
  const GgmlTypeInfo* i = ggml_type_info(static_cast<uint32_t>(t));
  return i ? i->name : std::string_view("?");
}

bool ggml_type_dequantizable(GgmlType t) {
  switch (t) {
    case GgmlType::f32:
    case GgmlType::f16:
    case GgmlType::bf16:
    case GgmlType::q8_0:
    case GgmlType::q4_0:
    case GgmlType::q4_1:
      return true;
    default:
      return false;
  }
}

std::string ggml_dequantizable_list() {
  return "F32, F16, BF16, Q8_0, Q4_0, Q4_1";
}

size_t ggml_row_bytes(GgmlType t, int64_t n) {
  const GgmlTypeInfo& i = ggml_type_info(t);
  TEMPER_CHECK(n >= 0 && n % i.block_size == 0)
      << "a row of " << n << " elements is not a whole number of " << i.name << " blocks of " << i.block_size;
  return static_cast<size_t>(n / i.block_size) * i.block_bytes;
}

void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n) {
  TEMPER_CHECK(ggml_type_dequantizable(t))
      << "cannot decode ggml type " << ggml_type_name(t) << " (decodable: " << ggml_dequantizable_list() << ")";
  const int64_t bs = ggml_type_info(t).block_size;
  TEMPER_CHECK(n % bs == 0) << ggml_type_name(t) << ": " << n << " elements is not a multiple of the block size " << bs;
  switch (t) {
    case GgmlType::f32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      break;
    case GgmlType::f16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      break;
    }
    case GgmlType::bf16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      break;
    }
    case GgmlType::q8_0:
      dequant_q8_0(static_cast<const BlockQ8_0*>(src), dst, n / kQK);
      break;
    case GgmlType::q4_0:
      dequant_q4_0(static_cast<const BlockQ4_0*>(src), dst, n / kQK);
      break;
    case GgmlType::q4_1:
      dequant_q4_1(static_cast<const BlockQ4_1*>(src), dst, n / kQK);
      break;
    default:
      break;
  }
}

void quantize_row(GgmlType t, const float* src, void* dst, int64_t n) {
  const int64_t bs = ggml_type_info(t).block_size;
  TEMPER_CHECK(n % bs == 0) << ggml_type_name(t) << ": " << n << " elements is not a multiple of the block size " << bs;
  switch (t) {
    case GgmlType::f32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      break;
    case GgmlType::f16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
      break;
    }
    case GgmlType::bf16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      break;
    }
    case GgmlType::q8_0:
      quant_q8_0(src, static_cast<BlockQ8_0*>(dst), n / kQK);
      break;
    default:
      TEMPER_FAIL() << "cannot encode ggml type " << ggml_type_name(t) << " (encodable: F32, F16, BF16, Q8_0)";
  }
}

void QuantView::dequantize_rows(int64_t begin, int64_t end, float* dst) const {
  TEMPER_CHECK(0 <= begin && begin <= end && end <= rows)
      << "rows [" << begin << ", " << end << ") outside a tensor of " << rows << " rows";
  for (int64_t r = begin; r < end; ++r) dequantize_row(type, row(r), dst + (r - begin) * cols, cols);
}

}  // namespace temper::io
