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

const IsaTable& isa_table(Isa isa) {
  static const IsaTable tables[3] = {with_isa(isa_scalar::make_table(), Isa::scalar),
                                     with_isa(isa_avx2::make_table(), Isa::avx2),
                                     with_isa(isa_avx512::make_table(), Isa::avx512)};
  TEMPER_CHECK(cpu_isa_supported(isa)) << "ISA " << isa_name(isa) << " not supported by this CPU";
  return tables[static_cast<int>(isa)];
}

const IsaTable& isa_table() { return isa_table(cpu_isa()); }

}  // namespace temper::kernels
