#include "temper/io/hf_weights.h"

#include "temper/core/error.h"

namespace temper::io {

namespace {
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

void load_hf_weights(Transformer& model, const SafetensorsSet& file, ExtraTensors extra) {
  // Every tensor of the file must be used: an extra one means the file holds a different model
  // (more layers, biases this config does not have) and loading it would be silently wrong.
  for (const std::string& name : file.names()) {
    if (extra == ExtraTensors::ignore) break;
    bool rotary = ends_with(name, "rotary_emb.inv_freq");
    bool tied_head = name == "lm_head.weight" && model.config().tie_word_embeddings;
    TEMPER_CHECK(model.layout().find(name) || rotary || tied_head)
        << file.path() << ": tensor '" << name << "' is not a parameter of the model the config describes ("
        << model.config().summary() << ")";
  }
  for (const ParamEntry& e : model.layout().entries()) {
    TEMPER_CHECK(file.has(e.name)) << file.path() << ": missing tensor '" << e.name << "' (model "
                                   << model.config().summary() << ")";
    Tensor t = file.get(e.name);
    TEMPER_CHECK(t.shape() == e.shape) << file.file_of(e.name) << ": tensor '" << e.name << "' has shape " << t.shape().str()
                                       << ", the config implies " << e.shape.str();
    copy_to_f32(t, model.params() + e.offset, e.numel(), file.file_of(e.name) + ": tensor '" + e.name + "'");
    file.release(e.name);                       // the file's pages of it: read once
    model.params_written(e.offset, e.numel());  // a planned held base takes the products as they complete
  }
  model.params_updated();
}

}  // namespace temper::io
