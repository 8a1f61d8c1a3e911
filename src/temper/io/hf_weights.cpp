#include "temper/io/hf_weights.h"

#include "temper/core/error.h"

namespace temper::io {

void load_hf_weights(Transformer& model, const SafetensorsFile& file) {
  for (const ParamEntry& e : model.layout().entries()) {
    TEMPER_CHECK(file.has(e.name)) << file.path() << ": missing tensor '" << e.name << "' (model "
                                   << model.config().summary() << ")";
    Tensor t = file.get(e.name);
    TEMPER_CHECK(t.shape() == e.shape) << file.path() << ": tensor '" << e.name << "' has shape " << t.shape().str()
                                       << ", the config implies " << e.shape.str();
    copy_to_f32(t, model.params() + e.offset, e.numel(), file.path() + ": tensor '" + e.name + "'");
  }
  model.params_updated();
}

}  // namespace temper::io
