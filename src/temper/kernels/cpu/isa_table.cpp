#include "temper/kernels/cpu/isa_table.h"

#include "temper/core/error.h"
#include "temper/kernels/cpu/attention_dpbf16.h"

namespace temper::kernels {
namespace isa_scalar { IsaTable make_table(); }
namespace isa_avx2 { IsaTable make_table(); }
namespace isa_avx512 { IsaTable make_table(); }
namespace attn_scalar {
void fill_attention(IsaTable& t);
}
namespace attn_avx2 {
void fill_attention(IsaTable& t);
}
namespace attn_avx512 {
void fill_attention(IsaTable& t);
}

namespace held_scalar {
void fill_held(IsaTable& t);
}
namespace held_avx2 {
void fill_held(IsaTable& t);
}
namespace held_avx512 {
void fill_held(IsaTable& t);
}
namespace held_dpbf16 {
void fill_held_dpbf16(IsaTable& t);
}

namespace {
// The ISA's held-weight decode products (held_gemv.inc); the bf16 one on VDPBF16PS where the CPU has AVX512-BF16.
void with_held(IsaTable& t, Isa isa) {
  if (isa == Isa::scalar) held_scalar::fill_held(t);
  if (isa == Isa::avx2) held_avx2::fill_held(t);
  if (isa == Isa::avx512) {
    held_avx512::fill_held(t);
    if (cpu_features().avx512_bf16) held_dpbf16::fill_held_dpbf16(t);
  }
}

// The ISA's attention tile products (attention_tiles.inc); bf16 on AVX512-BF16 dot products (and its rounding) where
// the CPU has them.
IsaTable with_isa(IsaTable t, Isa isa) {
  t.isa = isa;
  if (isa == Isa::scalar) attn_scalar::fill_attention(t);
  if (isa == Isa::avx2) attn_avx2::fill_attention(t);
  if (isa == Isa::avx512) {
    attn_avx512::fill_attention(t);
    if (cpu_features().avx512_bf16) fill_attention_dpbf16(t);
  }
  with_held(t, isa);
  return t;
}
}  // namespace

// Each table is built only after the CPU is known to support its ISA: make_table() itself is
// compiled with that ISA's -m flags and may use its registers.
const IsaTable& isa_table(Isa isa) {
  TEMPER_CHECK(cpu_isa_supported(isa)) << "ISA " << isa_name(isa) << " not supported by this CPU";
  switch (isa) {
    case Isa::scalar: {
      static const IsaTable t = with_isa(isa_scalar::make_table(), Isa::scalar);
      return t;
    }
    case Isa::avx2: {
      static const IsaTable t = with_isa(isa_avx2::make_table(), Isa::avx2);
      return t;
    }
    case Isa::avx512: {
      static const IsaTable t = with_isa(isa_avx512::make_table(), Isa::avx512);
      return t;
    }
  }
  TEMPER_FAIL() << "unknown ISA";
}

const IsaTable& isa_table() { return isa_table(cpu_isa()); }

}  // namespace temper::kernels
