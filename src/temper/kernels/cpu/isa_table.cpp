#include "temper/kernels/cpu/isa_table.h"

#include "temper/core/error.h"

namespace temper::kernels {
namespace isa_scalar { IsaTable make_table(); }
namespace isa_avx2 { IsaTable make_table(); }
namespace isa_avx512 { IsaTable make_table(); }

namespace {
IsaTable with_isa(IsaTable t, Isa isa) {
  t.isa = isa;
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
